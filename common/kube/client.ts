// A small Kubernetes REST client over node:https: JSON requests and line-delimited watch streams.
// The agent runs on every node, so it carries only what it uses: @kubernetes/client-node's runtime
// (every API group's generated models) costs about 80 MiB of resident memory; its types remain in use.
import { Agent, request, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { KubeConnection } from './config.ts';

export type PatchType = 'merge' | 'strategic' | 'json';

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

export type Query = Record<string, string | number | boolean | undefined>;

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

const REQUEST_TIMEOUT_MS = 30_000;
/** A watch sends at least a bookmark a minute; this much silence means the connection is dead. */
const WATCH_IDLE_TIMEOUT_MS = 5 * 60_000;

export class KubeClient {
  private readonly conn: KubeConnection;
  private readonly base: URL;
  private readonly agent: Agent;

  constructor(conn: KubeConnection) {
    this.conn = conn;
    this.base = new URL(conn.server);
    this.agent = new Agent({
      keepAlive: true,
      ca: conn.ca,
      cert: conn.cert,
      key: conn.key,
      rejectUnauthorized: !conn.insecureSkipTLSVerify,
    });
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.json('GET', path, { query });
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
   * the connection fails (rejects with the error). `signal` ends it early (resolves).
   */
  async watch<T>(path: string, query: Query, onEvent: (event: WatchEvent<T>) => void, signal: AbortSignal): Promise<void> {
    const res = await this.send('GET', path, { query: { ...query, watch: true }, signal, timeoutMs: WATCH_IDLE_TIMEOUT_MS });
    if (res.statusCode !== 200) throw new KubeApiError(res.statusCode ?? 0, 'GET', path, await readBody(res));
    res.setEncoding('utf8');
    let buffered = '';
    await new Promise<void>((resolve, reject) => {
      res.on('data', (chunk: string) => {
        buffered += chunk;
        let newline: number;
        while ((newline = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          if (!line.trim()) continue;
          try {
            onEvent(JSON.parse(line) as WatchEvent<T>);
          } catch (err) {
            res.destroy(err as Error);
            return;
          }
        }
      });
      res.on('end', resolve);
      res.on('close', () => (signal.aborted ? resolve() : reject(new Error(`watch ${path}: connection closed`))));
      res.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
    });
  }

  private async json<T>(method: string, path: string, o: { query?: Query; body?: unknown; contentType?: string }): Promise<T> {
    const res = await this.send(method, path, { ...o, timeoutMs: REQUEST_TIMEOUT_MS });
    const text = await readBody(res);
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) throw new KubeApiError(code, method, path, text);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  private send(method: string, path: string, o: { query?: Query; body?: unknown; contentType?: string; signal?: AbortSignal; timeoutMs: number }): Promise<IncomingMessage> {
    const url = new URL(path, this.base);
    for (const [key, value] of Object.entries(o.query ?? {})) {
      if (value !== undefined && value !== '') url.searchParams.set(key, String(value));
    }
    const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
    const headers: Record<string, string> = { Accept: 'application/json' };
    const token = this.conn.token?.();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (payload !== undefined) {
      headers['Content-Type'] = o.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    const options: RequestOptions = { method, agent: this.agent, headers, signal: o.signal, timeout: o.timeoutMs };
    return new Promise((resolve, reject) => {
      const req = request(url, options, resolve);
      req.on('timeout', () => req.destroy(new Error(`${method} ${url.pathname}: no answer in ${o.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
  });
}
