// List+watch that keeps only a projection of each object: what a controller needs, not the whole
// object, so that watching every Pod of a large cluster stays small. Lists in pages, resumes the
// watch from the last resource version (bookmarks keep it fresh), re-lists after 410 Gone, and backs
// off on errors without ever giving up. An object it cannot read (served over the client's cap, or
// not JSON) is left out, as if deleted, and the list or watch goes on past it: it is counted
// (onUnreadable) and logged, once per object.
//
// Where lists are served from. Every list is paged (`limit`): what one answer holds, and so what is
// parsed at once, is bounded by the page size whatever anyone creates (requests labelled with a
// node, Pods bound to it: both are anyone's to create in their namespace). So never
// resourceVersion=0, which the API server's watch cache answers whole, ignoring `limit`.
// - The first list is a consistent read. When an API server restarts, every watch on it ends and
//   the new server's watch cache no longer holds our resource versions: every informer of every
//   agent gets 410 Gone and re-lists at once. So a re-list asks for data not older than what this
//   informer has already seen (resourceVersion=<newest seen>, resourceVersionMatch=NotOlderThan),
//   which an API server may answer from its watch cache (older ones read a paged list from etcd):
//   the answer is at least as new as everything already applied (or 504, and we fall back to a
//   consistent read), so the informer never goes back in time, and it watches from the list's own
//   resourceVersion, so no change between the list and the watch is missed.
// - A continue page carries only its token (the token pins the version; a resourceVersion next to
//   it is invalid).
import type { KubeApi, Query, UnreadableEvent, UnreadableObject, WatchEvent } from './kube/api.ts';
import { listPaged, PageSizing } from './kube/list.ts';
import type { Logger } from './log.ts';
import { errorMessage, statusCode } from './log.ts';

/** What the informer reads of every object it watches: its key and its resourceVersion. */
export interface WatchedObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

export interface InformerOptions<T extends WatchedObject, P> {
  client: Pick<KubeApi, 'get' | 'watch'>;
  /** API path to list and watch, e.g. /api/v1/pods */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** What to keep of an object; undefined keeps nothing (the object is of no interest). */
  project: (obj: T) => P | undefined;
  /** Called for every change of a kept projection, and when one goes away (projection undefined). */
  onChange: (key: string, projection: P | undefined) => void;
  /** Values to look projections up by (byIndex) without scanning them all. */
  indexBy?: (projection: P) => readonly string[];
  onRestart?: () => void;
  /** Told of each object left out because it could not be read (over the answer cap, or not JSON). */
  onUnreadable?: (object: UnreadableObject) => void;
  log: Logger;
  /** Objects per list page to start with (default 500); a page over the client's answer cap, or not served in time, is asked again smaller, and relists keep the size learned (listPaged). */
  pageSize?: number;
  /**
   * A resource that may not be served (its CRD not installed) or not be granted (an older RBAC): a
   * 404 or 403 counts as an empty, synced list, said once in the log, and is asked again every
   * ABSENT_RETRY_MS.
   */
  mayBeAbsent?: boolean;
  /** One namespace's collection path, for refreshNamespace. */
  namespacePath?: (namespace: string) => string;
  /** A projection kept in part (project() kept less of its object than it would now): refreshNamespace reads its object again. */
  isPartial?: (projection: P) => boolean;
}

const DEFAULT_PAGE_SIZE = 500;

const MAX_BACKOFF_MS = 30_000;
/** Unreadable objects logged already, at most: then the log starts over. */
const MAX_LOGGED_UNREADABLE = 1000;
/** How often a resource that was not served is asked for again. */
const ABSENT_RETRY_MS = 60_000;

/** Spreads the server-side ends of watches over 5–10 minutes, as client-go does. */
function watchTimeoutSeconds(): number {
  return 300 + Math.floor(Math.random() * 300);
}

/** The cache key of a namespaced object, `<namespace>/<name>`: also how Pods are queued and logged. */
export function namespacedKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The namespace and name of a namespaced key. */
export function splitKey(key: string): [namespace: string, name: string] {
  const slash = key.indexOf('/');
  return [key.slice(0, slash), key.slice(slash + 1)];
}

export function objectKey(obj: WatchedObject): string {
  const { namespace, name } = obj.metadata ?? {};
  return namespace ? namespacedKey(namespace, name ?? '') : (name ?? '');
}

export class ProjectingInformer<T extends WatchedObject, P> {
  private readonly items = new Map<string, P>();
  /** indexBy value → keys, and key → its indexBy values. */
  private readonly index = new Map<string, Set<string>>();
  private readonly indexed = new Map<string, readonly string[]>();
  /** Namespace → the keys kept in it (namespaced objects only). */
  private readonly byNamespace = new Map<string, Set<string>>();
  private readonly o: InformerOptions<T, P>;
  /** The list's page size, as the relists before this one left it. */
  private readonly pageSizing: PageSizing;
  /** Where the watch resumes; empty: list first. */
  private resourceVersion = '';
  /** The newest resource version applied (kept across 410 Gone): a re-list is never older. */
  private newestSeen = '';
  private synced = false;
  /** The watch failed and has not delivered an event, a bookmark or a list since: what is kept may be behind. */
  private failing = false;
  private stopped = false;
  private backoffMs = 500;
  private abort: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Unreadable objects logged already, by key. */
  private readonly loggedUnreadable = new Set<string>();

  constructor(options: InformerOptions<T, P>) {
    this.o = options;
    this.pageSizing = new PageSizing(options.pageSize ?? DEFAULT_PAGE_SIZE);
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort?.abort();
  }

  isSynced(): boolean {
    return this.synced;
  }

  /**
   * Synced, and the watch has not failed since it last delivered something: what is kept is as
   * current as the watch can tell. False from a failed watch until its next event, bookmark or list.
   */
  isCurrent(): boolean {
    return this.synced && !this.failing;
  }

  get(key: string): P | undefined {
    return this.items.get(key);
  }

  keys(): IterableIterator<string> {
    return this.items.keys();
  }

  size(): number {
    return this.items.size;
  }

  /** The projections with `value` among their indexBy values. */
  byIndex(value: string): P[] {
    return [...(this.index.get(value) ?? [])].map((key) => this.items.get(key)!);
  }

  /**
   * Lists one namespace's objects (a consistent read) and applies those whose kept projection is
   * partial: for when project() would now keep more of them. The watch stays the source of every
   * change; an object it brought in full meanwhile is left as it is.
   */
  async refreshNamespace(namespace: string): Promise<void> {
    const { namespacePath, isPartial } = this.o;
    if (!namespacePath || !isPartial) throw new Error('refreshNamespace needs the namespacePath and isPartial options');
    const pages = { first: {}, next: {}, pageSize: this.pageSizing.max, onUnreadable: (o: UnreadableObject, reason: string) => this.unreadable(o, reason) };
    await listPaged<T>(this.o.client, namespacePath(namespace), pages, (items) => {
      for (const obj of items) {
        const key = objectKey(obj);
        const kept = this.items.get(key);
        if (kept !== undefined && isPartial(kept)) this.apply(key, obj);
      }
    });
  }

  /** Keeps of each object of the namespace only `narrow(projection)`: for when project() would now keep less of them. */
  narrowNamespace(namespace: string, narrow: (projection: P) => P): void {
    for (const key of this.keysIn(namespace)) this.store(key, narrow(this.items.get(key)!));
  }

  /** The keys kept in one namespace. */
  keysIn(namespace: string): string[] {
    return [...(this.byNamespace.get(namespace) ?? [])];
  }

  /** All kept projections, or those of one namespace. */
  list(namespace?: string): P[] {
    const keys = namespace === undefined ? this.items.keys() : this.keysIn(namespace);
    return [...keys].map((key) => this.items.get(key)!);
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    try {
      if (!this.resourceVersion) await this.relist();
      this.abort = new AbortController();
      await this.o.client.watch<T & { code?: number }>(
        this.o.path,
        { ...this.selectors(), resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: watchTimeoutSeconds() },
        (event) => this.onEvent(event),
        this.abort.signal,
      );
      this.onDone(undefined);
    } catch (err) {
      this.onDone(err);
    }
  }

  private selectors() {
    return { labelSelector: this.o.labelSelector, fieldSelector: this.o.fieldSelector };
  }

  private async relist(): Promise<void> {
    const seen = new Set<string>();
    let version: string;
    try {
      const pages = { first: this.firstPageQuery(), next: this.selectors(), pageSize: this.pageSizing, onUnreadable: (o: UnreadableObject, reason: string) => this.unreadable(o, reason) };
      version = await listPaged<T>(this.o.client, this.o.path, pages, (items) => {
        for (const obj of items) {
          const key = objectKey(obj);
          seen.add(key);
          this.apply(key, obj);
        }
      });
    } catch (err) {
      // 504 to a not-older-than list: the server's watch cache has not reached our version (a
      // lagging or restored API server). A consistent read is never older; the next list is one.
      if (statusCode(err) === 504) this.newestSeen = '';
      throw err;
    }
    for (const key of [...this.items.keys()]) {
      if (!seen.has(key)) this.remove(key);
    }
    this.resourceVersion = version;
    this.newestSeen = version || this.newestSeen;
    this.synced = true;
    this.failing = false;
  }

  /** The first page's query: see "Where lists are served from" at the top of this file. */
  private firstPageQuery(): Query {
    if (this.newestSeen) return { ...this.selectors(), resourceVersion: this.newestSeen, resourceVersionMatch: 'NotOlderThan' };
    return this.selectors();
  }

  private onEvent(event: WatchEvent<T & { code?: number }> | UnreadableEvent): void {
    if (event.type === 'UNREADABLE') {
      this.unreadable(event.object, event.reason);
      if (event.object.name) this.remove(objectKey({ metadata: event.object }));
      this.advance(event.object.resourceVersion);
      return;
    }
    const { type: phase, object: obj } = event;
    if (phase === 'ERROR') {
      // 410 Gone: our resource version is too old; the watch ends and we re-list.
      if (obj.code === 410) this.resourceVersion = '';
      return;
    }
    if (phase === 'ADDED' || phase === 'MODIFIED') this.apply(objectKey(obj), obj);
    else if (phase === 'DELETED') this.remove(objectKey(obj));
    this.advance(obj.metadata?.resourceVersion);
  }

  /** The watch got past an event: it resumes after it. */
  private advance(resourceVersion: string | undefined): void {
    this.resourceVersion = resourceVersion ?? this.resourceVersion;
    this.newestSeen = this.resourceVersion || this.newestSeen;
    this.backoffMs = 500;
    this.failing = false;
  }

  /** An object left out: counted each time, logged once per object. */
  private unreadable(object: UnreadableObject, reason: string): void {
    this.o.onUnreadable?.(object);
    const seen = objectKey({ metadata: object });
    if (this.loggedUnreadable.has(seen)) return;
    if (this.loggedUnreadable.size >= MAX_LOGGED_UNREADABLE) this.loggedUnreadable.clear();
    this.loggedUnreadable.add(seen);
    this.o.log.warn('an object could not be read: left out, as if deleted', { path: this.o.path, namespace: object.namespace, name: object.name, resourceVersion: object.resourceVersion, reason });
  }

  private onDone(err: unknown): void {
    this.abort = undefined;
    if (this.stopped) return;
    if (statusCode(err) === 410) this.resourceVersion = '';
    // Not served (404), or not ours to read (403: an RBAC from before the resource existed).
    if (this.o.mayBeAbsent && (statusCode(err) === 404 || statusCode(err) === 403)) {
      this.absent();
      return;
    }
    if (!err) {
      // The server closed a healthy watch (its timeout): resume at once from where we were.
      void this.run();
      return;
    }
    this.failing = true;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    this.o.log.warn('watch failed, restarting', { path: this.o.path, error: errorMessage(err), retryInMs: delay });
    this.o.onRestart?.();
    this.timer = setTimeout(() => void this.run(), delay);
    this.timer.unref();
  }

  private apply(key: string, obj: T): void {
    const projection = this.o.project(obj);
    if (projection === undefined) {
      this.remove(key);
      return;
    }
    this.store(key, projection);
  }

  private store(key: string, projection: P): void {
    if (!this.items.has(key)) this.inNamespace(key, true);
    this.items.set(key, projection);
    if (this.o.indexBy) this.reindex(key, this.o.indexBy(projection));
    this.o.onChange(key, projection);
  }

  /** Not served: nothing kept, synced all the same, asked again slowly. */
  private absent(): void {
    if (!this.synced) this.o.log.warn('resource not served or not granted (its CRD or RBAC not installed?): taken as empty', { path: this.o.path, retryInMs: ABSENT_RETRY_MS });
    for (const key of [...this.items.keys()]) this.remove(key);
    this.resourceVersion = '';
    this.synced = true;
    this.failing = false;
    this.timer = setTimeout(() => void this.run(), ABSENT_RETRY_MS);
    this.timer.unref();
  }

  private remove(key: string): void {
    if (!this.items.delete(key)) return;
    this.inNamespace(key, false);
    this.reindex(key, []);
    this.o.onChange(key, undefined);
  }

  private inNamespace(key: string, kept: boolean): void {
    if (!key.includes('/')) return;
    const [namespace] = splitKey(key);
    let keys = this.byNamespace.get(namespace);
    if (kept) {
      if (!keys) this.byNamespace.set(namespace, (keys = new Set()));
      keys.add(key);
    } else if (keys) {
      keys.delete(key);
      if (keys.size === 0) this.byNamespace.delete(namespace);
    }
  }

  private reindex(key: string, values: readonly string[]): void {
    for (const old of this.indexed.get(key) ?? []) {
      const keys = this.index.get(old)!;
      keys.delete(key);
      if (keys.size === 0) this.index.delete(old);
    }
    this.indexed.delete(key);
    if (values.length === 0) return;
    for (const value of values) {
      let keys = this.index.get(value);
      if (!keys) this.index.set(value, (keys = new Set()));
      keys.add(key);
    }
    this.indexed.set(key, values);
  }
}

