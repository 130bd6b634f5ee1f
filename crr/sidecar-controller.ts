// The Job sidecar terminator's I/O around the pure decide(): reads the compact Pod, its node's kind
// and its requests, and carries out the one action decided (create a request, swap images, patch
// the phase), emitting each event once.
import type { Clock } from '../common/clock.ts';
import { now } from '../common/clock.ts';
import type { KubeApi } from '../common/kube/api.ts';
import { createIfAbsent, isNotFound } from '../common/kube/errors.ts';
import { podPath } from '../common/kube/paths.ts';
import type { EventRecorder } from '../common/events.ts';
import type { UrgentWrites } from '../common/urgent-writes.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage, statusCode } from '../common/log.ts';
import type { QueueResult } from '../common/queue.ts';
import type { ControllerMetrics } from './metrics.ts';
import type { ActedOnLog } from './policy-status.ts';
import type { NodeKind } from '../rules/classify.ts';
import { classify } from '../rules/classify.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { decide, isSwapRefusal, requestRejectedWarning, stopStep } from '../rules/decide.ts';
import type { CreateRequest, Decision } from '../rules/decision.ts';
import type { DecisionEvent } from '../rules/events.ts';
import { EmittedEvents, warning } from '../rules/events.ts';
import { auditedAsEnforced, policyAuditEvent } from '../rules/policies.ts';
import { allMainsSucceeded } from '../rules/phase.ts';
import type { PodProjection } from '../rules/projection.ts';
import type { SidecarTerminatorOptions } from '../rules/requests.ts';
import { projectRequest } from '../rules/requests.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { requestPath } from '../api/container-recreate-request.ts';

/** How long after the API server rejected a request body it is tried again: the same body would be rejected again. */
export const REJECTED_RETRY_MS = 300_000;

/**
 * A 4xx other than conflict (409: the name exists) and throttling (429): the API server refuses this
 * body (invalid, forbidden, ...), and retrying it at once would only loop.
 */
export function isRejection(code: number | undefined): boolean {
  return code !== undefined && code >= 400 && code < 500 && code !== 409 && code !== 429;
}

/**
 * A Pod bound to a node the API server does not have (a forged or stale spec.nodeName, a node deleted
 * under it) is looked at again this long after: the node's kind cannot be known, and asking at the
 * queue's pace (a second) would be a read per Pod per second for nothing.
 */
export const NODE_NOT_FOUND_RETRY_MS = 300_000;

/** After a 409 on create, look again this soon: by then the watch has brought the request that holds the name. */
export const EXISTS_RECHECK_MS = 2_000;

type CreateOutcome = { kind: 'created' } | { kind: 'exists' } | { kind: 'rejected'; message: string };

/** A watched Pod: its projection and when the update that produced it arrived. */
export interface WatchedPod {
  pod: PodProjection;
  receivedAtMs: number;
}

/** How long a Pod waits before it is looked at again while the policies are not all read. */
export const POLICIES_UNREAD_WAIT_MS = 500;

export interface SidecarControllerDeps {
  /** Creates requests; patches Pods (images, status). */
  client: Pick<KubeApi, 'create' | 'patch'>;
  cachedPod: (key: string) => WatchedPod | undefined;
  requestsForPod: (namespace: string, podUid: string) => ContainerRecreateRequest[];
  /**
   * The Pod with the sidecar policies that apply to it laid over (R54); undefined while the
   * policies and namespaces are not all read yet (a new leader's first moments): the Pod waits.
   */
  withPolicies: (pod: PodProjection) => PodProjection | undefined;
  /** The kind of a node; throws when it cannot be known (the Pod is then retried, never guessed). */
  nodeKind: (nodeName: string) => Promise<NodeKind>;
  events: EventRecorder;
  /** The request creates: the events hold back while any is in flight (a wave's creates go first). */
  creates: UrgentWrites;
  metrics: ControllerMetrics;
  /** Where the Pods each policy acted on (or would have) go, for its status. */
  actedOn: Pick<ActedOnLog, 'record'>;
  options: SidecarTerminatorOptions;
  log: Logger;
  now?: Clock;
}

export class SidecarController {
  private readonly deps: SidecarControllerDeps;
  private readonly now: Clock;
  /** Event keys already emitted, by Pod: decisions are recomputed often, events go out once. */
  private readonly emitted = new EmittedEvents();
  /** By Pod key: until when the Pod's node is taken as missing (resyncs do not read it again meanwhile). */
  private readonly nodeMissingUntil = new Map<string, number>();
  /** By Pod key: the well-known sidecars nobody marked that hold it open (R52), behind the held-Pods gauge. */
  private readonly heldBy = new Map<string, string[]>();
  /** By Pod key: the policies that mark one of its containers (R54), behind each policy's matchedPods. */
  private readonly matchedBy = new Map<string, string[]>();

  constructor(deps: SidecarControllerDeps) {
    this.deps = deps;
    this.now = deps.now ?? now;
  }

  /** Forgets what was emitted for a Pod (by key) that left the cache: deleted, or of no more interest. */
  forget(podKey: string): void {
    this.emitted.forget(podKey);
    this.nodeMissingUntil.delete(podKey);
    this.setHeld(podKey, []);
    this.matchedBy.delete(podKey);
  }

  /** How many watched Pods each policy marks a container of (R54), by policy id. */
  matchedPods(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const ids of this.matchedBy.values()) for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    return counts;
  }

  /** How many Pods have events remembered (bounded by the cached Pods once forget is called for the rest). */
  rememberedPods(): number {
    return this.emitted.size();
  }

  async reconcile(key: string): Promise<QueueResult | void> {
    const cached = this.deps.cachedPod(key);
    if (!cached?.pod.nodeName) return;
    const pod = this.deps.withPolicies(cached.pod);
    if (!pod) return { requeueAfterMs: POLICIES_UNREAD_WAIT_MS };
    this.setMatched(key, pod);
    const missingFor = (this.nodeMissingUntil.get(key) ?? 0) - this.now();
    if (missingFor > 0) return { requeueAfterMs: missingFor };
    let node: NodeKind;
    try {
      node = await this.deps.nodeKind(pod.nodeName!);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return this.nodeNotFound(key, pod);
    }
    this.nodeMissingUntil.delete(key);
    const requests = this.deps.requestsForPod(pod.namespace, pod.uid).map((r) => projectRequest(r, pod.uid));
    const context = { requests, nowMs: this.now(), options: this.deps.options };
    const decision = decide(pod, node, context);
    const audited = auditedAsEnforced(pod);
    if (audited !== pod) this.audit(key, pod, audited, decide(audited, node, context));
    this.deps.metrics.decisions.inc({ outcome: outcomeLabel(decision) });
    this.setHeld(key, decision.kind === 'notHandled' ? (decision.holders ?? []).map((h) => h.sidecar.id) : []);
    this.deps.log.debug('decided', { pod: key, node, decision: decision.kind, message: decision.message });

    switch (decision.kind) {
      case 'notHandled':
        this.emit(key, pod, decision.events);
        return;
      case 'wait':
        this.emit(key, pod, decision.events);
        return decision.requeueAfterMs !== undefined ? { requeueAfterMs: decision.requeueAfterMs } : undefined;
      case 'createRequest': {
        if (decision.delayMs > 0) return { requeueAfterMs: decision.delayMs };
        const outcome = await this.createRequest(decision.request);
        // Already there: the node's agent saw the mains exit first (it then gave the event), or a
        // previous leader or try created it; the watch brings it. Look again soon all the same: a
        // request that took the name while naming another Pod re-triggers that Pod, not this one.
        if (outcome.kind === 'rejected') return this.rejected(key, pod, decision, outcome.message);
        // Ours or the agent's: a request for these sidecars exists now.
        this.countEnforced(key, pod, decision.containers);
        if (outcome.kind === 'exists') return { requeueAfterMs: EXISTS_RECHECK_MS };
        this.deps.metrics.requestsCreated.inc();
        if (decision.retryOf) this.deps.metrics.retries.inc();
        break;
      }
      case 'swapImages':
        // The resourceVersion makes this one compare-and-swap update: a conflict re-decides.
        await this.deps.client.patch(podPath(pod.namespace, pod.name), {
          metadata: { resourceVersion: pod.resourceVersion }, spec: { containers: decision.swaps.map((s) => ({ name: s.container, image: s.to })) },
        }, 'strategic');
        this.deps.metrics.imagePatches.inc();
        this.countEnforced(key, pod, decision.swaps.map((s) => s.container));
        break;
      case 'patchPhase':
        await this.deps.client.patch(podPath(pod.namespace, pod.name, 'status'), { metadata: { resourceVersion: pod.resourceVersion }, ...decision.statusPatch }, 'strategic');
        this.deps.metrics.phasePatches.inc({ phase: decision.phase, cause: decision.cause });
        break;
    }
    this.deps.metrics.actionLatency.observe({ action: decision.kind }, (this.now() - cached.receivedAtMs) / 1000);
    this.deps.log.info(decision.message, { pod: key, action: decision.kind });
    this.emit(key, pod, decision.events);
  }

  private async createRequest(request: ContainerRecreateRequest): Promise<CreateOutcome> {
    try {
      const created = await this.deps.creates.run(() => createIfAbsent(this.deps.client, requestPath(request.metadata.namespace), request));
      return { kind: created ? 'created' : 'exists' };
    } catch (err) {
      if (isRejection(statusCode(err))) return { kind: 'rejected', message: errorMessage(err) };
      throw err;
    }
  }

  /** One Warning, then a slow retry: the node may yet be created (a Pod bound ahead of its node), never a hot loop. */
  private nodeNotFound(key: string, pod: PodProjection): QueueResult {
    this.nodeMissingUntil.set(key, this.now() + NODE_NOT_FOUND_RETRY_MS);
    this.deps.log.warn('the Pod\'s node does not exist', { pod: key, node: pod.nodeName, retryInMs: NODE_NOT_FOUND_RETRY_MS });
    const message = `Pod is bound to node ${pod.nodeName}, which does not exist: its sidecars cannot be stopped; ` +
      `looked at again every ${NODE_NOT_FOUND_RETRY_MS / 1000}s.`;
    this.emit(key, pod, [warning(EVENT_REASONS.nodeNotFound, `${EVENT_REASONS.nodeNotFound}/${pod.nodeName}`, message)]);
    return { requeueAfterMs: NODE_NOT_FOUND_RETRY_MS };
  }

  /** One Warning with the API's reason, then a long wait: not a hot loop of failed creates. */
  private rejected(key: string, pod: PodProjection, decision: CreateRequest, message: string): QueueResult {
    this.deps.log.warn('request rejected by the API server', { pod: key, request: decision.request.metadata.name, error: message, retryInMs: REJECTED_RETRY_MS });
    // The request does not exist: what its events announce did not happen.
    const announced = new Set<string>([EVENT_REASONS.stopping, EVENT_REASONS.retrying]);
    const events = decision.events.filter((e) => !announced.has(e.reason));
    this.emit(key, pod, [...events, requestRejectedWarning(decision, message, REJECTED_RETRY_MS / 1000)]);
    return { requeueAfterMs: REJECTED_RETRY_MS };
  }

  /**
   * Audit mode (R54): what an Audit policy would have done, were it enforced, said once per Pod as
   * an Event and counted by policy; nothing is acted on.
   */
  private audit(key: string, pod: PodProjection, audited: PodProjection, wouldBe: Decision): void {
    if (wouldBe.kind !== 'createRequest' && wouldBe.kind !== 'swapImages') return;
    // Every sidecar the Audit policies mark that still runs, in the order enforcing would stop them.
    const byPolicy = classify(audited).sidecars
      .filter((s) => pod.containers.find((c) => c.name === s.name)?.auditPolicy && !pod.statuses.some((st) => st.name === s.name && st.state.kind === 'terminated'))
      .sort((a, b) => stopStep(a) - stopStep(b));
    if (byPolicy.length === 0) return;
    const stops = byPolicy.map((s) => ({ container: s.name, policy: s.markedBy, tier: s.tier, ignoreExitCode: s.ignoreExitCode,
      stopCommand: pod.containers.find((c) => c.name === s.name)?.auditPolicy?.stopCommand !== undefined }));
    // The phase from the mains as enforcing would see them: the audited containers are sidecars there.
    const event = policyAuditEvent(stops, wouldBe.kind, allMainsSucceeded(audited) ? 'Succeeded' : 'Failed');
    for (const emitted of this.emitted.take(key, pod.uid, [event])) {
      this.deps.events.emit(pod, emitted);
      const policies = new Set(stops.map((s) => s.policy));
      for (const policy of new Set([...policies].map(policySeries))) this.deps.metrics.policyAuditPods.inc({ policy });
      for (const policy of policies) this.deps.actedOn.record(policy, 'audit', pod, new Date(this.now()).toISOString());
    }
  }

  /** Enforce's counts beside Audit's: each Pod once per policy whose sidecars a request or swap acts on. */
  private countEnforced(key: string, pod: PodProjection, containers: readonly string[]): void {
    const policies = new Set(containers.flatMap((name) => pod.containers.find((c) => c.name === name)?.policy?.policy ?? []));
    for (const policy of policies) {
      if (this.emitted.first(key, pod.uid, `${ENFORCED_COUNT_KEY}/status/${policy}`)) this.deps.actedOn.record(policy, 'enforce', pod, new Date(this.now()).toISOString());
    }
    for (const series of new Set([...policies].map(policySeries))) {
      if (this.emitted.first(key, pod.uid, `${ENFORCED_COUNT_KEY}/metric/${series}`)) this.deps.metrics.policyEnforcedPods.inc({ policy: series });
    }
  }

  private setMatched(key: string, pod: PodProjection): void {
    const ids = [...new Set(pod.containers.flatMap((c) => [c.policy?.policy, c.auditPolicy?.policy]).filter((id) => id !== undefined))];
    if (ids.length > 0) this.matchedBy.set(key, ids);
    else this.matchedBy.delete(key);
  }

  /** Moves the Pod between the gauge's series: counted once per kind of sidecar holding it. */
  private setHeld(key: string, sidecars: readonly string[]): void {
    const now = [...new Set(sidecars)];
    const before = this.heldBy.get(key) ?? [];
    for (const id of before) if (!now.includes(id)) this.deps.metrics.heldPods.dec({ sidecar: id });
    for (const id of now) if (!before.includes(id)) this.deps.metrics.heldPods.inc({ sidecar: id });
    if (now.length > 0) this.heldBy.set(key, now);
    else this.heldBy.delete(key);
  }

  private emit(key: string, pod: PodProjection, events: DecisionEvent[]): void {
    for (const event of this.emitted.take(key, pod.uid, events)) {
      // A refused swap is the operator's business too (an image to allow, or a Pod to look at): once per Pod, as its Warning.
      if (isSwapRefusal(event)) {
        this.deps.metrics.swapsRefused.inc();
        this.deps.log.warn('image swap refused: not on --agentless-swap-images', { pod: key, node: pod.nodeName, message: event.message });
      }
      this.deps.events.emit(pod, event);
    }
  }
}

/**
 * A metric series per cluster policy, but per namespace for namespaced ones: a namespace user may
 * create any number of policies, and must not be able to grow our metrics with them.
 */
/** The memory of counts made once per Pod, beside its events' keys. */
const ENFORCED_COUNT_KEY = 'count:policy-enforced';

function policySeries(policy: string): string {
  const parts = policy.split('/');
  return parts.length === 3 ? `${parts[0]}/${parts[1]}` : policy;
}

function outcomeLabel(decision: Decision): string {
  return decision.kind === 'notHandled' || decision.kind === 'wait' ? `${decision.kind}:${decision.reason}` : decision.kind;
}
