// Each sidecar policy's status (R54): whether the controller could read it (Valid, and the same as
// Ready with the generation read, for kstatus, Flux and `kubectl wait`), and how many of the Pods
// it watches the policy marks a container of. Written by the leader, only when it changed.
import type { KubeApi } from '../common/kube/api.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { SidecarPolicyStatus } from '../api/sidecar-policy.ts';
import { clusterPolicyPath, namespacedPolicyPath, POLICY_CONDITION_READY, POLICY_CONDITION_VALID } from '../api/sidecar-policy.ts';
import { policyId } from '../rules/policies.ts';
import type { WatchedPolicy } from '../rules/policies.ts';

/** The status the policy should have now; undefined when it already has it. */
export function statusUpdate(policy: WatchedPolicy, matchedPods: number, nowIso: string): SidecarPolicyStatus | undefined {
  const valid = policy.parsed.valid;
  const message = valid ? 'The policy is in effect.' : `The policy is not in effect: ${policy.parsed.reason}`;
  const generation = policy.generation !== undefined ? { observedGeneration: policy.generation } : {};
  const wanted = [
    { type: POLICY_CONDITION_VALID, status: valid ? 'True' as const : 'False' as const, reason: valid ? 'Valid' : 'Invalid', message, ...generation },
    // Ready says the same, for the tools that wait on it, for the generation it was read at.
    { type: POLICY_CONDITION_READY, status: valid ? 'True' as const : 'False' as const, reason: valid ? 'InEffect' : 'Invalid', message, ...generation },
  ];
  const before = (type: string) => policy.status.conditions?.find((c) => c.type === type);
  const same = wanted.every((c) => {
    const b = before(c.type);
    return b?.status === c.status && b.reason === c.reason && b.message === c.message && b.observedGeneration === c.observedGeneration;
  });
  const matched = valid ? matchedPods : 0;
  if (same && policy.status.observedGeneration === policy.generation && policy.status.matchedPods === matched) return undefined;
  return {
    ...generation,
    matchedPods: matched,
    conditions: wanted.map((c) => ({ ...c, lastTransitionTime: before(c.type)?.status === c.status ? before(c.type)!.lastTransitionTime : nowIso })),
  };
}

export interface PolicyStatusDeps {
  client: Pick<KubeApi, 'patch'>;
  policies: () => WatchedPolicy[];
  /** Pods marked, by policy id. */
  matchedPods: () => Map<string, number>;
  log: Logger;
}

/** How often policy statuses are brought up to date. */
export const POLICY_STATUS_INTERVAL_MS = 10_000;

/** One round: every policy whose status is not what it should be gets one patch; a failure waits for the next round. */
export async function writePolicyStatuses(deps: PolicyStatusDeps, nowIso: string): Promise<void> {
  const matched = deps.matchedPods();
  for (const policy of deps.policies()) {
    const status = statusUpdate(policy, matched.get(policyId(policy)) ?? 0, nowIso);
    if (!status) continue;
    if (!policy.parsed.valid) deps.log.warn('sidecar policy not in effect', { policy: policyId(policy), reason: policy.parsed.reason });
    try {
      const path = policy.scope === 'cluster' ? clusterPolicyPath(policy.name, 'status') : namespacedPolicyPath(policy.namespace, policy.name, 'status');
      await deps.client.patch(path, { status }, 'merge');
    } catch (err) {
      deps.log.warn('policy status not written', { policy: policyId(policy), error: errorMessage(err) });
    }
  }
}

/** The most namespaced policies one namespace holds: what the policy-count alert reads. */
export function mostPoliciesInANamespace(policies: readonly WatchedPolicy[]): number {
  const counts = new Map<string, number>();
  for (const p of policies) if (p.scope === 'namespaced') counts.set(p.namespace!, (counts.get(p.namespace!) ?? 0) + 1);
  return Math.max(0, ...counts.values());
}

/** The policies not in effect, by kind: what the invalid-policy alert reads. */
export function invalidPolicies(policies: readonly WatchedPolicy[]): Record<'ClusterSidecarPolicy' | 'SidecarPolicy', number> {
  const counts = { ClusterSidecarPolicy: 0, SidecarPolicy: 0 };
  for (const p of policies) if (!p.parsed.valid) counts[p.scope === 'cluster' ? 'ClusterSidecarPolicy' : 'SidecarPolicy']++;
  return counts;
}
