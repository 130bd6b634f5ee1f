// A registry with Node's process figures (memory, CPU, GC, event loop lag), and the series both
// programs export under their own prefix: what was built, and their calls to the API server.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
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

/**
 * `sidecar_terminator_<part>_build_info{version,commit,node_version} 1` and
 * `sidecar_terminator_<part>_api_requests_total{verb,code}` (KubeClient's onResponse).
 */
export function programMetrics(registry: Registry, part: 'agent' | 'controller') {
  new Gauge({
    name: `sidecar_terminator_${part}_build_info`,
    help: 'Always 1: the version, the source commit (empty when the build did not know it) and the Node.js release.',
    labelNames: ['version', 'commit', 'node_version'] as const,
    registers: [registry],
  }).set({ version: VERSION, commit: COMMIT, node_version: process.version }, 1);
  return {
    apiRequests: new Counter({
      name: `sidecar_terminator_${part}_api_requests_total`,
      help: 'Requests to the Kubernetes API server by verb (get, list, watch, create, update, patch, delete) and HTTP status code (error: no answer). Each retry after a 429 counts.',
      labelNames: ['verb', 'code'] as const,
      registers: [registry],
    }),
  };
}
