// The Reconciler's writes of request status: the plan's, a stop's failure, a refusal found right
// before a stop; bounded in number, each over the latest version this agent knows (AheadOfWatch),
// and reported (metrics, logs, the Pod's events) once written.
import type { Clock } from '../common/clock.ts';
import type { KubeApi } from '../common/kube/api.ts';
import { isConflict } from '../common/kube/errors.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRStatus } from '../api/container-recreate-request.ts';
import { completedStatus, isCompleted, requestPath } from '../api/container-recreate-request.ts';
import type { EventRecorder } from '../common/events.ts';
import { FirstTimes } from '../common/first-times.ts';
import { namespacedKey } from '../common/informer.ts';
import { KeyedLimit } from '../common/keyed-limit.ts';
import type { Logger } from '../common/log.ts';
import { keptRequest } from '../rules/requests.ts';
import type { Refusal, RequestPlan } from './request-plan.ts';
import { sameStatus } from './request-plan.ts';
import type { AgentPod } from './pod.ts';
import type { AgentMetrics } from './metrics.ts';
import type { RequestTimings } from './timeline.ts';
import type { AheadOfWatch } from './ahead-of-watch.ts';

export interface StatusWritesDeps {
  client: Pick<KubeApi, 'patch'>;
  /** The watch cache's active requests for this node. */
  cache: { requests(namespace: string): ContainerRecreateRequest[] };
  /** What this agent wrote that the watch has not delivered yet: each write is added. */
  ahead: AheadOfWatch;
  events: EventRecorder;
  metrics: AgentMetrics;
  log: Logger;
  /** A completed request's timing is forgotten. */
  timings: RequestTimings;
  /** Writes at once (ReconcilerDeps.statusWrites). */
  limit: number;
  now: Clock;
}

const CONFLICT_RETRIES = 5;
/** How many Pods' refusals are remembered (as the controller's): beyond, a Pod may be told again. */
const MAX_REFUSAL_PODS = 10_000;

export class StatusWrites {
  private readonly deps: StatusWritesDeps;
  /** Pods (by uid) told of a refused request: one RequestRefused Warning each, for MAX_REFUSAL_PODS Pods. */
  private readonly refusalTold = new FirstTimes(MAX_REFUSAL_PODS);
  /** Writes under way, all keyed alike. */
  private readonly running: KeyedLimit;

  constructor(deps: StatusWritesDeps) {
    this.deps = deps;
    this.running = new KeyedLimit(deps.limit);
  }

  /** Writes the plan's status; a refusal is reported (metric, log, Warning event) once written. */
  async apply(crr: ContainerRecreateRequest, pod: AgentPod, plan: RequestPlan): Promise<ContainerRecreateRequest> {
    const changed = !sameStatus(crr.status, plan.status);
    const written = await this.writeStatus(crr, plan.status, plan.refusal ? 'refused' : outcomeOf(plan.status));
    if (!changed) return written;
    if (plan.refusal) this.reportRefusal(crr, pod, plan.refusal);
    for (const event of plan.events) {
      // One RequestRefused a Pod (R35): a namespace's requests cannot flood it with Warnings.
      if (event.reason === EVENT_REASONS.requestRefused && !this.refusalTold.first(pod.uid)) continue;
      this.deps.events.emit(podRef(pod), event);
    }
    return written;
  }

  /** Writes the status if it changed; returns the request as the API now has it. */
  async writeStatus(crr: ContainerRecreateRequest, status: CRRStatus, outcome: string): Promise<ContainerRecreateRequest> {
    if (sameStatus(crr.status, status)) return crr;
    const { namespace, name, resourceVersion } = crr.metadata;
    // The resourceVersion makes this a compare-and-swap: a conflict retries from fresh state.
    const updated = await this.running.run('all', () => this.deps.client.patch<ContainerRecreateRequest>(
      requestPath(namespace, name, 'status'), { metadata: { resourceVersion }, status }, 'merge'));
    // Kept as the watch cache keeps it: the answer is the whole object, its creator's labels and all.
    if (crr.metadata.uid) this.deps.ahead.wrote(crr.metadata.uid, resourceVersion, keptRequest(updated));
    if (status.phase === 'Completed' && crr.status?.phase !== 'Completed') {
      this.deps.metrics.requestsCompleted.inc({ outcome });
      this.deps.log.info('request completed', { request: namespacedKey(namespace!, name!), outcome, message: status.message });
      if (crr.metadata.uid) this.deps.timings.forget(crr.metadata.uid);
    }
    return updated;
  }

  /** Records a failed stop in the request, on top of the latest status (retrying on conflict). */
  async markFailed(crr: ContainerRecreateRequest, container: string, message: string): Promise<void> {
    this.deps.log.warn('container stop failed', { request: namespacedKey(crr.metadata.namespace!, crr.metadata.name!), container, message });
    await this.updateLatest(crr, 'failed', (latest) => {
      const states = (latest.status?.containerRecreateStates ?? []).map((s): ContainerRecreateState =>
        s.name === container ? { ...s, phase: 'Failed', message } : s);
      return { ...latest.status, containerRecreateStates: states };
    });
  }

  /** Found right before the stop: the runtime container is not the Pod's. Completes the request. */
  async refuseNow(crr: ContainerRecreateRequest, pod: AgentPod, container: string, refusal: Refusal): Promise<void> {
    this.reportRefusal(crr, pod, refusal);
    const replaced = await this.updateLatest(crr, 'refused', (latest) => {
      if (isCompleted(latest)) return latest.status ?? {};
      const states = (latest.status?.containerRecreateStates ?? []).map((s): ContainerRecreateState =>
        s.name === container ? { ...s, phase: 'Failed', message: refusal.message } : s);
      return { ...latest.status, ...completedStatus(this.deps.now(), { message: refusal.message, containerRecreateStates: states }) };
    });
    if (replaced && !isCompleted(replaced) && this.refusalTold.first(pod.uid)) {
      this.deps.events.emit(podRef(pod), { type: 'Warning', reason: EVENT_REASONS.requestRefused, message: `Request ${crr.metadata.name} ${refusal.message}` });
    }
  }

  /** Counted and logged for every request; the Pod's Warning comes from the plan, or refuseNow. */
  private reportRefusal(crr: ContainerRecreateRequest, pod: AgentPod, refusal: Refusal): void {
    this.deps.metrics.requestsRefused.inc({ reason: refusal.reason });
    this.deps.log.warn('request refused', {
      request: namespacedKey(crr.metadata.namespace!, crr.metadata.name!), pod: namespacedKey(pod.namespace, pod.name), reason: refusal.reason, message: refusal.message,
    });
  }

  /**
   * Writes `update(latest)` over the latest known request, retrying on conflict. Returns the version
   * it wrote over, or undefined when every try conflicted.
   */
  private async updateLatest(
    crr: ContainerRecreateRequest, outcome: string, update: (latest: ContainerRecreateRequest) => CRRStatus,
  ): Promise<ContainerRecreateRequest | undefined> {
    for (let attempt = 0; attempt < CONFLICT_RETRIES; attempt++) {
      const latest = this.deps.ahead.latest(this.deps.cache.requests(crr.metadata.namespace!).find((r) => r.metadata.uid === crr.metadata.uid) ?? crr);
      try {
        await this.writeStatus(latest, update(latest), outcome);
        return latest;
      } catch (err) {
        if (!isConflict(err)) throw err;
        await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
      }
    }
    return undefined;
  }
}

export function podRef(pod: AgentPod): { namespace: string; name: string; uid: string } {
  return { namespace: pod.namespace, name: pod.name, uid: pod.uid };
}

function outcomeOf(status: CRRStatus): string {
  const states = status.containerRecreateStates ?? [];
  if (states.length > 0 && states.every((s) => s.phase === 'Succeeded')) return 'succeeded';
  return states.some((s) => s.phase === 'Failed') ? 'failed' : 'refused';
}
