// Part 6: sidecar policies at scale. A thousand policies at the size budget (most of them cluster-wide) that match no
// Pod here, the agent's and the controller leader's memory before and after them, how long the
// controller takes to write every policy's status, and part 1's Jobs of ours (env-marked beside
// policy-marked, R54) run with the thousand in place.
import type { V1Pod } from '@kubernetes/client-node';
import type { Context } from './context.ts';
import { createNamespace, deleteNamespace, scrapeUrl, sleep } from './context.ts';
import { pool } from './kube.ts';
import type { LatencyFigures } from './latency.ts';
import { runLatency } from './latency.ts';
import { MB, metricSum } from './stats.ts';
import { filledToBudget } from '../e2e/support/policies.ts';

const API = '/apis/sidecar-terminator.dev/v1alpha1';
const LABEL = 'bench.sidecar-terminator.dev/policies';

interface Memory { rssMB: number; heapUsedMB: number }

export interface PoliciesResult {
  method: string;
  clusterPolicies: number;
  namespacedPolicies: number;
  /** From the last create until every policy's status says Valid. */
  allValidSeconds: number | null;
  agent: { before: Memory; after: Memory };
  controller: { before: Memory; after: Memory };
  /** Part 1's Jobs of ours with the policies in place: env-marked (allOurs) and marked by a policy alone. */
  envMarked?: LatencyFigures;
  policyMarked?: LatencyFigures;
  /** policyMarked / envMarked, main finished → sidecar finished p50. */
  policyOverEnvP50?: number;
  failures: string[];
}

const round = (v: number) => Math.round(v * 10) / 10;

async function memory(url: string): Promise<Memory> {
  const m = await scrapeUrl(url);
  return { rssMB: round(metricSum(m, 'process_resident_memory_bytes') / MB), heapUsedMB: round(metricSum(m, 'nodejs_heap_size_used_bytes') / MB) };
}

export async function runPolicies(ctx: Context, agents: readonly V1Pod[], leader: V1Pod, count: number, jobs: number): Promise<PoliciesResult> {
  const agentUrl = `http://${agents[0]!.status!.podIP!}:9440/metrics`;
  const leaderUrl = `http://${leader.status!.podIP!}:9441/metrics`;
  const namespace = await createNamespace(ctx, 'bench-policies');
  const namespaced = Math.floor(count / 10);
  const cluster = count - namespaced;
  const index = (i: number) => String(i).padStart(4, '0');
  // Each selects a namespace no Pod is in, and names containers no Pod has: they cost what every
  // policy costs, and act on nothing.
  // Each is filled to the size budget: what the largest policy costs.
  const clusterPolicy = (i: number) => filledToBudget({
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ClusterSidecarPolicy',
    metadata: { name: `bench-${index(i)}`, labels: { [LABEL]: 'noise' } },
    spec: { namespaceSelector: { matchLabels: { 'bench-noise': index(i) } }, containers: [{ name: `noise-${index(i)}-*` }, { image: `registry.example/noise-${index(i)}:*`, stopTier: 1 }] },
  }, 'cluster');
  const namespacedPolicy = (i: number) => filledToBudget({
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy',
    metadata: { name: `bench-${index(i)}`, namespace, labels: { [LABEL]: 'noise' } },
    spec: { podSelector: { matchLabels: { 'bench-noise': index(i) } }, containers: [{ name: `noise-${index(i)}` }] },
  }, 'namespaced');
  const failures: string[] = [];
  try {
    await sleep(5_000);
    const before = { agent: await memory(agentUrl), controller: await memory(leaderUrl) };
    await pool(Array.from({ length: cluster }, (_, i) => i), 16, (i) => ctx.kube.request('POST', `${API}/clustersidecarpolicies`, clusterPolicy(i)).then(() => {}));
    await pool(Array.from({ length: namespaced }, (_, i) => i), 16, (i) => ctx.kube.request('POST', `${API}/namespaces/${namespace}/sidecarpolicies`, namespacedPolicy(i)).then(() => {}));
    const created = Date.now();
    const allValidSeconds = await untilAllValid(ctx, count, 300_000).then((ok) => (ok ? Math.round((Date.now() - created) / 100) / 10 : null));
    if (allValidSeconds === null) failures.push(`not every policy was Valid within 300 s`);
    ctx.log(`policies: ${count} created, every status written after ${allValidSeconds ?? '?'} s`);
    // Only the two kinds compared, batch by batch in turn: a batch after a heavier one (three sidecars
    // a Pod) finds containerd's exits still backed up, which would weigh on one kind alone.
    const latency = jobs > 0 ? await runLatency(ctx, agents, jobs, 10, false, jobs, ['allOurs', 'policyMarked']) : undefined;
    await sleep(5_000);
    const after = { agent: await memory(agentUrl), controller: await memory(leaderUrl) };
    const envMarked = latency?.allOurs;
    const policyMarked = latency?.policyMarked;
    const ratio = envMarked && policyMarked ? Math.round((policyMarked.mainToSidecarMs.p50 / envMarked.mainToSidecarMs.p50) * 100) / 100 : undefined;
    return {
      method:
        `${cluster} ClusterSidecarPolicies and ${namespaced} SidecarPolicies (in one namespace, with no Pod on the agent's node), each ` +
        'selecting a namespace or Pods that do not exist, and filled to the size budget (8,192 characters): what the largest policy costs, acting on nothing. Memory from process_resident_memory_bytes and ' +
        'nodejs_heap_size_used_bytes on /metrics, 5 s before the creates and 5 s after the Jobs. Then, with the policies in place, ' +
        `${jobs} Jobs of ours whose sidecar its env marks and ${jobs} whose sidecar only a further ClusterSidecarPolicy marks (policyMarked), ` +
        'in batches of 10 together, the two kinds taking turns (A B B A …: each as often first of a pair as second).',
      clusterPolicies: cluster,
      namespacedPolicies: namespaced,
      allValidSeconds,
      agent: { before: before.agent, after: after.agent },
      controller: { before: before.controller, after: after.controller },
      ...(envMarked ? { envMarked } : {}),
      ...(policyMarked ? { policyMarked } : {}),
      ...(ratio !== undefined ? { policyOverEnvP50: ratio } : {}),
      failures: [...failures, ...(latency?.failures ?? [])],
    };
  } finally {
    await ctx.kube.request('DELETE', `${API}/clustersidecarpolicies?labelSelector=${encodeURIComponent(LABEL)}`).catch(() => {});
    await deleteNamespace(ctx, namespace);
  }
}

/** Whether every policy of the part has status Valid True, polled every 2 s. */
async function untilAllValid(ctx: Context, count: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const valid = async (path: string) => {
    const list = await ctx.kube.request<{ items: { status?: { conditions?: { type: string; status: string }[] } }[] }>('GET', `${path}?labelSelector=${encodeURIComponent(LABEL)}`);
    return list.items.filter((p) => p.status?.conditions?.some((c) => c.type === 'Valid' && c.status === 'True')).length;
  };
  while (Date.now() < deadline) {
    if (await valid(`${API}/clustersidecarpolicies`) + await valid(`${API}/sidecarpolicies`) >= count) return true;
    await sleep(2_000);
  }
  return false;
}

