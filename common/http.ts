// The /metrics, /healthz and /readyz endpoints.
import http from 'node:http';
import type { Registry } from 'prom-client';

export interface HealthServerOptions {
  /** The address to listen on; undefined: every interface. */
  host: string | undefined;
  port: number;
  registry: Registry;
  /** Why the process is not ready, or undefined when it is. */
  notReadyReason: () => string | undefined;
  /** Why the process should be restarted (/healthz fails), or undefined; default: never. */
  notLiveReason?: () => string | undefined;
}

export function startHealthServer({ host, port, registry, notReadyReason, notLiveReason }: HealthServerOptions): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    } else if (path === '/healthz') {
      const reason = notLiveReason?.();
      res.writeHead(reason ? 503 : 200, { 'Content-Type': 'text/plain' }).end(reason ? `${reason}\n` : 'ok\n');
    } else if (path === '/readyz') {
      const reason = notReadyReason();
      res.writeHead(reason ? 503 : 200, { 'Content-Type': 'text/plain' }).end(reason ? `${reason}\n` : 'ok\n');
    } else {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
