// A lean HTTPS client for the benchmark's own API traffic (thousands of writes a minute and watches
// whose events are timed on arrival): keep-alive sockets, the admin credentials of the e2e
// cluster's kubeconfig, JSON in and out. client-node is used elsewhere; this one adds no per-request
// overhead that would slow the load generator or blur receive times.
import https from 'node:https';
import * as k8s from '@kubernetes/client-node';
import { clusterEnv } from '../e2e/support/cluster.ts';

export class ApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export class Kube {
  readonly server: URL;
  private readonly agent: https.Agent;

  private constructor(server: URL, agent: https.Agent) {
    this.server = server;
    this.agent = agent;
  }

  static async connect(maxSockets = 48): Promise<Kube> {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(clusterEnv().kubeconfig);
    const opts: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    const agent = new https.Agent({ keepAlive: true, maxSockets, ca: opts.ca, cert: opts.cert, key: opts.key });
    return new Kube(new URL(kc.getCurrentCluster()!.server), agent);
  }

  /** One request; resolves with the parsed JSON body (or the text when it is not JSON). */
  async request<T = unknown>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const text = await this.send(method, path, 'application/json', body, contentType);
    try {
      return JSON.parse(text) as T;
    } catch {
      return text as T;
    }
  }

  get<T = unknown>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** A GET whose body is text, returned as is (a Pod's log: JSON lines, one of which alone would parse as JSON). */
  getText(path: string): Promise<string> {
    return this.send('GET', path, 'text/plain, */*');
  }

  private send(method: string, path: string, accept: string, body?: unknown, contentType = 'application/json'): Promise<string> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise<string>((resolve, reject) => {
      const req = https.request({
        host: this.server.hostname, port: this.server.port, path, method, agent: this.agent,
        headers: { Accept: accept, ...(payload !== undefined ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) } : {}) },
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 0) >= 300) reject(new ApiError(res.statusCode ?? 0, `${method} ${path}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
          else resolve(text);
        });
        res.on('error', reject);
      });
      req.setTimeout(120_000, () => req.destroy(new Error(`${method} ${path}: timed out`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  /**
   * A watch; `onEvent` gets each event with the time its line arrived (Date.now(), ms). Resolves
   * once the watch is established; `stop()` ends it. When the server ends it (its timeout, or a
   * busy API server dropping a slow watcher), it is resumed from the last resourceVersion seen, so
   * no event is missed; `restarts()` says how often.
   */
  async watch<T extends { metadata?: { resourceVersion?: string } }>(path: string, onEvent: (e: WatchEvent<T>, receivedAtMs: number) => void): Promise<{ stop: () => void; restarts: () => number }> {
    let stopped = false;
    let restarts = 0;
    let lastVersion: string | undefined;
    let current: { stop: () => void } | undefined;
    const reopen = (): void => {
      if (!stopped) open().catch(() => setTimeout(reopen, 500));
    };
    const open = async (): Promise<void> => {
      const from = lastVersion ? `${path.includes('?') ? '&' : '?'}resourceVersion=${lastVersion}` : '';
      current = await this.watchOnce<T>(path + from, (e, at) => {
        if (e.type !== 'ERROR') lastVersion = e.object.metadata?.resourceVersion ?? lastVersion;
        if (e.type !== 'BOOKMARK' && e.type !== 'ERROR') onEvent(e, at);
      }, () => {
        if (stopped) return;
        restarts++;
        reopen();
      });
    };
    await open();
    return { stop: () => { stopped = true; current?.stop(); }, restarts: () => restarts };
  }

  private watchOnce<T>(path: string, onEvent: (e: WatchEvent<T>, receivedAtMs: number) => void, onEnd?: (err?: Error) => void): Promise<{ stop: () => void }> {
    return new Promise((resolve, reject) => {
      let stopped = false;
      // Its own connection: a watch holds it for as long as it lasts.
      const req = https.request({
        host: this.server.hostname, port: this.server.port, path, method: 'GET', agent: false,
        ca: (this.agent.options as https.AgentOptions).ca, cert: (this.agent.options as https.AgentOptions).cert, key: (this.agent.options as https.AgentOptions).key,
        headers: { Accept: 'application/json' },
      }, (res) => {
        if ((res.statusCode ?? 0) >= 300) {
          reject(new ApiError(res.statusCode ?? 0, `watch ${path}: HTTP ${res.statusCode}`));
          res.resume();
          return;
        }
        resolve({ stop: () => { stopped = true; req.destroy(); } });
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = Date.now();
          buffer += chunk;
          let nl: number;
          while ((nl = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, nl);
            buffer = buffer.slice(nl + 1);
            if (line.trim()) onEvent(JSON.parse(line) as WatchEvent<T>, at);
          }
        });
        res.on('end', () => onEnd?.());
        res.on('error', (err) => { if (!stopped) onEnd?.(err); });
      });
      req.on('error', (err) => { if (!stopped) { reject(err); onEnd?.(err); } });
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Runs `fn` over `items` with at most `concurrency` at once; optionally paced to `perSecond` starts. */
export async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<void>, perSecond?: number): Promise<void> {
  let next = 0;
  const t0 = performance.now();
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      if (perSecond) {
        const due = t0 + (i * 1000) / perSecond;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** Retries transient failures (429, 5xx, socket errors) a few times with backoff. */
export async function retrying<T>(what: () => Promise<T>, attempts = 6): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await what();
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      const transient = status === 0 || status === 429 || status >= 500;
      if (!transient || i >= attempts - 1) throw err;
      await new Promise((r) => setTimeout(r, 200 * 2 ** i));
    }
  }
}
