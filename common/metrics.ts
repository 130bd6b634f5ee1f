// A registry with Node's process figures (memory, CPU, GC, event loop lag).
import { Registry, collectDefaultMetrics } from 'prom-client';

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
