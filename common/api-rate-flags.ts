// --kube-api-qps and --kube-api-burst, as client-go's programs take them, with each program's
// defaults: its client-side rate limit on requests to the API server (common/kube/rate-limit.ts).
import { FlagError, positiveInt } from './flags.ts';
import type { ApiRateLimit } from './kube/rate-limit.ts';

/**
 * Well above what the benchmarks (bench/README.md) measured, so that the limit never slows the work
 * it was measured on and stops only a process that runs away:
 * - an agent sent 500 requests for a burst of 100 Jobs on its node (5 a Job) over about 23 s, 22 a
 *   second on average: a burst of 500 lets all of them leave at once, and 100 a second is four
 *   times that average;
 * - the controller sent 10,650 requests over the scale benchmark's 20 s wave of 5,000 finishing
 *   Pods (about 500 a second, its creates at about 250 a second, as fast as the API server served
 *   them): 1,000 a second is twice that, and a burst of 2,000 four seconds of it.
 * client-go's own defaults (5 and 10; 20 and 30 in kube-controller-manager) would hold both far
 * below the rates the benchmarks need.
 */
export const API_RATE_DEFAULTS: Record<'agent' | 'controller', ApiRateLimit> = {
  agent: { qps: 100, burst: 500 },
  controller: { qps: 1000, burst: 2000 },
};

export interface ApiRateConfig {
  /** Requests a second to the API server at most, on average; negative: no client-side limit. */
  kubeApiQps: number;
  /** Requests that may leave at once after a quiet spell. */
  kubeApiBurst: number;
}

/** The parseArgs options, usage lines and parser of both flags, with `part`'s defaults. */
export function apiRateFlags(part: 'agent' | 'controller') {
  const defaults = API_RATE_DEFAULTS[part];
  return {
    options: {
      'kube-api-qps': { type: 'string', default: String(defaults.qps) },
      'kube-api-burst': { type: 'string', default: String(defaults.burst) },
    } as const,
    usage: `  --kube-api-qps N                  requests a second to the API server at most, on average (default ${defaults.qps});
                                    negative: no client-side limit (the API server's fairness still applies)
  --kube-api-burst N                requests that may leave at once after a quiet spell (default ${defaults.burst})`,
    parse: (values: { 'kube-api-qps': string; 'kube-api-burst': string }): ApiRateConfig => ({
      kubeApiQps: qps(values['kube-api-qps']),
      kubeApiBurst: positiveInt('kube-api-burst', values['kube-api-burst']),
    }),
  };
}

/** A number of requests a second: 0 is refused (client-go reads it as "its default", which is no one's here). */
function qps(value: string): number {
  const n = value.trim() === '' ? NaN : Number(value);
  if (!Number.isFinite(n) || n === 0) throw new FlagError(`--kube-api-qps must be a number of requests a second (negative: no limit), got ${JSON.stringify(value)}`);
  return n;
}
