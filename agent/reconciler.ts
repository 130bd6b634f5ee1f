// The agent's I/O around the pure planner: gathers a Pod's requests, the Pod and the runtime's view
// of each target container, writes the planned status, and carries out the stops it orders.
import type { Clock } from '../common/clock.ts';
import { now } from '../common/clock.ts';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeApi } from '../common/kube/api.ts';
import { ignoreNotFound, isConflict } from '../common/kube/errors.ts';
import { getObject } from '../common/kube/client.ts';
import { listPaged } from '../common/kube/list.ts';
import { isValidName, podPath } from '../common/kube/paths.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRStatus } from '../api/container-recreate-request.ts';
import { completedStatus, LABEL_POD_UID, isCompleted, requestPath } from '../api/container-recreate-request.ts';
import type { EventRecorder } from '../common/events.ts';
import { FirstTimes } from '../common/first-times.ts';
import { namespacedKey, splitKey } from '../common/informer.ts';
import { KeyedLimit } from '../common/keyed-limit.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { QueueResult, QueueWorker } from '../common/queue.ts';
import type { Refusal, RequestPlan, RuntimeView, StopOrder } from './request-plan.ts';
import { awaitsAdmission, blockingRequest, isFinal, leftoverContainers, leftoverStops, ownerRefusal, planRequest, sameStatus } from './request-plan.ts';
import { keptRequest, POD_REQUESTS_PAGE_SIZE } from '../rules/requests.ts';
import type { AgentPod } from './pod.ts';
import { projectAgentPod } from './pod.ts';
import { runPreStop } from './prestop.ts';
import type { AgentMetrics } from './metrics.ts';
import type { ContainerRuntimeOf } from './runtime/discover.ts';
import type { RuntimeContainer } from './runtime/types.ts';
import type { Handoff } from './fast-path/handoff.ts';
import { HandedOver } from './fast-path/handoff.ts';
import { observeStopSteps, RequestTimings, stopTimeline } from './timeline.ts';
import { ReturnedStops } from './returned-stops.ts';

export interface ReconcilerDeps {
  nodeName: string;
  /** Reads a Pod the cache does not have; writes request status. */
  client: Pick<KubeApi, 'get' | 'patch'>;
  /** The cached Pod on this node, if the watch has it. */
  cachedPod: (namespace: string, name: string) => AgentPod | undefined;
  /** Active requests for this node in a namespace, from the watch cache. */
  cachedRequests: (namespace: string) => ContainerRecreateRequest[];
  /** The runtime serving a Pod status container ID (`<runtime>://<id>`), and the ID's parts. */
  forContainer: (containerID: string) => ContainerRuntimeOf;
  events: EventRecorder;
  metrics: AgentMetrics;
  log: Logger;
  /** Asks for the Pod's requests to be looked at again (after a stop finishes). */
  requeue: (podKey: string) => void;
  /** false: httpGet preStop hooks are not run (--prestop-http-hooks=false); default true. */
  httpHooks?: boolean;
  /**
   * Request status writes at once (default 32). A reconcile gives its worker back once only status
   * writes are left, so they are bounded here rather than by the workers.
   */
  statusWrites?: number;
  now?: Clock;
  /** The API server's time, for deadlines counted from its timestamps (default: now). */
  apiNow?: () => number;
}

/** A request planned, its stops without a hook sent: what is left is its status write (and hooked stops). */
interface StartedPlan {
  request: ContainerRecreateRequest;
  plan: RequestPlan;
  timing: StopTiming;
}

const MIN_STOP_SECONDS = 2;
const CONFLICT_RETRIES = 5;
/**
 * StopContainer calls at once per Pod. containerd 2 runs all of a Pod's containers under one shim,
 * whose queue of process exits holds 32: on containerd 2.4.2, 32 stops at once in one Pod ended in
 * about a second, 48 hung for a minute with the containers still running (the shim lost exits).
 * Eight keep well inside it (each stop also has a `runc kill` process exit) and stop 64 sidecars in
 * about 6 s (test/cri.test.ts).
 */
export const STOPS_PER_POD = 8;
/** How many Pods' refusals are remembered (as the controller's): beyond, a Pod may be told again. */
const MAX_REFUSAL_PODS = 10_000;

export class Reconciler {
  private readonly deps: ReconcilerDeps;
  private readonly now: Clock;
  private readonly apiNow: () => number;
  /**
   * Stops under way in this process (hook, StopContainer, the status write after), by full container
   * ID: never issue the same stop twice at once, and let a shutdown wait for them.
   */
  private readonly stops = new Map<string, Promise<void>>();
  /** Reconciles under way: one may be about to start a stop. */
  private readonly reconciling = new Set<Promise<unknown>>();
  /** Set by drain(): no new work is taken, only what was begun is finished. */
  private closing = false;
  /**
   * The request as this agent last wrote it, by uid, with the resourceVersion it replaced: until the
   * watch delivers the write, the cache still holds that version, and writing from it would only
   * conflict (each conflict one more failed request and a retry's delay).
   */
  private readonly written = new Map<string, { replaced: string | undefined; request: ContainerRecreateRequest }>();
  /** The fast path's hand-offs: requests it created and the runtime's answers about their targets. */
  private readonly handedOver: HandedOver;
  /** When each request became known to this agent (the step histograms and logs). */
  private readonly timings = new RequestTimings();
  /** Pods (by uid) told of a refused request: one RequestRefused Warning each, for MAX_REFUSAL_PODS Pods. */
  private readonly refusalTold = new FirstTimes(MAX_REFUSAL_PODS);
  /** Stops that returned while the runtime may still say running: looked at again after a wait. */
  private readonly returnedStops: ReturnedStops;
  /** StopContainer calls under way, by Pod uid (STOPS_PER_POD). */
  private readonly podStops = new KeyedLimit(STOPS_PER_POD);
  /** Status writes under way, all keyed alike (ReconcilerDeps.statusWrites). */
  private readonly statusWrites: KeyedLimit;

  constructor(deps: ReconcilerDeps) {
    this.deps = deps;
    this.now = deps.now ?? now;
    this.apiNow = deps.apiNow ?? this.now;
    this.handedOver = new HandedOver(this.now);
    this.returnedStops = new ReturnedStops(this.now);
    this.statusWrites = new KeyedLimit(deps.statusWrites ?? 32);
  }

  /** Drops what is remembered of requests no longer active (completed by the controller, deleted). */
  forgetAllBut(activeUids: ReadonlySet<string>): void {
    for (const uid of this.written.keys()) if (!activeUids.has(uid)) this.written.delete(uid);
    this.timings.forgetAllBut(activeUids);
    this.handedOver.forgetAllBut(activeUids);
  }

  /** A request's watch event arrived (for the timings only). */
  noticed(request: ContainerRecreateRequest): void {
    const uid = request.metadata.uid;
    if (uid) this.timings.seen(uid, this.now());
  }

  /** The fast path's hand-off: a request it has just created, acted on at once (its Pod is queued). */
  adopt(handoff: Handoff): void {
    const { request, timing } = handoff;
    const uid = request.metadata.uid;
    if (!uid) return;
    this.handedOver.accept(handoff);
    this.timings.createdOnExit(uid, timing);
    this.deps.requeue(namespacedKey(request.metadata.namespace!, request.spec.podName));
  }

  /** Stops under way in this process. */
  stopsInFlight(): number {
    return this.stops.size;
  }

  /**
   * For a shutdown: takes no new work, and resolves true once the reconciles and stops already begun
   * (hook, StopContainer and the status write after) have finished, or false after `timeoutMs`.
   * A stop cut short is resumed by the next agent, without its hook (isKilled is recorded).
   */
  async drain(timeoutMs: number): Promise<boolean> {
    this.closing = true;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const settled = (async () => {
      while (this.reconciling.size > 0 || this.stops.size > 0) {
        await Promise.allSettled([...this.reconciling, ...this.stops.values()]);
      }
      return true;
    })();
    try {
      return await Promise.race([settled, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** `worker`: given back once what is left of the reconcile holds up no stop (status writes only). */
  async reconcile(key: string, worker?: QueueWorker): Promise<QueueResult | void> {
    if (this.closing) return;
    const run = this.reconcilePod(key, worker);
    this.reconciling.add(run);
    try {
      return await run;
    } finally {
      this.reconciling.delete(run);
    }
  }

  private async reconcilePod(key: string, worker?: QueueWorker): Promise<QueueResult | void> {
    const actingAtMs = this.now();
    const [namespace, podName] = splitKey(key);
    const requests = this.requestsOf(namespace, podName)
      .map((r) => this.latest(r))
      .filter((r) => !isCompleted(r) && !awaitsAdmission(r))
      .sort(byAge);
    const cached = this.deps.cachedPod(namespace, podName);
    const leftoversRecheckMs = cached ? await this.stopLeftovers(cached, key) : undefined;
    if (requests.length === 0) return leftoversRecheckMs === undefined ? undefined : { requeueAfterMs: leftoversRecheckMs };
    for (const r of requests) if (r.metadata.uid) this.timings.seen(r.metadata.uid, actingAtMs);

    const pod = await this.loadPod(namespace, podName, requests[0]!, requests);
    if (!pod) {
      for (const r of requests) await this.writeStatus(r, { ...r.status, ...completedStatus(this.now(), { message: `Pod ${key} not found` }) }, 'refused');
      return;
    }

    // Each request waits only behind an older one that holds one of its containers (R34).
    const free: ContainerRecreateRequest[] = [];
    for (const [i, r] of requests.entries()) {
      const queuedBehind = blockingRequest(r, requests.slice(0, i), pod);
      if (!queuedBehind) {
        free.push(r);
        continue;
      }
      const plan = planRequest({ crr: r, pod, nodeName: this.deps.nodeName, queuedBehind, runtime: new Map(), nowMs: this.now(), apiNowMs: this.apiNow() });
      await this.apply(r, pod, plan);
    }
    const claims = new Map<string, string>();
    const started = (await Promise.all(free.map((r) => this.planAndStop(r, pod, key, actingAtMs, claims)))).filter((c) => c !== undefined);
    // Every stop without a hook is sent: the status writes left hold up none, so the worker goes to
    // the next Pod (a burst's stops wait on no one's writes). A hook waits for its write: not then.
    if (!started.some((c) => c.plan.stops.some((s) => s.preStop))) worker?.release();
    const delays = [...await Promise.all(started.map((c) => this.record(c, pod, key))), leftoversRecheckMs].filter((ms) => ms !== undefined);
    return delays.length > 0 ? { requeueAfterMs: Math.min(...delays) } : undefined;
  }

  /**
   * Plans a request no other holds up and sends the stops it orders without a hook; undefined when
   * the agent is shutting down and the plan has stops (left whole to the next agent). `claims`: the
   * containers the pass's other plans stop (by ID, to the request's name): a request planned in the
   * same pass that would stop one of them too waits instead, as behind an older holder (R34), so a
   * hook never runs twice nor a bare stop cuts another plan's hook short.
   */
  private async planAndStop(request: ContainerRecreateRequest, pod: AgentPod, key: string, actingAtMs: number, claims: Map<string, string>): Promise<StartedPlan | undefined> {
    const checkStartMs = this.now();
    const runtime = await this.runtimeViews(request, pod);
    const timing = { actingAtMs, runtimeCheckMs: this.now() - checkStartMs };
    const inputs = { crr: request, pod, nodeName: this.deps.nodeName, runtime, httpHooks: this.deps.httpHooks ?? true };
    let plan = planRequest({ ...inputs, nowMs: this.now(), apiNowMs: this.apiNow() });
    // A hook runs at most once per container, whichever request asks: before one starts, the Pod's
    // other requests (completed ones too) are asked whether one of them started it already.
    if (plan.stops.some((s) => s.preStop)) {
      const preStopsStarted = await this.preStopsStartedElsewhere(request, pod);
      const again = plan.stops.filter((s) => s.preStop && preStopsStarted.has(s.containerID));
      if (again.length > 0) {
        this.deps.log.info('preStop hook already started by another request: not run again', {
          request: namespacedKey(request.metadata.namespace!, request.metadata.name!), containers: again.map((s) => s.containerID),
        });
        plan = planRequest({ ...inputs, preStopsStarted, nowMs: this.now(), apiNowMs: this.apiNow() });
      }
    }
    const claimed = plan.stops.find((s) => claims.has(s.containerID));
    if (claimed) plan = planRequest({ ...inputs, queuedBehind: claims.get(claimed.containerID)!, nowMs: this.now(), apiNowMs: this.apiNow() });
    for (const s of plan.stops) claims.set(s.containerID, request.metadata.name!);
    // Shutting down: a stop not yet recorded is left whole (hook included) to the next agent.
    if (this.closing && plan.stops.length > 0) return undefined;
    // A stop alone is addressed by container ID and repeating it is harmless, so it is sent at once,
    // beside the status write, with the runtime view just taken.
    for (const stop of plan.stops) {
      if (!stop.preStop) this.startStop(request, pod, stop, key, timing, runtime.get(stop.name)?.container);
    }
    return { request, plan, timing };
  }

  /**
   * Writes the plan's status, then starts its stops with a hook: a hook must never run twice, so
   * isKilled is in the API before it (and its stop) begins, and a restarted agent resumes without it.
   * Returns when to look again.
   */
  private async record({ request, plan, timing }: StartedPlan, pod: AgentPod, key: string): Promise<number | undefined> {
    const written = await this.apply(request, pod, plan);
    for (const stop of plan.stops) if (stop.preStop) this.startStop(written, pod, stop, key, timing);
    return plan.requeueAfterMs;
  }

  /**
   * The containers (`<runtime>://<id>`) whose hook a request of the Pod other than `crr` started, by
   * their status's preStopContainerID: read from the API, paged, as the watch holds only active
   * requests. Only our components write a request's status, so it cannot be forged by its creator.
   */
  private async preStopsStartedElsewhere(crr: ContainerRecreateRequest, pod: AgentPod): Promise<Set<string>> {
    const started = new Set<string>();
    const selector = { labelSelector: `${LABEL_POD_UID}=${pod.uid}` };
    await listPaged<ContainerRecreateRequest>(this.deps.client, requestPath(pod.namespace), { first: selector, next: selector, pageSize: POD_REQUESTS_PAGE_SIZE }, (items) => {
      for (const r of items) {
        if (r.metadata.uid === crr.metadata.uid) continue;
        for (const s of r.status?.containerRecreateStates ?? []) if (s.preStopContainerID) started.add(s.preStopContainerID);
      }
    });
    return started;
  }

  /**
   * R45: what still runs in a Pod whose phase the controller set is stopped now, within its grace.
   * Returns when to look again at a container whose stop returned while the runtime still says running.
   */
  private async stopLeftovers(pod: AgentPod, key: string): Promise<number | undefined> {
    const leftovers = leftoverContainers(pod).filter((s) => !this.stops.has(s.containerID));
    if (leftovers.length === 0) return undefined;
    const views = new Map<string, RuntimeView>();
    await Promise.all(leftovers.map(async (s) => views.set(s.name, this.withRecheck({ containerID: s.containerID, ...(await this.inspect(s.containerID)) }))));
    for (const order of leftoverStops(pod, views)) this.startLeftoverStop(pod, order, key);
    const rechecks = [...views.values()].flatMap((v) => (v.recheckInMs === undefined ? [] : [v.recheckInMs]));
    return rechecks.length > 0 ? Math.min(...rechecks) : undefined;
  }

  /** A stop with nothing to record: the Pod status shows its outcome, and a repeat after a restart is harmless. */
  private startLeftoverStop(pod: AgentPod, order: StopOrder, key: string): void {
    const target = this.deps.forContainer(order.containerID);
    if (!('runtime' in target) || this.stops.has(order.containerID) || this.closing) return;
    const { runtime, container: { id } } = target;
    const where = { pod: namespacedKey(pod.namespace, pod.name), container: order.name, containerID: order.containerID };
    const done = (async () => {
      // Stopped again after the wait (R40): the Pod was told already.
      if (!this.returnedStops.stoppedHere(order.containerID)) {
        this.deps.events.emit(podRef(pod), {
          type: 'Normal', reason: EVENT_REASONS.killing,
          message: `Stopping container ${order.name}: the Pod's phase is ${pod.phase} (set by sidecar-terminator), so nothing of it may run on`,
        });
      }
      const started = this.now();
      try {
        await this.podStops.run(pod.uid, () => runtime.stop(id, order.graceSeconds, order.stopSignal));
        this.returnedStops.returned(order.containerID);
        this.deps.metrics.containerStops.inc({ result: 'stopped' });
        this.deps.log.info('container left running in a finished Pod stopped', { ...where, phase: pod.phase, ms: this.now() - started });
      } catch (err) {
        this.deps.metrics.containerStops.inc({ result: 'failed' });
        this.deps.metrics.runtimeErrors.inc({ method: 'stop' });
        this.deps.log.warn('stopping a container left running in a finished Pod failed', { ...where, error: errorMessage(err) });
      }
    })().finally(() => {
      this.stops.delete(order.containerID);
      this.deps.requeue(key);
    });
    this.stops.set(order.containerID, done);
  }

  /** The Pod's requests in the watch cache, and those this agent created that the watch has not delivered yet. */
  private requestsOf(namespace: string, podName: string): ContainerRecreateRequest[] {
    const cached = this.deps.cachedRequests(namespace).filter((r) => r.spec?.podName === podName);
    return this.handedOver.requestsOf(namespace, podName, cached);
  }

  /** Writes the plan's status; a refusal is reported (metric, log, Warning event) once written. */
  private async apply(crr: ContainerRecreateRequest, pod: AgentPod, plan: RequestPlan): Promise<ContainerRecreateRequest> {
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

  /** Counted and logged for every request; the Pod's Warning comes from the plan, or refuseNow. */
  private reportRefusal(crr: ContainerRecreateRequest, pod: AgentPod, refusal: Refusal): void {
    this.deps.metrics.requestsRefused.inc({ reason: refusal.reason });
    this.deps.log.warn('request refused', {
      request: namespacedKey(crr.metadata.namespace!, crr.metadata.name!), pod: namespacedKey(pod.namespace, pod.name), reason: refusal.reason, message: refusal.message,
    });
  }

  /**
   * The Pod from the cache, or from the API when the cache does not have the one the request is for,
   * or lacks a hook of a container one of the requests names (too large to keep, see MAX_KEPT_HOOK_BYTES).
   */
  private async loadPod(namespace: string, name: string, request: ContainerRecreateRequest, all: readonly ContainerRecreateRequest[]): Promise<AgentPod | undefined> {
    const wantedUid = request.metadata.labels?.[LABEL_POD_UID];
    const cached = this.deps.cachedPod(namespace, name);
    const named = new Set(all.flatMap((r) => r.spec.containers.map((c) => c.name)));
    const hookNotKept = cached?.containers.some((c) => c.preStopNotKept && named.has(c.name)) ?? false;
    if (cached && (!wantedUid || cached.uid === wantedUid) && !hookNotKept) return cached;
    // A name no Pod can have (`.`: the path would read the namespace's Pod list) is never read.
    if (!isValidName(name)) return undefined;
    const pod = await getObject<V1Pod>(this.deps.client, podPath(namespace, name), 'Pod').catch(ignoreNotFound);
    return pod && projectAgentPod(pod, { wholeHooks: true });
  }

  /**
   * The runtime's view of the container the Pod status reports for each target (never
   * statusContext's): asked now, or given ahead while this agent created the request.
   */
  private async runtimeViews(crr: ContainerRecreateRequest, pod: AgentPod): Promise<Map<string, RuntimeView>> {
    const views = new Map<string, RuntimeView>();
    const recorded = new Map((crr.status?.containerRecreateStates ?? []).map((s) => [s.name, s]));
    await Promise.all(crr.spec.containers.map(async (c) => {
      const containerID = pod.statuses.find((s) => s.name === c.name)?.containerID;
      if (!containerID || isFinal(recorded.get(c.name))) return;
      if (this.stops.has(containerID)) {
        views.set(c.name, { containerID, stopping: true });
        return;
      }
      // An answer handed over tells of the container before any stop: once isKilled is recorded
      // (the watch brought the request first, and its reconcile stopped it), the runtime is asked.
      const given = await this.handedOver.takeAnswer(containerID);
      const usable = recorded.get(c.name)?.isKilled ? undefined : given;
      views.set(c.name, this.withRecheck({ containerID, ...(usable ? { container: usable } : await this.inspect(containerID)) }));
    }));
    return views;
  }

  /** The view, with when to look again if this agent's stop of the container returned and the runtime still says running. */
  private withRecheck(view: RuntimeView): RuntimeView {
    const recheckInMs = view.containerID && view.container?.state === 'running' ? this.returnedStops.waitLeftMs(view.containerID) : undefined;
    return recheckInMs === undefined ? view : { ...view, recheckInMs };
  }

  private async inspect(containerID: string): Promise<RuntimeView> {
    const target = this.deps.forContainer(containerID);
    if (!('runtime' in target)) return { error: target.error };
    try {
      return { container: await target.runtime.status(target.container.id) };
    } catch (err) {
      this.deps.metrics.runtimeErrors.inc({ method: 'status' });
      return { error: `${target.container.runtime} status: ${errorMessage(err)}` };
    }
  }

  /** The cached request, or what this agent wrote over that very version. */
  private latest(cached: ContainerRecreateRequest): ContainerRecreateRequest {
    const uid = cached.metadata.uid;
    const written = uid ? this.written.get(uid) : undefined;
    if (!written) return cached;
    if (cached.metadata.resourceVersion === written.replaced) return written.request;
    // The watch has caught up, or someone else wrote since: the cache is the truth again.
    this.written.delete(uid!);
    return cached;
  }

  /** Writes the status if it changed; returns the request as the API now has it. */
  private async writeStatus(crr: ContainerRecreateRequest, status: CRRStatus, outcome: string): Promise<ContainerRecreateRequest> {
    if (sameStatus(crr.status, status)) return crr;
    const { namespace, name, resourceVersion } = crr.metadata;
    // The resourceVersion makes this a compare-and-swap: a conflict retries from fresh state.
    const updated = await this.statusWrites.run('all', () => this.deps.client.patch<ContainerRecreateRequest>(
      requestPath(namespace, name, 'status'), { metadata: { resourceVersion }, status }, 'merge'));
    // Kept as the watch cache keeps it: the answer is the whole object, its creator's labels and all.
    if (crr.metadata.uid) this.written.set(crr.metadata.uid, { replaced: resourceVersion, request: keptRequest(updated) });
    if (status.phase === 'Completed' && crr.status?.phase !== 'Completed') {
      this.deps.metrics.requestsCompleted.inc({ outcome });
      this.deps.log.info('request completed', { request: namespacedKey(namespace!, name!), outcome, message: status.message });
      if (crr.metadata.uid) this.timings.forget(crr.metadata.uid);
    }
    return updated;
  }

  private startStop(crr: ContainerRecreateRequest, pod: AgentPod, order: StopOrder, key: string, timing: StopTiming, checked?: RuntimeContainer): void {
    if (this.stops.has(order.containerID)) return;
    const done = this.stop(crr, pod, order, { ...timing }, checked)
      .catch((err: unknown) => {
        this.deps.log.error('stop bookkeeping failed', { container: order.containerID, error: errorMessage(err) });
      })
      .finally(() => {
        this.stops.delete(order.containerID);
        this.deps.requeue(key);
      });
    this.stops.set(order.containerID, done);
  }

  /**
   * `checked`: the runtime's view of the container taken by the reconcile that ordered this stop,
   * with nothing awaited since; otherwise (a hook ran after the status write) the runtime is asked
   * again right before.
   */
  private async stop(crr: ContainerRecreateRequest, pod: AgentPod, order: StopOrder, timing: StopTiming, checked?: RuntimeContainer): Promise<void> {
    const ref = podRef(pod);
    const target = this.deps.forContainer(order.containerID);
    if (!('runtime' in target)) return this.markFailed(crr, order.name, `${target.error}; nothing was executed`);
    const { runtime, container: parsed } = target;
    const started = this.now();

    let current = checked?.id === parsed.id ? checked : undefined;
    if (!current) {
      try {
        current = await runtime.status(parsed.id);
      } catch (err) {
        this.deps.metrics.runtimeErrors.inc({ method: 'status' });
        return this.markFailed(crr, order.name, `${parsed.runtime} status before the stop: ${errorMessage(err)}; nothing was executed`);
      } finally {
        timing.runtimeCheckMs += this.now() - started;
      }
    }
    if (!current || current.id !== parsed.id || current.state === 'exited') {
      // Gone or exited meanwhile: nothing to stop; the next plan records what happened.
      this.deps.log.info('container no longer running, not stopped', { pod: namespacedKey(pod.namespace, pod.name), container: order.name, containerID: order.containerID });
      return;
    }
    const refusal = ownerRefusal(pod, order.name, order.containerID, current);
    if (refusal) return this.refuseNow(crr, pod, order.name, refusal);

    if (order.resumed && this.returnedStops.stoppedHere(order.containerID)) {
      // This agent's own stop returned, and the runtime still said running after the wait.
      this.deps.log.info('stopping again: the runtime still reports the container running after this agent\'s stop returned', { pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: crr.metadata.name });
    } else if (order.resumed) {
      // An earlier agent recorded isKilled, sent its Killing event and ran the hook (or began to).
      this.deps.metrics.stopsResumed.inc();
      this.deps.log.info('resuming a stop an earlier agent began (no hook, no event)', { pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: crr.metadata.name });
    } else {
      this.deps.events.emit(ref, { type: 'Normal', reason: EVENT_REASONS.killing, message: `Stopping container ${order.name} (request ${crr.metadata.name})` });
      if (order.preStopNotRun) {
        this.deps.events.emit(ref, { type: 'Warning', reason: EVENT_REASONS.preStopHookNotRun, message: `PreStop hook of container ${order.name} not run: ${order.preStopNotRun}; the container is stopped` });
      }
    }
    const { graceSeconds } = order; // bounded by the planner (graceSecondsOf)
    let prestopDoneAtMs: number | undefined;
    if (order.preStop && !order.resumed) {
      const failure = await runPreStop(order.preStop, { runtime, containerID: parsed.id, podIP: pod.podIP, ports: order.ports }, graceSeconds * 1000);
      prestopDoneAtMs = this.now();
      if (failure) {
        this.deps.events.emit(ref, { type: 'Warning', reason: EVENT_REASONS.failedPreStopHook, message: `PreStop hook of container ${order.name} failed: ${failure}` });
      }
    }
    try {
      let stopSentAtMs = 0;
      await this.podStops.run(pod.uid, () => {
        stopSentAtMs = this.now();
        const remaining = Math.max(MIN_STOP_SECONDS, Math.ceil(graceSeconds - (stopSentAtMs - started) / 1000));
        return runtime.stop(parsed.id, remaining, order.stopSignal);
      });
      this.returnedStops.returned(order.containerID);
      this.deps.metrics.containerStops.inc({ result: 'stopped' });
      const exitedAtMs = this.now();
      const known = crr.metadata.uid ? this.timings.of(crr.metadata.uid) : undefined;
      const timeline = known && stopTimeline({ knownAtMs: known.atMs, createdOnExit: known.createdOnExit, ...timing, prestopDoneAtMs, stopSentAtMs, exitedAtMs });
      if (known) this.deps.metrics.stopSeconds.observe((exitedAtMs - known.atMs) / 1000);
      if (timeline) observeStopSteps(this.deps.metrics, timeline);
      this.deps.log.info('container stopped', {
        pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: crr.metadata.name, resumed: order.resumed, ms: exitedAtMs - started, ...(timeline ? { timeline } : {}),
      });
    } catch (err) {
      this.deps.metrics.containerStops.inc({ result: 'failed' });
      this.deps.metrics.runtimeErrors.inc({ method: 'stop' });
      await this.markFailed(crr, order.name, `stop: ${errorMessage(err)}`);
    }
  }

  /** Records a failed stop in the request, on top of the latest status (retrying on conflict). */
  private async markFailed(crr: ContainerRecreateRequest, container: string, message: string): Promise<void> {
    this.deps.log.warn('container stop failed', { request: namespacedKey(crr.metadata.namespace!, crr.metadata.name!), container, message });
    await this.updateLatest(crr, 'failed', (latest) => {
      const states = (latest.status?.containerRecreateStates ?? []).map((s): ContainerRecreateState =>
        s.name === container ? { ...s, phase: 'Failed', message } : s);
      return { ...latest.status, containerRecreateStates: states };
    });
  }

  /** Found right before the stop: the runtime container is not the Pod's. Completes the request. */
  private async refuseNow(crr: ContainerRecreateRequest, pod: AgentPod, container: string, refusal: Refusal): Promise<void> {
    this.reportRefusal(crr, pod, refusal);
    const replaced = await this.updateLatest(crr, 'refused', (latest) => {
      if (isCompleted(latest)) return latest.status ?? {};
      const states = (latest.status?.containerRecreateStates ?? []).map((s): ContainerRecreateState =>
        s.name === container ? { ...s, phase: 'Failed', message: refusal.message } : s);
      return { ...latest.status, ...completedStatus(this.now(), { message: refusal.message, containerRecreateStates: states }) };
    });
    if (replaced && !isCompleted(replaced) && this.refusalTold.first(pod.uid)) {
      this.deps.events.emit(podRef(pod), { type: 'Warning', reason: EVENT_REASONS.requestRefused, message: `Request ${crr.metadata.name} ${refusal.message}` });
    }
  }

  /**
   * Writes `update(latest)` over the latest known request, retrying on conflict. Returns the version
   * it wrote over, or undefined when every try conflicted.
   */
  private async updateLatest(
    crr: ContainerRecreateRequest, outcome: string, update: (latest: ContainerRecreateRequest) => CRRStatus,
  ): Promise<ContainerRecreateRequest | undefined> {
    for (let attempt = 0; attempt < CONFLICT_RETRIES; attempt++) {
      const latest = this.latest(this.deps.cachedRequests(crr.metadata.namespace!).find((r) => r.metadata.uid === crr.metadata.uid) ?? crr);
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

/** When the reconcile that ordered a stop began, and its time in runtime status calls so far. */
interface StopTiming {
  actingAtMs: number;
  runtimeCheckMs: number;
}

function podRef(pod: AgentPod): { namespace: string; name: string; uid: string } {
  return { namespace: pod.namespace, name: pod.name, uid: pod.uid };
}

/**
 * Oldest first, then by name in code-unit order. Not localeCompare: its collator loads ICU data,
 * about 3 MiB more resident memory in every agent (measured), for names that are ASCII anyway.
 */
function byAge(a: ContainerRecreateRequest, b: ContainerRecreateRequest): number {
  const ta = new Date(a.metadata.creationTimestamp ?? 0).getTime();
  const tb = new Date(b.metadata.creationTimestamp ?? 0).getTime();
  const na = a.metadata.name ?? '';
  const nb = b.metadata.name ?? '';
  return ta - tb || (na < nb ? -1 : na > nb ? 1 : 0);
}

function outcomeOf(status: CRRStatus): string {
  const states = status.containerRecreateStates ?? [];
  if (states.length > 0 && states.every((s) => s.phase === 'Succeeded')) return 'succeeded';
  return states.some((s) => s.phase === 'Failed') ? 'failed' : 'refused';
}
