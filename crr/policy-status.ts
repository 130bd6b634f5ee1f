// Each sidecar policy's status (R54): whether the controller could read it, and how many of the
// Pods it watches the policy marks a container of. Written by the leader, only when it changed.
import type { KubeApi } from '../common/kube/api.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { SidecarPolicyStatus } from '../api/sidecar-policy.ts';
import { clusterPolicyPath, namespacedPolicyPath, POLICY_CONDITION_VALID } from '../api/sidecar-policy.ts';
import { policyId } from '../rules/policies.ts';
import type { WatchedPolicy } from '../rules/policies.ts';

/** The status the policy should have now; undefined when it already has it. */
export function statusUpdate(policy: WatchedPolicy, matchedPods: number, nowIso: string): SidecarPolicyStatus | undefined {
  const valid = policy.parsed.valid;
  const condition = {
    type: POLICY_CONDITION_VALID,
    status: valid ? 'True' as const : 'False' as const,
    reason: valid ? 'Valid' : 'Invalid',
    message: valid ? 'The policy is in effect.' : `The policy is not in effect: ${policy.parsed.reason}`,
  };
  const before = policy.status.conditions?.[0];
  const sameCondition = before?.status === condition.status && before.reason === condition.reason && before.message === condition.message;
  const matched = valid ? matchedPods : 0;
  if (sameCondition && policy.status.observedGeneration === policy.generation && policy.status.matchedPods === matched) return undefined;
  return {
    ...(policy.generation !== undefined ? { observedGeneration: policy.generation } : {}),
    matchedPods: matched,
    conditions: [{ ...condition, lastTransitionTime: before?.status === condition.status ? before.lastTransitionTime : nowIso }],
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
