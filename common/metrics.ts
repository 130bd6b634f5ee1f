// A registry with Node's process figures (memory, CPU, GC, event loop lag), and the series both
// programs export under their own prefix: what was built, their calls to the API server, and their
// work queues.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { KubeClientOptions } from './kube/client.ts';
import { queueMetrics } from './queue-metrics.ts';
import { COMMIT, VERSION } from './version.ts';

/**
 * The event loop lag is sampled once a second, not prom-client's default 100 times: that timer
 * alone woke the process enough to cost ~3 millicores of CPU while idle (measured), more than
 * everything else an idle agent does.
 */
const EVENT_LOOP_SAMPLE_MS = 1000;

export function processRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return registry;
}

/** client-go's buckets for its request and rate limiter latencies: 5 ms to a minute. */
const API_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

/**
 * `sidecar_terminator_<part>_build_info{version,commit,node_version} 1`, the API client's series
 * (`apiClient`: KubeClient's hooks that feed them) and each work queue's (`workQueue`: the `observe`
 * option of a WorkQueue, by the queue's name).
 */
export function programMetrics(registry: Registry, part: 'agent' | 'controller') {
  const prefix = `sidecar_terminator_${part}`;
  new Gauge({
    name: `${prefix}_build_info`,
    help: 'Always 1: the version, the source commit (empty when the build did not know it) and the Node.js release.',
    labelNames: ['version', 'commit', 'node_version'] as const,
    registers: [registry],
  }).set({ version: VERSION, commit: COMMIT, node_version: process.version }, 1);
  const requests = new Counter({
    name: `${prefix}_api_requests_total`,
    help: 'Requests to the Kubernetes API server by verb (get, list, watch, create, update, patch, delete), resource (pods, pods/status, leases...; empty: /version and discovery) and HTTP status code (error: no answer). Each retry after a 429 counts.',
    labelNames: ['verb', 'resource', 'code'] as const,
    registers: [registry],
  });
  const durations = new Histogram({
    name: `${prefix}_api_request_duration_seconds`,
    help: 'Time from a request to the API server sent to its answer\'s status line (or its failure), by verb, resource and code as api_requests_total; the wait for the client-side rate limit is apart.',
    labelNames: ['verb', 'resource', 'code'] as const,
    buckets: API_BUCKETS,
    registers: [registry],
  });
  const rateLimiterWaits = new Histogram({
    name: `${prefix}_api_rate_limiter_duration_seconds`,
    help: 'Time each request to the API server waited for the client-side rate limit (--kube-api-qps, --kube-api-burst), by verb.',
    labelNames: ['verb'] as const,
    buckets: API_BUCKETS,
    registers: [registry],
  });
  const apiClient = {
    onResponse: ({ verb, resource, code, seconds }) => {
      requests.inc({ verb, resource, code });
      durations.observe({ verb, resource, code }, seconds);
    },
    onRateLimited: (verb, seconds) => rateLimiterWaits.observe({ verb }, seconds),
  } satisfies Pick<KubeClientOptions, 'onResponse' | 'onRateLimited'>;
  return { apiClient, workQueue: queueMetrics(registry, prefix) };
}
