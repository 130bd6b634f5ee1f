// The Kubernetes API as the programs call it: a handful of REST verbs on paths (paths.ts builds
// them). KubeClient (client.ts) answers over HTTP; the fake in test/support/fake-api.ts answers from memory, so
// that the I/O around the rules (the reconcilers, the informer, leader election, the event
// recorder) is unit-tested against the API server's answers without a cluster. Each of those takes
// only the verbs it calls, as a Pick of KubeApi.

/** A list or watch query, a create's dryRun, ...: values left undefined or empty are not sent. */
export type Query = Record<string, string | number | boolean | undefined>;

/** How a PATCH body is read: JSON merge patch, strategic merge patch, or JSON patch. */
export type PatchType = 'merge' | 'strategic' | 'json';

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/**
 * The calls made to the API server. Every one rejects with a KubeApiError (client.ts) when the API
 * server answers with an error status, and with another Error when no answer came.
 */
export interface KubeApi {
  /** An object, or a list (`{ items, metadata: { resourceVersion, continue } }`) for a collection path. */
  get<T>(path: string, query?: Query): Promise<T>;
  /** POST to a collection path; 409 when an object of that name exists. */
  create<T>(path: string, body: unknown, query?: Query): Promise<T>;
  /** PUT of a whole object; 409 when the body's resourceVersion is not the stored one. */
  replace<T>(path: string, body: unknown): Promise<T>;
  /** PATCH; a resourceVersion in the body's metadata is a precondition (409 when it is not the stored one). */
  patch<T>(path: string, body: unknown, type: PatchType): Promise<T>;
  /** DELETE; the body may carry preconditions (`{ preconditions: { uid } }`: 409 when they fail). */
  delete<T>(path: string, body?: unknown): Promise<T>;
  /**
   * Streams a watch: calls `onEvent` for each event until the server ends the stream (resolves) or
   * the connection fails (rejects). `signal` ends it early (resolves).
   */
  watch<T>(path: string, query: Query, onEvent: (event: WatchEvent<T>) => void, signal: AbortSignal): Promise<void>;
}
