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

/** Who an object the client could not read is, as far as its answer says. */
export interface UnreadableObject {
  namespace?: string;
  name?: string;
  uid?: string;
  resourceVersion?: string;
}

/**
 * A watch event the client could not read (over its answer cap, or not JSON): the stream went on
 * past it. `of` is the event's own type, when the answer said it.
 */
export interface UnreadableEvent {
  type: 'UNREADABLE';
  of?: string;
  object: UnreadableObject;
  reason: string;
}

export interface GetOptions {
  /**
   * Paths of string values (`metadata.continue`, `items.0.metadata.name`) to read from an answer
   * over the cap: it is then read through, holding none of it, and the KubeAnswerTooLargeError
   * carries what was found. Without it, an answer over the cap is cut off at the cap.
   */
  scanOversized?: readonly string[];
}

/**
 * The calls made to the API server. Every one rejects with a KubeApiError (client.ts) when the API
 * server answers with an error status, and with another Error when no answer came.
 */
export interface KubeApi {
  /** An object, or a list (`{ items, metadata: { resourceVersion, continue } }`) for a collection path. */
  get<T>(path: string, query?: Query, options?: GetOptions): Promise<T>;
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
   * the connection fails (rejects). `signal` ends it early (resolves). An event it cannot read is
   * told as UNREADABLE, and the stream goes on.
   */
  watch<T>(path: string, query: Query, onEvent: (event: WatchEvent<T> | UnreadableEvent) => void, signal: AbortSignal): Promise<void>;
}
