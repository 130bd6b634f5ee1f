// The cost of matching sidecar policies per Pod event, and of keeping them (R54), in this process:
// what both caches do for every event of a Pod (parse it, project it, the pre-filter, the policies
// laid over it), against 200 SidecarPolicies at the size budget built to cost a matcher most, for a
// Pod whose images are 1,000 and 5,000 characters; then the heap that 1,000 such policies take as
// both parts keep them. Run it as each part runs (bench/README.md, "Matching and keeping policies"):
//   node --expose-gc --max-semi-space-size=1 --no-opt --no-maglev --no-sparkplug bench/matching.ts   # the agent
//   node --expose-gc bench/matching.ts                                                               # the controller
import { createHash } from 'node:crypto';
import { Listeners } from '../common/listeners.ts';
import { policyAtBudget } from '../e2e/support/policies.ts';
import { PoliciesInEffect, policyMeaning, watchedPolicy } from '../rules/policies.ts';
import type { WatchedPolicy } from '../rules/policies.ts';
import { projectPod } from '../rules/projection.ts';
import { MB, percentile } from './stats.ts';

const POLICIES = 200;
const KEPT_POLICIES = 1000;
const EVENTS = 1000;

function inEffect(policies: WatchedPolicy[]): PoliciesInEffect {
  return new PoliciesInEffect({ all: () => policies, namespaceLabels: () => ({}), onChange: new Listeners<[]>() });
}

/** The tenant's Pod as the API server serves it, its `edit` annotation at `n`. */
function podJson(n: number): string {
  return JSON.stringify({
    metadata: { name: 'long-images', namespace: 'tenant', uid: 'u', resourceVersion: String(n), labels: { app: 'tenant' }, annotations: { edit: String(n) } },
    spec: {
      nodeName: 'node-1', restartPolicy: 'Never',
      containers: [
        { name: 'c0-main', image: 'sidecar-terminator.local/busybox:1' },
        { name: 'c1-tried', image: `registry.example/${'a'.repeat(983)}` },
        { name: 'c2-untried', image: `registry.example/${'b'.repeat(4983)}` },
      ],
    },
    status: { phase: 'Pending' },
  });
}

function matching(): { firstMs: number; p50Ms: number; p99Ms: number; maxMs: number; matchedAny: boolean } {
  const policies = inEffect(Array.from({ length: POLICIES }, (_, i) => watchedPolicy({ ...policyAtBudget(`p${i}`), metadata: { name: `p${i}`, namespace: 'tenant' } }, 'namespaced')));
  const times: number[] = [];
  let matchedAny = false;
  for (let n = 0; n < EVENTS; n++) {
    const text = podJson(n);
    const started = performance.now();
    const pod = projectPod(JSON.parse(text));
    if (policies.mayMatch(pod)) matchedAny = policies.apply(pod).containers.some((c) => c.policy !== undefined) || matchedAny;
    times.push(performance.now() - started);
  }
  const later = times.slice(1);
  const ms = (v: number) => Math.round(v * 1000) / 1000;
  return { firstMs: ms(times[0]!), p50Ms: ms(percentile(later, 50)), p99Ms: ms(percentile(later, 99)), maxMs: ms(Math.max(...later)), matchedAny };
}

/** Heap held per policy, kept as both parts keep it: the watched projection and the digest of what it says. */
function keeping(): { policies: number; heapMiB: number; perPolicyKiB: number } {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = new Map<string, { policy: WatchedPolicy; said: string }>();
  for (let i = 0; i < KEPT_POLICIES; i++) {
    // As the watch delivers it: parsed from the JSON the API server serves.
    const policy = watchedPolicy(JSON.parse(JSON.stringify({ ...policyAtBudget(`p${i}`), metadata: { name: `p${i}`, namespace: `ns-${i % 50}` } })), 'namespaced');
    kept.set(`p${i}`, { policy, said: createHash('sha256').update(policyMeaning(policy)).digest('base64') });
  }
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  if (kept.size !== KEPT_POLICIES) throw new Error('not kept');
  return { policies: KEPT_POLICIES, heapMiB: Math.round((bytes / MB) * 10) / 10, perPolicyKiB: Math.round(bytes / KEPT_POLICIES / 1024 * 10) / 10 };
}

const flags = process.execArgv.filter((a) => a !== '--expose-gc').join(' ') || '(defaults)';
console.log(JSON.stringify({ node: process.version, flags, events: EVENTS, policies: POLICIES, matching: matching(), keeping: keeping() }, null, 2));
