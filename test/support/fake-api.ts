// An API server in memory, for the unit tests of the code around the rules (never imported by the
// programs). It answers the calls of KubeApi (common/kube/api.ts) the way the API server does in the respects
// that code depends on, and no further:
// - objects stored by path, each write giving a new resourceVersion (one counter for all);
// - create: 409 when the name is taken, generateName, uid and creationTimestamp set, dryRun=All not stored;
// - get: 404 when absent; on a collection path a list (label and field selectors of `=`, `==`, `!=`,
//   `key`, `!key`; `limit` pages with a continue token, each list one snapshot);
// - replace and patch: a resourceVersion in the body is a precondition (409 when stale, as is a uid);
//   merge patch as RFC 7386 (null removes); strategic merge patch the same, except that lists of
//   objects are merged by `name` (containers, container statuses) or `type` (conditions); a patch
//   that changes nothing keeps the resourceVersion;
// - the status subresource (Pods, Nodes, requests, sidecar policies): a write to `.../status` changes only `status`,
//   a write to the object everything but `status`;
// - delete: 404 when absent, preconditions (uid, resourceVersion) → 409, an object with finalizers
//   gets a deletionTimestamp and goes once a write leaves it with none;
// - watch: the changes after the query's resourceVersion (every object first for "" or "0"), an
//   object that stops (starts) matching the selectors as DELETED (ADDED), 410 for a version before
//   compact(), bookmarks when asked for; expireWatches(), endWatches() end them as the server does;
// - an object the `oversized` option picks is served as the client serves one over its answer cap:
//   an UNREADABLE watch event, a list page over the cap (KubeAnswerTooLargeError; read through, with
//   the page's metadata and the object's identity, for a page of one).
// Every call is recorded (`calls`), and a test injects faults into the next matching calls: an
// error status (404, 409, 429, 500, ...), any Error (networkError()), or a function run before the
// call is served (to hold it, delay it, or let another writer go first).
import type { KubeApi, PatchType, Query, UnreadableEvent, WatchEvent } from '../../common/kube/api.ts';
import { KubeAnswerTooLargeError, KubeApiError, MAX_ANSWER_BYTES } from '../../common/kube/client.ts';

export type FakeMethod = 'get' | 'create' | 'replace' | 'patch' | 'delete' | 'watch';

const HTTP_METHOD: Record<FakeMethod, string> = { get: 'GET', create: 'POST', replace: 'PUT', patch: 'PATCH', delete: 'DELETE', watch: 'GET' };

export interface FakeCall {
  method: FakeMethod;
  path: string;
  query?: Query;
  /** The body as it went over the wire (a JSON copy). */
  body?: unknown;
  patchType?: PatchType;
  /** When the call was made (the fake's clock). */
  atMs: number;
  /** The HTTP status it was answered with (0: no answer, a network error); unset while under way. */
  status?: number;
}

/** What an injected fault does to a call: answer this status, throw this error, or run this first. */
export type Fault = number | Error | ((call: FakeCall) => void | Promise<void>);

export interface CallMatch {
  method?: FakeMethod;
  /** The exact path, or a pattern it matches. */
  path?: string | RegExp;
}

interface Meta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  finalizers?: string[];
}

type Obj = Record<string, unknown> & { metadata?: Meta };

/** The resources whose status is written through `.../status` only. */
const STATUS_SUBRESOURCE = new Set(['pods', 'nodes', 'containerrecreaterequests', 'clustersidecarpolicies', 'sidecarpolicies']);

const REASONS: Record<number, string> = {
  400: 'BadRequest', 403: 'Forbidden', 404: 'NotFound', 409: 'Conflict', 410: 'Expired', 422: 'Invalid',
  429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
};

/** The error KubeClient throws for an answer with this status and message. */
export function apiError(code: number, method: string, path: string, message = `injected ${code}`, reason = REASONS[code]): KubeApiError {
  return new KubeApiError(code, method, path, JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, reason, code }));
}

/** What a request that got no answer rejects with (a reset connection). */
export function networkError(): Error {
  return Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
}

/** A path split into where the collection is and which object of it. */
interface Parsed {
  /** `/api/v1` or `/apis/GROUP/VERSION` */
  prefix: string;
  namespace?: string;
  resource: string;
  name?: string;
  subresource?: string;
}

function parsePath(path: string): Parsed | undefined {
  const parts = path.split('/').slice(1);
  const head = parts[0] === 'api' ? 2 : parts[0] === 'apis' ? 3 : 0;
  if (!head || parts.length <= head) return undefined;
  const prefix = `/${parts.slice(0, head).join('/')}`;
  let rest = parts.slice(head);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = decodeURIComponent(rest[1]!);
    rest = rest.slice(2);
  }
  const [resource, name, subresource] = rest as [string, string?, string?];
  return { prefix, namespace, resource, name: name === undefined ? undefined : decodeURIComponent(name), subresource };
}

function objectPath(p: Parsed, name: string): string {
  const ns = p.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(p.namespace)}`;
  return `${p.prefix}${ns}/${p.resource}/${encodeURIComponent(name)}`;
}

/** The copy the other side of the wire gets. */
function wire<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** Who an object is, as an answer over the cap still says. */
function identity(obj: Obj): { namespace?: string; name?: string; uid?: string; resourceVersion?: string } {
  const { namespace, name, uid, resourceVersion } = obj.metadata ?? {};
  return Object.fromEntries(Object.entries({ namespace, name, uid, resourceVersion }).filter(([, v]) => v !== undefined));
}

/** An object's identity as the client's scan of a list page finds it, at `prefix`. */
function identityOf(obj: Obj, prefix: string): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(identity(obj)).map(([k, v]) => [`${prefix}.metadata.${k}`, v]));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function mergePatch(target: unknown, patch: unknown, strategic: boolean): unknown {
  if (strategic && Array.isArray(patch) && Array.isArray(target)) return mergeList(target, patch);
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value, strategic);
  }
  return out;
}

/** A strategic merge of a list of objects by its merge key (`name`, or `type`); any other list is replaced. */
function mergeList(target: unknown[], patch: unknown[]): unknown[] {
  const key = ['name', 'type'].find((k) => patch.length > 0 && patch.every((item) => isObject(item) && typeof item[k] === 'string'));
  if (!key) return patch;
  const out = [...target];
  for (const item of patch as Record<string, unknown>[]) {
    const at = out.findIndex((old) => isObject(old) && old[key] === item[key]);
    if (at >= 0) out[at] = mergePatch(out[at], item, true);
    else out.push(mergePatch(undefined, item, true));
  }
  return out;
}

/** A selector term: `key=value`, `key==value`, `key!=value`, `key` (exists) or `!key` (does not). */
function matcher(selector: string | undefined, read: (obj: Obj, key: string) => string | undefined): (obj: Obj) => boolean {
  const terms = (selector ?? '').split(',').map((t) => t.trim()).filter(Boolean).map((term) => {
    const m = /^(!?)([\w./-]+)$/.exec(term) ?? /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(term);
    if (!m) throw new Error(`fake API: selector term ${JSON.stringify(term)} is not supported`);
    if (m.length === 3) return (obj: Obj) => (read(obj, m[2]!) !== undefined) !== (m[1] === '!');
    const [, key, op, value] = m as unknown as [string, string, string, string];
    return (obj: Obj) => (read(obj, key) === value) !== (op === '!=');
  });
  return (obj) => terms.every((t) => t(obj));
}

const labelOf = (obj: Obj, key: string) => obj.metadata?.labels?.[key];
function fieldOf(obj: Obj, dotted: string): string | undefined {
  let value: unknown = obj;
  for (const part of dotted.split('.')) value = isObject(value) ? value[part] : undefined;
  // A field selector compares with the field's value, an unset field being empty.
  return value === undefined || value === null ? '' : String(value);
}

interface Change {
  rv: number;
  before?: Obj;
  after?: Obj;
}

interface Watcher {
  /** The collection watched: its prefix, resource, and namespace (undefined: all). */
  scope: Parsed;
  matches: (obj: Obj) => boolean;
  bookmarks: boolean;
  onEvent: (event: WatchEvent<unknown> | UnreadableEvent) => void;
  end: (err?: Error) => void;
}

interface Injected {
  match: CallMatch;
  fault: Fault;
  times: number;
}

export interface FakeKubeApiOptions {
  /** The clock for creationTimestamp, deletionTimestamp and `atMs` (default Date.now). */
  now?: () => number;
  /** The objects served as over the client's answer cap (default none). */
  oversized?: (obj: Obj) => boolean;
}

export class FakeKubeApi implements KubeApi {
  /** Every call, in the order made. */
  readonly calls: FakeCall[] = [];
  private readonly objects = new Map<string, Obj>();
  private readonly changes: Change[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly faults: Injected[] = [];
  private readonly pages = new Map<string, { items: Obj[]; rv: string }>();
  private readonly now: () => number;
  private readonly oversized: (obj: Obj) => boolean;
  private rv = 0;
  /** Watches from a resourceVersion before this one get 410 Gone. */
  private compactedRv = 0;
  private serial = 0;

  constructor(options: FakeKubeApiOptions = {}) {
    this.now = options.now ?? Date.now;
    this.oversized = options.oversized ?? (() => false);
  }

  // ---- what a test arranges and reads: not calls, not recorded ----

  /**
   * Stores the object at `path` as another writer would (a new resourceVersion; uid and
   * creationTimestamp kept, or set when missing), and tells the watches. Returns what is stored.
   */
  set<T>(path: string, object: T): T {
    const obj = wire(object) as Obj;
    const parsed = parsePath(path);
    if (parsed?.name === undefined || parsed.subresource) {
      // Not an object of a resource (`/version`, a discovery document): served as it is.
      this.objects.set(path, obj);
      return wire(obj) as T;
    }
    const before = this.objects.get(path);
    const meta: Meta = { ...obj.metadata };
    meta.name ??= parsed.name;
    if (parsed.namespace !== undefined) meta.namespace ??= parsed.namespace;
    meta.uid ??= before?.metadata?.uid ?? this.newUid();
    meta.creationTimestamp ??= before?.metadata?.creationTimestamp ?? new Date(this.now()).toISOString();
    return wire(this.store(path, { ...obj, metadata: meta }, before)) as T;
  }

  /** Removes the object at `path` as another writer would (finalizers or not), telling the watches. */
  remove(path: string): void {
    const before = this.objects.get(path);
    if (before) this.store(path, undefined, before);
  }

  /** The object stored at `path`, if any (a copy). */
  object<T>(path: string): T | undefined {
    return wire(this.objects.get(path)) as T | undefined;
  }

  /** The objects of a collection path (all namespaces when it names none), by namespace and name (copies). */
  list<T>(collectionPath: string): T[] {
    const scope = parsePath(collectionPath);
    if (!scope) return [];
    return this.inScope(scope).map(([, obj]) => wire(obj) as T);
  }

  /** The latest resourceVersion given out. */
  resourceVersion(): string {
    return String(this.rv);
  }

  /**
   * Makes the next `times` calls matching `match` fail with `fault` (or run it first, when it is a
   * function). Returns a function that takes the fault back.
   */
  inject(match: CallMatch, fault: Fault, times = 1): () => void {
    const injected: Injected = { match, fault, times };
    this.faults.push(injected);
    return () => {
      const at = this.faults.indexOf(injected);
      if (at >= 0) this.faults.splice(at, 1);
    };
  }

  /** Takes back every fault not yet used. */
  clearFaults(): void {
    this.faults.length = 0;
  }

  /** The calls matching `match`, as `METHOD path status` lines (METHOD in capitals: GET, POST, ...; WATCH for a watch). */
  lines(match: CallMatch = {}): string[] {
    return this.calls.filter((c) => matches(match, c)).map((c) => `${c.method === 'watch' ? 'WATCH' : HTTP_METHOD[c.method]} ${c.path} ${c.status ?? '...'}`);
  }

  /** How many watches are open. */
  openWatches(): number {
    return this.watchers.size;
  }

  /** Forgets the changes up to now: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.changes.length = 0;
  }

  /** Every open watch that asked for bookmarks gets one at the latest resourceVersion. */
  bookmark(): void {
    for (const w of this.watchers) {
      if (w.bookmarks) this.deliver(w, { type: 'BOOKMARK', object: { metadata: { resourceVersion: String(this.rv) } } });
    }
  }

  /** Ends every open watch as the API server does when a watcher has fallen behind: an ERROR event with 410. */
  expireWatches(): void {
    for (const w of [...this.watchers]) {
      this.deliver(w, { type: 'ERROR', object: goneStatus() });
      queueMicrotask(() => w.end());
    }
  }

  /** Ends every open watch: as the server's timeout does (resolves), or as a broken connection (rejects with `err`). */
  endWatches(err?: Error): void {
    for (const w of [...this.watchers]) queueMicrotask(() => w.end(err));
  }

  // ---- KubeApi ----

  get<T>(path: string, query?: Query): Promise<T> {
    return this.serve({ method: 'get', path, query }, 200, () => {
      const parsed = parsePath(path);
      if (parsed && parsed.name === undefined) return this.listPage(parsed, query ?? {});
      // The status subresource reads as the object.
      const at = parsed?.subresource === 'status' && parsed.name !== undefined ? objectPath(parsed, parsed.name) : path;
      const obj = parsed?.subresource && parsed.subresource !== 'status' ? undefined : this.objects.get(at);
      if (!obj) throw notFound('GET', path, parsed);
      return obj;
    });
  }

  create<T>(path: string, body: unknown, query?: Query): Promise<T> {
    return this.serve({ method: 'create', path, query, body }, 201, (call) => {
      const scope = parsePath(path);
      if (!scope || scope.name !== undefined) throw apiError(405, 'POST', path, `fake API: POST to ${path} (not a collection)`, 'MethodNotAllowed');
      const obj = call.body as Obj;
      const meta: Meta = { ...obj.metadata };
      if (scope.namespace !== undefined && meta.namespace !== undefined && meta.namespace !== scope.namespace) {
        throw apiError(400, 'POST', path, `the namespace of the object (${meta.namespace}) does not match the namespace of the request (${scope.namespace})`);
      }
      if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${(++this.serial).toString(36).padStart(5, '0')}`;
      if (!meta.name) throw apiError(422, 'POST', path, `${scope.resource}: metadata.name or metadata.generateName is required`);
      const at = objectPath(scope, meta.name);
      if (this.objects.has(at)) throw apiError(409, 'POST', path, `${scope.resource} "${meta.name}" already exists`, 'AlreadyExists');
      if (scope.namespace !== undefined) meta.namespace = scope.namespace;
      meta.uid = this.newUid();
      meta.creationTimestamp = new Date(this.now()).toISOString();
      delete meta.deletionTimestamp;
      delete meta.resourceVersion;
      const created: Obj = { ...obj, metadata: meta };
      if (STATUS_SUBRESOURCE.has(scope.resource)) delete created.status;
      if (query?.dryRun === 'All') return created;
      return this.store(at, created, undefined);
    });
  }

  replace<T>(path: string, body: unknown): Promise<T> {
    return this.serve({ method: 'replace', path, body }, 200, (call) => this.update('PUT', path, (current) => {
      const obj = call.body as Obj;
      const { name } = obj.metadata ?? {};
      if (name !== undefined && name !== current.metadata?.name) throw apiError(400, 'PUT', path, `the name of the object (${name}) does not match the name in the path`);
      return { ...obj, metadata: { ...obj.metadata, uid: current.metadata?.uid, creationTimestamp: current.metadata?.creationTimestamp } };
    }, (call.body as Obj).metadata));
  }

  patch<T>(path: string, body: unknown, type: PatchType): Promise<T> {
    return this.serve({ method: 'patch', path, body, patchType: type }, 200, (call) => {
      if (type === 'json') throw new Error('fake API: JSON patch is not supported');
      const patch = call.body as Obj;
      return this.update('PATCH', path, (current) => mergePatch(current, patch, type === 'strategic') as Obj, patch.metadata);
    });
  }

  delete<T>(path: string, body?: unknown): Promise<T> {
    return this.serve({ method: 'delete', path, body }, 200, (call) => {
      const parsed = parsePath(path);
      const current = this.objects.get(path);
      if (!current || parsed?.subresource) throw notFound('DELETE', path, parsed);
      const { uid, resourceVersion } = (call.body as { preconditions?: { uid?: string; resourceVersion?: string } } | undefined)?.preconditions ?? {};
      checkPreconditions('DELETE', path, parsed, current, { uid, resourceVersion });
      if (current.metadata?.finalizers?.length) {
        if (current.metadata.deletionTimestamp) return current;
        return this.store(path, { ...current, metadata: { ...current.metadata, deletionTimestamp: new Date(this.now()).toISOString() } }, current);
      }
      this.store(path, undefined, current);
      return current;
    });
  }

  watch<T>(path: string, query: Query, onEvent: (event: WatchEvent<T> | UnreadableEvent) => void, signal: AbortSignal): Promise<void> {
    const call: FakeCall = { method: 'watch', path, query: { ...query }, atMs: this.now() };
    this.calls.push(call);
    const open = (): Promise<void> => {
      try {
        return this.openWatch(call, onEvent as Watcher['onEvent'], signal);
      } catch (err) {
        call.status = statusOf(err);
        return Promise.reject(err as Error);
      }
    };
    const fault = this.takeFault(call);
    // Without a fault the watch is open when this returns: what happens next reaches it.
    if (fault === undefined) return open();
    return this.runFault(call, fault).then(open, (err: unknown) => {
      call.status = statusOf(err);
      throw err;
    });
  }

  // ---- the store ----

  private openWatch(call: FakeCall, onEvent: Watcher['onEvent'], signal: AbortSignal): Promise<void> {
    const { path } = call;
    const query = call.query ?? {};
    const scope = parsePath(path);
    if (!scope || scope.name !== undefined) throw new Error(`fake API: watch of ${path} (not a collection)`);
    call.status = 200;
    const watcher: Watcher = {
      scope,
      matches: this.selectors(query),
      bookmarks: query.allowWatchBookmarks === true || query.allowWatchBookmarks === 'true',
      onEvent,
      end: () => {},
    };
    const ended = new Promise<void>((resolve, reject) => {
      watcher.end = (err) => {
        if (!this.watchers.delete(watcher)) return;
        signal.removeEventListener('abort', abort);
        if (err) reject(err);
        else resolve();
      };
    });
    const abort = () => watcher.end();
    this.watchers.add(watcher);
    signal.addEventListener('abort', abort, { once: true });
    if (signal.aborted) abort();

    const from = String(query.resourceVersion ?? '');
    if (from === '' || from === '0') {
      for (const [, obj] of this.inScope(scope)) if (watcher.matches(obj)) this.deliver(watcher, { type: 'ADDED', object: obj });
    } else if (Number(from) < this.compactedRv) {
      this.deliver(watcher, { type: 'ERROR', object: goneStatus() });
      queueMicrotask(() => watcher.end());
    } else {
      for (const change of this.changes) if (change.rv > Number(from)) this.tell(watcher, change);
    }
    return ended;
  }

  /** Writes `after` (undefined: deletes) at `path`, with a new resourceVersion, and tells the watches. */
  private store(path: string, after: Obj | undefined, before: Obj | undefined): Obj | undefined {
    const rv = ++this.rv;
    const versioned = (obj: Obj): Obj => ({ ...obj, metadata: { ...obj.metadata, resourceVersion: String(rv) } });
    let change: Change;
    if (after) {
      change = { rv, before, after: versioned(after) };
      this.objects.set(path, change.after!);
    } else {
      // A deletion is reported with the object as last stored, at the deletion's version.
      change = { rv, before: before && versioned(before) };
      this.objects.delete(path);
    }
    this.changes.push(change);
    for (const w of this.watchers) if (this.inScopeOf(w.scope, path)) this.tell(w, change);
    return change.after;
  }

  /**
   * Replace and patch: the object at `path` made from `next(current)`, after the preconditions in
   * `meta` (resourceVersion, uid); the status subresource keeps what it does not own.
   */
  private update(method: string, path: string, next: (current: Obj) => Obj, meta: Meta | undefined): Obj | undefined {
    const parsed = parsePath(path);
    const subresourceOk = !parsed?.subresource || (parsed.subresource === 'status' && STATUS_SUBRESOURCE.has(parsed.resource));
    if (!parsed || parsed.name === undefined || !subresourceOk) throw notFound(method, path, parsed);
    const at = objectPath(parsed, parsed.name);
    const current = this.objects.get(at);
    if (!current) throw notFound(method, path, parsed);
    checkPreconditions(method, path, parsed, current, { uid: meta?.uid, resourceVersion: meta?.resourceVersion });
    let result = next(current);
    if (STATUS_SUBRESOURCE.has(parsed.resource)) {
      result = parsed.subresource === 'status'
        ? { ...current, status: result.status }
        : { ...result, status: current.status };
      if (result.status === undefined) delete result.status;
    }
    result = { ...result, metadata: { ...result.metadata, name: current.metadata?.name, namespace: current.metadata?.namespace, resourceVersion: current.metadata?.resourceVersion } };
    // Nothing changed: the API server writes nothing and keeps the resourceVersion.
    if (JSON.stringify(result) === JSON.stringify(current)) return current;
    if (result.metadata?.deletionTimestamp && !result.metadata.finalizers?.length) {
      this.store(at, undefined, result);
      return result;
    }
    return this.store(at, result, current);
  }

  private listPage(scope: Parsed, query: Query): { items: Obj[]; metadata: { resourceVersion: string; continue?: string } } {
    let snapshot: { items: Obj[]; rv: string };
    if (query.continue) {
      const saved = this.pages.get(String(query.continue));
      if (!saved) throw apiError(410, 'GET', scope.resource, 'the continue token has expired');
      this.pages.delete(String(query.continue));
      snapshot = saved;
    } else {
      const matches = this.selectors(query);
      snapshot = { items: this.inScope(scope).map(([, obj]) => obj).filter(matches), rv: String(this.rv) };
    }
    const limit = Number(query.limit) || Infinity;
    const items = snapshot.items.slice(0, limit);
    const rest = snapshot.items.slice(limit);
    const oversized = items.some(this.oversized);
    // A page over the cap is asked again (smaller): its token stays good, as the API server's does.
    if (oversized && limit > 1) {
      if (query.continue) this.pages.set(String(query.continue), snapshot);
      throw new KubeAnswerTooLargeError(`GET ${scope.resource}`, MAX_ANSWER_BYTES);
    }
    let token: string | undefined;
    if (rest.length > 0) {
      token = `page-${++this.serial}`;
      this.pages.set(token, { items: rest, rv: snapshot.rv });
    }
    const metadata = { resourceVersion: snapshot.rv, ...(token ? { continue: token } : {}) };
    if (oversized) {
      const scanned = new Map(Object.entries({ 'metadata.resourceVersion': metadata.resourceVersion, 'metadata.continue': token, ...identityOf(items[0]!, 'items.0') }).filter((e): e is [string, string] => e[1] !== undefined));
      throw new KubeAnswerTooLargeError(`GET ${scope.resource}`, MAX_ANSWER_BYTES, scanned);
    }
    return { items, metadata };
  }

  private selectors(query: Query): (obj: Obj) => boolean {
    const labels = matcher(query.labelSelector === undefined ? undefined : String(query.labelSelector), labelOf);
    const fields = matcher(query.fieldSelector === undefined ? undefined : String(query.fieldSelector), fieldOf);
    return (obj) => labels(obj) && fields(obj);
  }

  /** The stored objects of a collection, sorted by path. */
  private inScope(scope: Parsed): [string, Obj][] {
    return [...this.objects].filter(([path]) => this.inScopeOf(scope, path)).sort(([a], [b]) => a.localeCompare(b));
  }

  private inScopeOf(scope: Parsed, path: string): boolean {
    const p = parsePath(path);
    return !!p && p.name !== undefined && !p.subresource && p.prefix === scope.prefix && p.resource === scope.resource &&
      (scope.namespace === undefined || p.namespace === scope.namespace);
  }

  /** A change as this watch sees it through its selectors. */
  private tell(w: Watcher, change: Change): void {
    const was = change.before !== undefined && w.matches(change.before);
    const is = change.after !== undefined && w.matches(change.after);
    if (is) this.deliver(w, { type: was ? 'MODIFIED' : 'ADDED', object: change.after });
    else if (was) this.deliver(w, { type: 'DELETED', object: change.after ?? change.before });
  }

  /** Events reach a watch after the write that made them has returned, in order. */
  private deliver(w: Watcher, event: WatchEvent<unknown>): void {
    const obj = event.object as Obj;
    const read = event.type !== 'BOOKMARK' && event.type !== 'ERROR' && this.oversized(obj);
    const copy: WatchEvent<unknown> | UnreadableEvent = read
      ? { type: 'UNREADABLE', of: event.type, object: identity(obj), reason: `over ${MAX_ANSWER_BYTES} bytes` }
      : wire(event);
    queueMicrotask(() => {
      if (!this.watchers.has(w)) return;
      // As over the wire: a receiver that throws breaks the stream.
      try {
        w.onEvent(copy);
      } catch (err) {
        w.end(err as Error);
      }
    });
  }

  // ---- calls ----

  private async serve<T>(call: Omit<FakeCall, 'atMs'>, okStatus: number, handle: (call: FakeCall) => Obj | undefined | object): Promise<T> {
    const recorded: FakeCall = { ...call, atMs: this.now() };
    if (call.query !== undefined) recorded.query = { ...call.query };
    if (call.body !== undefined) recorded.body = wire(call.body);
    this.calls.push(recorded);
    try {
      await this.runFault(recorded, this.takeFault(recorded));
      const result = handle(recorded);
      recorded.status = okStatus;
      return wire(result) as T;
    } catch (err) {
      recorded.status = statusOf(err);
      throw err;
    }
  }

  /** The fault for this call, if one was injected (used up as it is taken). */
  private takeFault(call: FakeCall): Fault | undefined {
    const at = this.faults.findIndex((f) => matches(f.match, call));
    if (at < 0) return undefined;
    const injected = this.faults[at]!;
    if (--injected.times <= 0) this.faults.splice(at, 1);
    return injected.fault;
  }

  private async runFault(call: FakeCall, fault: Fault | undefined): Promise<void> {
    if (fault === undefined) return;
    if (typeof fault === 'number') throw apiError(fault, HTTP_METHOD[call.method], call.path);
    if (fault instanceof Error) throw fault;
    await fault(call);
  }

  private newUid(): string {
    return `uid-${++this.serial}`;
  }
}

function matches(match: CallMatch, call: FakeCall): boolean {
  if (match.method && match.method !== call.method) return false;
  if (match.path === undefined) return true;
  return typeof match.path === 'string' ? match.path === call.path : match.path.test(call.path);
}

function statusOf(err: unknown): number {
  return err instanceof KubeApiError ? err.code : 0;
}

function notFound(method: string, path: string, parsed: Parsed | undefined): KubeApiError {
  return apiError(404, method, path, `${parsed?.resource ?? 'object'} "${parsed?.name ?? path}" not found`);
}

function checkPreconditions(method: string, path: string, parsed: Parsed | undefined, current: Obj, want: { uid?: string; resourceVersion?: string }): void {
  const name = `${parsed?.resource ?? 'object'} "${current.metadata?.name}"`;
  if (want.uid !== undefined && want.uid !== current.metadata?.uid) {
    throw apiError(409, method, path, `${name}: precondition uid ${want.uid} does not match ${current.metadata?.uid}`);
  }
  if (want.resourceVersion !== undefined && want.resourceVersion !== '' && want.resourceVersion !== current.metadata?.resourceVersion) {
    throw apiError(409, method, path, `${name}: resourceVersion ${want.resourceVersion} is not the latest (${current.metadata?.resourceVersion}); read it again and retry`);
  }
}

function goneStatus(): object {
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 410, reason: 'Expired', message: 'the resourceVersion watched from is too old' };
}
