// Each sidecar policy's status (R54): whether the controller could read it (Valid, and the same as
// Ready with the generation read, for kstatus, Flux and `kubectl wait`), how many of the Pods it
// watches the policy marks a container of, and the Pods it acted on (or would have, in Audit).
// Written by the leader, only when it changed.
import type { KubeApi } from '../common/kube/api.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { ActedOnPods, SidecarPolicyStatus } from '../api/sidecar-policy.ts';
import { clusterPolicyPath, MAX_RECENT_PODS, namespacedPolicyPath, POLICY_CONDITION_READY, POLICY_CONDITION_VALID } from '../api/sidecar-policy.ts';
import { policyId } from '../rules/policies.ts';
import type { WatchedPolicy } from '../rules/policies.ts';

export type ActingMode = 'audit' | 'enforce';

/** What the log holds for one policy: the Pods acted on since its status was last written, per mode. */
export type PendingActedOn = Partial<Record<ActingMode, ActedOnPods>>;

/**
 * The Pods each policy acted on (Enforce) or would have (Audit) since its status was last written:
 * added to the counts there, the last few kept with their times. Bounded: a count and
 * MAX_RECENT_PODS Pods per policy and mode. Lost with the process before a write (a count may then
 * fall short); never counted twice for one write.
 */
export class ActedOnLog {
  private readonly pending = new Map<string, PendingActedOn>();

  record(policy: string, mode: ActingMode, pod: { namespace: string; name: string }, time: string): void {
    const entry = this.pending.get(policy) ?? {};
    const acted = entry[mode] ?? { pods: 0, recent: [] };
    entry[mode] = { pods: acted.pods + 1, recent: [{ namespace: pod.namespace, name: pod.name, time }, ...acted.recent].slice(0, MAX_RECENT_PODS) };
    this.pending.set(policy, entry);
  }

  /** What is pending now, as it stands: later records do not change the copy (a write in flight adds what it holds). */
  pendingFor(policy: string): PendingActedOn | undefined {
    const entry = this.pending.get(policy);
    return entry && { ...entry };
  }

  /** `written` is in the policy's status now: only what came since stays. */
  written(policy: string, written: PendingActedOn): void {
    const entry = this.pending.get(policy);
    if (!entry) return;
    for (const mode of ['audit', 'enforce'] as const) {
      const now = entry[mode];
      const done = written[mode];
      if (!now || !done) continue;
      const left = { pods: now.pods - done.pods, recent: now.recent.filter((p) => !done.recent.includes(p)) };
      if (left.pods > 0) entry[mode] = left;
      else delete entry[mode];
    }
    if (!entry.audit && !entry.enforce) this.pending.delete(policy);
  }

  /** Policies gone: nothing of theirs is kept. */
  keepOnly(policies: ReadonlySet<string>): void {
    for (const id of this.pending.keys()) if (!policies.has(id)) this.pending.delete(id);
  }
}

/** The count and the last few Pods after adding what is pending. */
function withPending(before: ActedOnPods | undefined, added: ActedOnPods | undefined): ActedOnPods | undefined {
  if (!added || added.pods === 0) return before;
  return { pods: (before?.pods ?? 0) + added.pods, recent: [...added.recent, ...(before?.recent ?? [])].slice(0, MAX_RECENT_PODS) };
}

/** The status the policy should have now; undefined when it already has it. */
export function statusUpdate(policy: WatchedPolicy, matchedPods: number, nowIso: string, acted?: PendingActedOn): SidecarPolicyStatus | undefined {
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
  const counted = (acted?.audit?.pods ?? 0) + (acted?.enforce?.pods ?? 0) > 0;
  if (same && !counted && policy.status.observedGeneration === policy.generation && policy.status.matchedPods === matched) return undefined;
  const audit = withPending(policy.status.audit, acted?.audit);
  const enforce = withPending(policy.status.enforce, acted?.enforce);
  return {
    ...generation,
    matchedPods: matched,
    ...(audit ? { audit } : {}),
    ...(enforce ? { enforce } : {}),
    conditions: wanted.map((c) => ({ ...c, lastTransitionTime: before(c.type)?.status === c.status ? before(c.type)!.lastTransitionTime : nowIso })),
  };
}

export interface PolicyStatusDeps {
  client: Pick<KubeApi, 'patch'>;
  policies: () => WatchedPolicy[];
  /** Pods marked, by policy id. */
  matchedPods: () => Map<string, number>;
  /** Pods acted on since the last write, by policy id. */
  actedOn: ActedOnLog;
  log: Logger;
}

/** How often policy statuses are brought up to date. */
export const POLICY_STATUS_INTERVAL_MS = 10_000;

/** One round: every policy whose status is not what it should be gets one patch; a failure waits for the next round. */
export async function writePolicyStatuses(deps: PolicyStatusDeps, nowIso: string): Promise<void> {
  const matched = deps.matchedPods();
  const policies = deps.policies();
  deps.actedOn.keepOnly(new Set(policies.map(policyId)));
  for (const policy of policies) {
    const id = policyId(policy);
    const acted = deps.actedOn.pendingFor(id);
    const status = statusUpdate(policy, matched.get(id) ?? 0, nowIso, acted);
    if (!status) continue;
    if (!policy.parsed.valid) deps.log.warn('sidecar policy not in effect', { policy: id, reason: policy.parsed.reason });
    try {
      const path = policy.scope === 'cluster' ? clusterPolicyPath(policy.name, 'status') : namespacedPolicyPath(policy.namespace, policy.name, 'status');
      // Counts are added to the status as read: written against that very version, or not at all (the next round adds them).
      const version = acted && policy.resourceVersion ? { metadata: { resourceVersion: policy.resourceVersion } } : {};
      await deps.client.patch(path, { ...version, status }, 'merge');
      if (acted) deps.actedOn.written(id, acted);
    } catch (err) {
      deps.log.warn('policy status not written', { policy: id, error: errorMessage(err) });
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
