// A small Kubernetes REST client over node:https: JSON requests and line-delimited watch streams.
// The agent runs on every node, so it carries only what it uses: @kubernetes/client-node's runtime
// (every API group's generated models) costs about 80 MiB of resident memory; its types remain in use.
// Every request names its sender (User-Agent), leaves only when the client-side rate limit lets it,
// and an API server that is shedding load (429, or 503 with Retry-After) is given the time it asks
// for before the same request is sent again.
import { elapsedNow, now } from '../clock.ts';
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import type { GetOptions, KubeApi, PatchType, Query, UnreadableEvent, WatchEvent } from './api.ts';
import { AnswerScanner, identityFound, identityPaths } from './answer-scanner.ts';
import type { KubeConnection } from './config.ts';
import type { ServerClock } from './server-clock.ts';
import { type ApiRateLimit, TokenBucket } from './rate-limit.ts';

const CONTENT_TYPES: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  json: 'application/json-patch+json',
};

/** A request the API server answered with an error status; `code` is the HTTP status. */
export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string | undefined;

  constructor(code: number, method: string, path: string, body: string) {
    const status = parseStatus(body);
    super(status?.message ?? `${method} ${path}: HTTP ${code}${body ? `: ${body.slice(0, 200)}` : ''}`);
    this.name = 'KubeApiError';
    this.code = code;
    this.reason = status?.reason;
  }
}

function parseStatus(body: string): { message?: string; reason?: string } | undefined {
  if (!body.startsWith('{')) return undefined;
  try {
    return JSON.parse(body) as { message?: string; reason?: string };
  } catch {
    return undefined;
  }
}

/**
 * The most of one answer (and of one watch event) the client reads. Anyone may make objects big in
 * their namespace (labels have no total bound; managed fields double them), and an answer is held
 * whole, then parsed, at several times its size: past this, the call fails and the process stays
 * within its memory limit. One object may still be served over it: etcd keeps objects up to 1.5 MiB
 * by default, and JSON serves each `<`, `>` or `&` of a Pod's strings as six bytes. Such an object
 * is read through and skipped (MAX_SCANNED_BYTES), so that no stream stops at it.
 */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/**
 * The most of one oversized answer or watch event read through to find who it is about: etcd's
 * largest object, six times over, with room for a raised --max-request-bytes.
 */
export const MAX_SCANNED_BYTES = 64 * 1024 * 1024;

/** An answer longer than the client reads: the call fails, nothing of it is parsed. */
export class KubeAnswerTooLargeError extends Error {
  /** The values found at the paths asked for (GetOptions.scanOversized), when the answer was read through. */
  readonly scanned: ReadonlyMap<string, string> | undefined;

  constructor(what: string, limitBytes: number, scanned?: ReadonlyMap<string, string>) {
    super(`${what}: the answer is over ${limitBytes} bytes, more than this client reads`);
    this.name = 'KubeAnswerTooLargeError';
    this.scanned = scanned;
  }
}

/** A watch event's type, and who its object is. */
const EVENT_PATHS = ['type', ...identityPaths('object')];

/** No answer came within the call's time: the server may be busy serving it, or the connection dead. */
export class KubeNoAnswerError extends Error {
  constructor(what: string, timeoutMs: number) {
    super(`${what}: no answer in ${timeoutMs} ms`);
    this.name = 'KubeNoAnswerError';
  }
}

const REQUEST_TIMEOUT_MS = 30_000;
/** A watch sends at least a bookmark a minute; this much silence means the connection is dead. */
const WATCH_IDLE_TIMEOUT_MS = 5 * 60_000;

/** Sent as User-Agent when the process does not say who it is. */
export const DEFAULT_USER_AGENT = 'sidecar-terminator';
/** The User-Agent of one part of sidecar-terminator: `sidecar-terminator-agent/0.1.0`. */
export function userAgentFor(role: 'agent' | 'controller', version: string): string {
  return `sidecar-terminator-${role}/${version}`;
}

/**
 * An answer the API server asks us to come back after (Retry-After) is sent again at most this many
 * times, waiting at most MAX_RETRY_AFTER_MS each time, so that a busy server slows us down but never
 * holds a call for long.
 */
export const MAX_RETRIES = 3;
export const MAX_RETRY_AFTER_MS = 30_000;
/** A 429 without Retry-After (API Priority and Fairness always sends one) waits this long. */
const DEFAULT_RETRY_AFTER_MS = 1_000;

/**
 * The wait a Retry-After value asks for (delay-seconds or an HTTP date), within
 * 0..MAX_RETRY_AFTER_MS; undefined when there is none or it cannot be read.
 */
export function retryAfterMs(value: string | undefined, nowMs = now()): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  let ms: number;
  if (/^\d+$/.test(text)) {
    ms = Number(text) * 1000;
  } else {
    // An HTTP date names its day and month ("Wed, 21 Oct 2015 07:28:00 GMT"); Date.parse alone takes "-1".
    const at = /[a-z]/i.test(text) ? Date.parse(text) : NaN;
    if (Number.isNaN(at)) return undefined;
    ms = at - nowMs;
  }
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}

/**
 * Whether an answer means "send the same request again later", and after how long:
 * - 429 Too Many Requests, whatever the method: API Priority and Fairness (or the max-in-flight
 *   limit) turned the request away before it was executed, so even a write is safely sent again;
 * - 503 Service Unavailable with a Retry-After, for reads only: a write may have been executed.
 * Anything else is the caller's to handle (conflicts re-decide from fresh state, and so on).
 */
function retryDelayMs(method: string, res: IncomingMessage): number | undefined {
  const header = res.headers['retry-after'];
  const after = retryAfterMs(Array.isArray(header) ? header[0] : header);
  if (res.statusCode === 429) return after ?? DEFAULT_RETRY_AFTER_MS;
  if (res.statusCode === 503 && method === 'GET') return after;
  return undefined;
}

/** Hosts a plain-HTTP server (`kubectl proxy`, tests) may be on: credentials never cross a network in clear. */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

export interface KubeClientOptions {
  /**
   * Sent as User-Agent on every request, so that the API server's audit log tells our calls apart
   * (e.g. userAgentFor('agent', version)); default DEFAULT_USER_AGENT.
   */
  userAgent?: string;
  /**
   * Told of every answer, each retry's too (so 429s show). For the programs' api_requests_total and
   * api_request_duration_seconds metrics: the client stays free of metrics.
   */
  onResponse?: (answer: ApiAnswer) => void;
  /** Requests sent at most, as client-go's QPS and burst; none when absent or its qps is not above 0. */
  rateLimit?: ApiRateLimit;
  /** Told how long each request waited for the rate limit (0 included), when there is one. */
  onRateLimited?: (verb: ApiVerb, seconds: number) => void;
  /** The most of one answer or watch event read (default MAX_ANSWER_BYTES). */
  maxAnswerBytes?: number;
  /** Told of every answer's Date header: the API server's clock. */
  clock?: ServerClock;
}

export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

/** One answer of the API server (or its absence), as onResponse is told of it. */
export interface ApiAnswer {
  verb: ApiVerb;
  /** apiResource of the path: never an object's name, so that the metrics' series stay few. */
  resource: string;
  /** The HTTP status, or 'error' when no answer came. */
  code: string;
  /** From the request sent to its answer's status line (or the failure); the rate limit's wait is apart. */
  seconds: number;
}

/**
 * The part of a path after `/api/v1` or `/apis/GROUP/VERSION` and a namespace's prefix: `[pods]`,
 * `[pods, NAME]`, `[pods, NAME, status]`; undefined for a path that names no resource (`/version`,
 * discovery).
 */
function resourceSegments(path: string): string[] | undefined {
  const segments = path.split('?')[0]!.split('/').filter(Boolean);
  const groupVersion = segments[0] === 'api' ? 2 : segments[0] === 'apis' ? 3 : undefined;
  if (groupVersion === undefined || segments.length <= groupVersion) return undefined;
  const resource = segments.slice(groupVersion);
  return resource[0] === 'namespaces' && resource.length >= 3 ? resource.slice(2) : resource;
}

/**
 * The API server's verb for a request: a GET of a collection path (`/api/v1/pods`,
 * `/apis/g/v/namespaces/ns/kind`) is a list, of anything else (an object, `/version`) a get.
 */
export function apiVerb(method: string, path: string, watch = false): ApiVerb {
  if (method === 'POST') return 'create';
  if (method === 'PUT') return 'update';
  if (method === 'PATCH') return 'patch';
  if (method === 'DELETE') return 'delete';
  if (watch) return 'watch';
  return resourceSegments(path)?.length === 1 ? 'list' : 'get';
}

/**
 * The resource a path addresses, as RBAC names it: `pods`, `pods/status`, `leases`; '' for a path
 * that names none (`/version`, discovery). Never the object's name or namespace.
 */
export function apiResource(path: string): string {
  const [resource, , subresource] = resourceSegments(path) ?? [];
  if (resource === undefined) return '';
  return subresource === undefined ? resource : `${resource}/${subresource}`;
}

export class KubeClient implements KubeApi {
  private readonly conn: KubeConnection;
  private readonly base: URL;
  private readonly agent: HttpAgent;
  private readonly request: (url: URL, options: RequestOptions, onResponse: (res: IncomingMessage) => void) => ClientRequest;
  private readonly userAgent: string;
  private readonly onResponse: KubeClientOptions['onResponse'];
  private readonly onRateLimited: KubeClientOptions['onRateLimited'];
  private readonly bucket: TokenBucket | undefined;
  private readonly maxAnswerBytes: number;
  private readonly clock: ServerClock | undefined;

  constructor(conn: KubeConnection, options: KubeClientOptions = {}) {
    this.conn = conn;
    this.maxAnswerBytes = options.maxAnswerBytes ?? MAX_ANSWER_BYTES;
    this.clock = options.clock;
    this.base = new URL(conn.server);
    this.userAgent = options.userAgent || DEFAULT_USER_AGENT;
    this.onResponse = options.onResponse;
    this.onRateLimited = options.onRateLimited;
    this.bucket = options.rateLimit && options.rateLimit.qps > 0 ? new TokenBucket(options.rateLimit) : undefined;
    // Node throws on a header with control characters only when the first request is sent: say so now.
    if (!/^[\x20-\x7e]+$/.test(this.userAgent)) throw new Error(`user agent ${JSON.stringify(this.userAgent)}: printable ASCII only`);
    if (this.base.protocol === 'https:') {
      this.agent = new HttpsAgent({
        keepAlive: true,
        ca: conn.ca,
        cert: conn.cert,
        key: conn.key,
        rejectUnauthorized: !conn.insecureSkipTLSVerify,
        // The proxy the loader chose, or none: never Node's own reading of the environment.
        proxyEnv: { HTTPS_PROXY: conn.proxy },
      });
      this.request = httpsRequest;
    } else if (this.base.protocol === 'http:' && LOOPBACK_HOSTS.has(this.base.hostname)) {
      this.agent = new HttpAgent({ keepAlive: true });
      this.request = httpRequest;
    } else {
      throw new Error(`API server ${conn.server}: https, or plain http on a loopback address only`);
    }
  }

  /** Closes the kept-alive connections (requests still under way fail). */
  close(): void {
    this.agent.destroy();
  }

  get<T>(path: string, query?: Query, options?: GetOptions): Promise<T> {
    return this.json('GET', path, { query, scanOversized: options?.scanOversized });
  }

  create<T>(path: string, body: unknown, query?: Query): Promise<T> {
    return this.json('POST', path, { body, query });
  }

  replace<T>(path: string, body: unknown): Promise<T> {
    return this.json('PUT', path, { body });
  }

  patch<T>(path: string, body: unknown, type: PatchType): Promise<T> {
    return this.json('PATCH', path, { body, contentType: CONTENT_TYPES[type] });
  }

  delete<T>(path: string, body?: unknown): Promise<T> {
    return this.json('DELETE', path, { body });
  }

  /**
   * Streams a watch: calls `onEvent` for each event until the server ends the stream (resolves) or
   * the connection fails (rejects with the error). `signal` ends it early (resolves). An event over
   * the cap, or not JSON, is told as UNREADABLE (who it is about, as far as it says) and the stream
   * goes on past it: a stream that failed on it would fail on it again at every resume.
   */
  async watch<T>(path: string, query: Query, onEvent: (event: WatchEvent<T> | UnreadableEvent) => void, signal: AbortSignal): Promise<void> {
    const res = await this.exchange('GET', path, { query: { ...query, watch: true }, signal, timeoutMs: WATCH_IDLE_TIMEOUT_MS });
    if (signal.aborted) {
      res.destroy();
      return;
    }
    if (res.statusCode !== 200) throw new KubeApiError(res.statusCode ?? 0, 'GET', path, await this.readBody(res, `watch ${path}`));
    res.setEncoding('utf8');
    const what = `watch ${path}: one event`;
    const overCap = new KubeAnswerTooLargeError(what, this.maxAnswerBytes).message;
    let buffered = '';
    // Reading an event over the cap through: who it is about, and how much of it has gone by.
    let oversized: { scanner: AnswerScanner; bytes: number } | undefined;
    const unreadable = (scanner: AnswerScanner, reason: string) => {
      onEvent({ type: 'UNREADABLE', of: scanner.found.get('type'), object: identityFound(scanner.found, 'object'), reason });
    };
    const line = (text: string) => {
      if (!text.trim()) return;
      let event: WatchEvent<T>;
      try {
        event = JSON.parse(text) as WatchEvent<T>;
      } catch (err) {
        const scanner = new AnswerScanner(EVENT_PATHS);
        scanner.feed(text);
        unreadable(scanner, `not JSON: ${(err as Error).message}`);
        return;
      }
      onEvent(event);
    };
    await new Promise<void>((resolve, reject) => {
      res.on('data', (chunk: string) => {
        try {
          let rest = chunk;
          if (oversized) {
            const newline = rest.indexOf('\n');
            oversized.scanner.feed(newline < 0 ? rest : rest.slice(0, newline));
            oversized.bytes += newline < 0 ? rest.length : newline;
            if (oversized.bytes > MAX_SCANNED_BYTES) throw new KubeAnswerTooLargeError(what, MAX_SCANNED_BYTES);
            if (newline < 0) return;
            unreadable(oversized.scanner, overCap);
            oversized = undefined;
            rest = rest.slice(newline + 1);
          }
          buffered += rest;
          let newline: number;
          while ((newline = buffered.indexOf('\n')) >= 0) {
            line(buffered.slice(0, newline));
            buffered = buffered.slice(newline + 1);
          }
          // One event is one object: a line longer than an answer may be is never held to its end.
          if (buffered.length > this.maxAnswerBytes) {
            oversized = { scanner: new AnswerScanner(EVENT_PATHS), bytes: buffered.length };
            oversized.scanner.feed(buffered);
            buffered = '';
          }
        } catch (err) {
          res.destroy(err as Error);
        }
      });
      res.on('end', resolve);
      res.on('close', () => (signal.aborted ? resolve() : reject(new Error(`watch ${path}: connection closed`))));
      res.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
    });
  }

  private async json<T>(method: string, path: string, o: { query?: Query; body?: unknown; contentType?: string; scanOversized?: readonly string[] }): Promise<T> {
    const res = await this.exchange(method, path, { ...o, timeoutMs: REQUEST_TIMEOUT_MS });
    const text = await this.readBody(res, `${method} ${path}`, o.scanOversized);
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) throw new KubeApiError(code, method, path, text);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /**
   * The answer's body, read up to maxAnswerBytes: a longer one (as it says in Content-Length, or as
   * it arrives) fails the call with KubeAnswerTooLargeError. It is cut off there, or, when
   * `scanFor` names paths, read through (up to MAX_SCANNED_BYTES) for the values at them.
   */
  private readBody(res: IncomingMessage, what: string, scanFor?: readonly string[]): Promise<string> {
    const max = this.maxAnswerBytes;
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      let scanning: { scanner: AnswerScanner; decoder: StringDecoder } | undefined;
      const tooLarge = () => {
        res.destroy();
        reject(new KubeAnswerTooLargeError(what, max));
      };
      const scanFrom = (held: Buffer[]) => {
        scanning = { scanner: new AnswerScanner(scanFor!), decoder: new StringDecoder('utf8') };
        for (const c of held) scanning.scanner.feed(scanning.decoder.write(c));
        chunks.length = 0;
      };
      const length = Number(res.headers['content-length']);
      if (length > max) {
        if (!scanFor || length > MAX_SCANNED_BYTES) return tooLarge();
        scanFrom([]);
      }
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (scanning) {
          if (bytes > MAX_SCANNED_BYTES) return tooLarge();
          scanning.scanner.feed(scanning.decoder.write(c));
        } else if (bytes <= max) {
          chunks.push(c);
        } else if (scanFor) {
          scanFrom([...chunks, c]);
        } else {
          tooLarge();
        }
      });
      res.on('end', () => {
        if (!scanning) return resolve(Buffer.concat(chunks, bytes).toString('utf8'));
        const { scanner } = scanning;
        reject(new KubeAnswerTooLargeError(what, max, scanner.closed ? scanner.found : undefined));
      });
      res.on('error', reject);
    });
  }

  /**
   * Sends the request, and sends it again while the API server answers that it should come back
   * later (retryDelayMs), at most MAX_RETRIES times; resolves with the last answer. Each send waits
   * for the rate limit first. A watch's `signal` ends a wait early (the caller sees `signal.aborted`).
   */
  private async exchange(method: string, path: string, o: SendOptions): Promise<IncomingMessage> {
    const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
    const request: SentRequest = { method, path: checkedPath(path), verb: apiVerb(method, path, o.query?.watch === true), resource: apiResource(path) };
    for (let attempt = 0; ; attempt++) {
      await this.throttle(request.verb, o.signal);
      // As a request sent with an aborted signal fails: the caller sees `signal.aborted`.
      if (o.signal?.aborted) throw new Error(`${method} ${path}: stopped while waiting for the rate limit`);
      const res = await this.send(request, o, payload);
      const delay = attempt < MAX_RETRIES ? retryDelayMs(method, res) : undefined;
      if (delay === undefined || o.signal?.aborted) return res;
      res.resume(); // the answer's body is of no use; reading it lets the connection be reused
      await sleep(delay, o.signal);
      if (o.signal?.aborted) return res;
    }
  }

  /** Waits until the rate limit lets one more request leave (at once without a limit). */
  private async throttle(verb: ApiVerb, signal: AbortSignal | undefined): Promise<void> {
    if (!this.bucket) return;
    const waitMs = this.bucket.reserve();
    if (waitMs > 0) await sleep(waitMs, signal);
    this.onRateLimited?.(verb, waitMs / 1000);
  }

  private async send({ method, path, verb, resource }: SentRequest, o: SendOptions, payload: string | undefined): Promise<IncomingMessage> {
    const url = new URL(path, this.base);
    for (const [key, value] of Object.entries(o.query ?? {})) {
      if (value !== undefined && value !== '') url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': this.userAgent };
    // A plugin's token may have to be fetched first (config.ts).
    const token = await this.conn.token?.();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (payload !== undefined) {
      headers['Content-Type'] = o.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    const options: RequestOptions = { method, agent: this.agent, headers, signal: o.signal, timeout: o.timeoutMs };
    // Each request sent is told to onResponse once: its status, or 'error' (not when the caller aborted it).
    let told = false;
    const sentAt = elapsedNow();
    const tell = (code: string) => {
      if (!told) this.onResponse?.({ verb, resource, code, seconds: (elapsedNow() - sentAt) / 1000 });
      told = true;
    };
    const sentAtMs = now();
    return new Promise((resolve, reject) => {
      const req = this.request(url, options, (res) => {
        tell(String(res.statusCode ?? 0));
        this.clock?.observe(res.headers.date, sentAtMs, now());
        resolve(res);
      });
      req.on('timeout', () => req.destroy(new KubeNoAnswerError(`${method} ${url.pathname}`, o.timeoutMs)));
      req.on('error', (err) => {
        if (!o.signal?.aborted) tell('error');
        reject(err);
      });
      req.end(payload);
    });
  }
}

/** A request as exchange checked and named it, for each of its sends. */
interface SentRequest {
  method: string;
  path: string;
  verb: ApiVerb;
  resource: string;
}

interface SendOptions {
  query?: Query;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  timeoutMs: number;
}

/**
 * The path, if every segment of it is a plain name: never empty, `.` or `..` (in any encoding), which
 * URL resolution would turn into another path (`/api/v1/namespaces/ns/pods/.` is the namespace's
 * Pod collection: an unpaged LIST), and no query or fragment. paths.ts builds valid paths; this
 * refuses whatever else reaches the client.
 */
export function checkedPath(path: string): string {
  const segments = path.split('/');
  const bad = !path.startsWith('/') || /[?#\\%]/.test(path) || segments.slice(1).some((s) => s === '' || s === '.' || s === '..');
  if (bad) throw new Error(`refusing to request ${JSON.stringify(path.slice(0, 300))}: every path segment must be a name`);
  return path;
}

/**
 * Reads one object and checks it is of the kind asked for: a path resolved to something else (a
 * collection: a PodList where a Pod was asked for) is an error, never taken for the object.
 */
export async function getObject<T extends { kind?: string }>(client: Pick<KubeApi, 'get'>, path: string, kind: string): Promise<T> {
  const obj = await client.get<T & { items?: unknown }>(path);
  if (obj?.kind !== kind || obj.items !== undefined) throw new Error(`GET ${path}: expected a ${kind}, got ${obj?.kind ?? 'no kind'}`);
  return obj;
}

/** Resolves after `ms`, or as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
