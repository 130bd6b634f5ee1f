// The agent's I/O around the pure planner: gathers a Pod's requests, the Pod and the runtime's view
// of each target container, plans, and records the plan before a hooked stop begins (gather → plan
// → record); it dispatches the stops to Stops (agent/stops.ts) and the status writes to
// StatusWrites (agent/status-writes.ts).
import type { Clock } from '../common/clock.ts';
import { now } from '../common/clock.ts';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeApi } from '../common/kube/api.ts';
import { ignoreNotFound } from '../common/kube/errors.ts';
import { getObject } from '../common/kube/client.ts';
import { listPaged } from '../common/kube/list.ts';
import { isValidName, podPath } from '../common/kube/paths.ts';
import type { ContainerID } from '../api/container-id.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { completedStatus, LABEL_POD_UID, isCompleted, requestPath } from '../api/container-recreate-request.ts';
import type { EventRecorder } from '../common/events.ts';
import { namespacedKey, splitKey } from '../common/informer.ts';
import type { Logger } from '../common/log.ts';
import type { QueueResult, QueueWorker } from '../common/queue.ts';
import type { RequestPlan, RuntimeView } from './request-plan.ts';
import { awaitsAdmission, blockingRequest, isFinal, leftoverContainers, planRequest, runsInContainer } from './request-plan.ts';
import type { PodProjection } from '../rules/projection.ts';
import type { StopCommand } from '../rules/policy-marker.ts';
import { stopCommandsOf } from '../rules/policies.ts';
import { POD_REQUESTS_PAGE_SIZE } from '../rules/requests.ts';
import type { AgentPod } from './pod.ts';
import { projectAgentPod } from './pod.ts';
import type { AgentMetrics } from './metrics.ts';
import type { ContainerRuntimeOf } from './runtime/discover.ts';
import type { FirstStop, Handoff, RuntimeAnswer } from './fast-path/handoff.ts';
import { HandedOver, usableAnswer } from './fast-path/handoff.ts';
import type { RuntimeContainer } from './runtime/types.ts';
import { RequestTimings } from './timeline.ts';
import type { StopTiming } from './stops.ts';
import { Stops } from './stops.ts';
import { StatusWrites } from './status-writes.ts';
import { AheadOfWatch } from './ahead-of-watch.ts';

/** What the Reconciler reads of the node's watches. */
export interface ReconcilerCache {
  /** The cached Pod on this node, if the watch has it. */
  agentPod(namespace: string, name: string): AgentPod | undefined;
  /** Active requests for this node, in a namespace or in all. */
  requests(namespace?: string): ContainerRecreateRequest[];
  /** Whether the named Pod has an active request on this node. */
  hasRequests(namespace: string, name: string): boolean;
  /** The Pod's projection for the sidecar rules, with the policies in effect laid over it (their stop commands). */
  sidecarPod(namespace: string, name: string): PodProjection | undefined;
}

export interface ReconcilerDeps {
  nodeName: string;
  /** Reads a Pod the cache does not have; writes request status. */
  client: Pick<KubeApi, 'get' | 'patch'>;
  /** The node's watches (agent/node-cache.ts NodeCache). */
  cache: ReconcilerCache;
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

export class Reconciler {
  private readonly deps: ReconcilerDeps;
  private readonly now: Clock;
  private readonly apiNow: () => number;
  /** The stops ordered, carried out (in flight, per-Pod bounds, leftovers). */
  private readonly stops: Stops;
  /** Reconciles under way: one may be about to start a stop. */
  private readonly reconciling = new Set<Promise<unknown>>();
  /** Set by drain(): no new work is taken, only what was begun is finished. */
  private closing = false;
  /** What this agent created and wrote that the watch has not delivered yet. */
  private readonly ahead = new AheadOfWatch();
  /** The status writes, each over the latest version known (the cache's, or `ahead`'s). */
  private readonly statuses: StatusWrites;
  /** The fast path's hand-offs: the runtime's answers about their targets. */
  private readonly handedOver: HandedOver;
  /** When each request became known to this agent (the step histograms and logs). */
  private readonly timings = new RequestTimings();

  constructor(deps: ReconcilerDeps) {
    this.deps = deps;
    this.now = deps.now ?? now;
    this.apiNow = deps.apiNow ?? this.now;
    this.handedOver = new HandedOver(this.now);
    const { client, cache, forContainer, events, metrics, log, requeue } = deps;
    this.statuses = new StatusWrites({ client, cache, ahead: this.ahead, events, metrics, log, timings: this.timings, limit: deps.statusWrites ?? 32, now: this.now });
    this.stops = new Stops({ forContainer, statuses: this.statuses, events, metrics, log, timings: this.timings, requeue, now: this.now });
  }

  /** Drops what is remembered of requests no longer active (completed by the controller, deleted). */
  forgetAllBut(activeUids: ReadonlySet<string>): void {
    this.ahead.forgetAllBut(activeUids);
    this.timings.forgetAllBut(activeUids);
    this.handedOver.forgetStale();
  }

  /** Every active request's Pod is looked at again, and what is remembered of the others dropped. */
  resync(): void {
    const active = this.deps.cache.requests();
    for (const r of active) if (r.spec?.podName) this.deps.requeue(namespacedKey(r.metadata.namespace!, r.spec.podName));
    this.forgetAllBut(new Set(active.map((r) => r.metadata.uid!)));
  }

  /** A request's watch event arrived: its Pod is looked at. */
  requestChanged(request: ContainerRecreateRequest): void {
    this.noticed(request);
    this.deps.requeue(namespacedKey(request.metadata.namespace!, request.spec.podName));
  }

  /** A Pod's watch event arrived: looked at if it has requests, or containers left running in a finished Pod (R45). */
  podChanged(namespace: string, name: string, pod: AgentPod | undefined): void {
    if (this.deps.cache.hasRequests(namespace, name) || (pod && leftoverContainers(pod).length > 0)) this.deps.requeue(namespacedKey(namespace, name));
  }

  /** The runtime's exit stream reported a container's own process exited: none of ours is stopped again (R40). */
  containerExited(containerID: ContainerID): void {
    this.stops.exited(containerID);
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
    this.ahead.created(request);
    this.timings.createdOnExit(uid, timing);
    this.deps.requeue(namespacedKey(request.metadata.namespace!, request.spec.podName));
  }

  /**
   * R55: the stops of a request the fast path is creating, begun before the create returns: planned
   * as the request's own reconcile plans them (its Pod's uid and node, the runtime's kubelet labels,
   * kubelet's restart rules, in-flight and returned stops), from the runtime's answers the fast path
   * gathered. Only stops without a hook: a hook runs at most once, so its record comes first (R39).
   * Resolves to the containers (`<runtime>://<id>`) whose stop this began.
   */
  async stopFirst({ request, answers, exit }: FirstStop): Promise<ReadonlySet<string>> {
    const actingAtMs = this.now();
    const namespace = request.metadata.namespace!;
    const pod = this.deps.cache.agentPod(namespace, request.spec.podName);
    if (this.closing || !pod || awaitsAdmission(request)) return new Set();
    const byID: ReadonlyMap<string, Promise<RuntimeAnswer | undefined>> = answers;
    const runtime = await this.runtimeViews(request, pod, async (containerID) => usableAnswer(await byID.get(containerID), this.now()));
    const timing = { actingAtMs, runtimeCheckMs: this.now() - actingAtMs, exit };
    const plan = planRequest({
      crr: request, pod, nodeName: this.deps.nodeName, runtime, httpHooks: this.deps.httpHooks ?? true, stopCommands: this.stopCommands(pod), nowMs: this.now(), apiNowMs: this.apiNow(),
    });
    const key = namespacedKey(namespace, request.spec.podName);
    const started = new Set<string>();
    for (const stop of plan.stops) {
      // A hook the cache did not keep (too large) is in the Pod still: left to the request's reconcile.
      if (runsInContainer(stop) || pod.containers.find((c) => c.name === stop.name)?.preStopNotKept) continue;
      this.stops.startFirstStop(request, pod, stop, key, timing, runtime.get(stop.name)?.container);
      started.add(stop.containerID);
    }
    return started;
  }

  /** Stops under way in this process. */
  stopsInFlight(): number {
    return this.stops.count();
  }

  /**
   * For a shutdown: takes no new work, and resolves true once the reconciles and stops already begun
   * (hook, StopContainer and the status write after) have finished, or false after `timeoutMs`.
   * A stop cut short is resumed by the next agent, without its hook (isKilled is recorded).
   */
  async drain(timeoutMs: number): Promise<boolean> {
    this.closing = true;
    this.stops.close();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const settled = (async () => {
      while (this.reconciling.size > 0 || this.stops.count() > 0) {
        await Promise.allSettled([...this.reconciling, ...this.stops.underWay()]);
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
      .map((r) => this.ahead.latest(r))
      .filter((r) => !isCompleted(r) && !awaitsAdmission(r))
      .sort(byAge);
    const cached = this.deps.cache.agentPod(namespace, podName);
    // A container an active request asks is stopped by it, its stop command and hook first (R23).
    const asked = new Set(requests.flatMap((r) => r.spec.containers.map((c) => c.name)));
    const leftoversRecheckMs = cached ? await this.stops.stopLeftovers(cached, key, asked) : undefined;
    if (requests.length === 0) return leftoversRecheckMs === undefined ? undefined : { requeueAfterMs: leftoversRecheckMs };
    for (const r of requests) if (r.metadata.uid) this.timings.seen(r.metadata.uid, actingAtMs);

    const pod = await this.loadPod(namespace, podName, requests[0]!, requests);
    if (!pod) {
      for (const r of requests) await this.statuses.writeStatus(r, { ...r.status, ...completedStatus(this.now(), { message: `Pod ${key} not found` }) }, 'refused');
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
      await this.statuses.apply(r, pod, plan);
    }
    const claims = new Map<string, string>();
    const started = (await Promise.all(free.map((r) => this.planAndStop(r, pod, key, actingAtMs, claims)))).filter((c) => c !== undefined);
    // Every stop without a hook is sent: the status writes left hold up none, so the worker goes to
    // the next Pod (a burst's stops wait on no one's writes). A hook waits for its write: not then.
    if (!started.some((c) => c.plan.stops.some(runsInContainer))) worker?.release();
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
    const runtime = await this.runtimeViews(request, pod, (containerID) => this.handedOver.takeAnswer(containerID));
    const timing = { actingAtMs, runtimeCheckMs: this.now() - checkStartMs };
    const inputs = { crr: request, pod, nodeName: this.deps.nodeName, runtime, httpHooks: this.deps.httpHooks ?? true, stopCommands: this.stopCommands(pod) };
    let plan = planRequest({ ...inputs, nowMs: this.now(), apiNowMs: this.apiNow() });
    // A hook runs at most once per container, whichever request asks: before one starts, the Pod's
    // other requests (completed ones too) are asked whether one of them started it already.
    if (plan.stops.some(runsInContainer)) {
      const preStopsStarted = await this.preStopsStartedElsewhere(request, pod);
      const again = plan.stops.filter((s) => runsInContainer(s) && preStopsStarted.has(s.containerID));
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
      if (!runsInContainer(stop)) this.stops.startStop(request, pod, stop, key, timing, runtime.get(stop.name)?.container);
    }
    return { request, plan, timing };
  }

  /**
   * Writes the plan's status, then starts its stops with a hook: a hook must never run twice, so
   * isKilled is in the API before it (and its stop) begins, and a restarted agent resumes without it.
   * Returns when to look again.
   */
  private async record({ request, plan, timing }: StartedPlan, pod: AgentPod, key: string): Promise<number | undefined> {
    const written = await this.statuses.apply(request, pod, plan);
    for (const stop of plan.stops) if (runsInContainer(stop)) this.stops.startStop(written, pod, stop, key, timing);
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

  /** What the cluster policies run in the Pod's containers before their stop: from the projection of this very Pod. */
  private stopCommands(pod: AgentPod): ReadonlyMap<string, StopCommand> {
    const projection = this.deps.cache.sidecarPod(pod.namespace, pod.name);
    return projection?.uid === pod.uid ? stopCommandsOf(projection) : new Map();
  }

  /** The Pod's requests in the watch cache, and those this agent created that the watch has not delivered yet. */
  private requestsOf(namespace: string, podName: string): ContainerRecreateRequest[] {
    const cached = this.deps.cache.requests(namespace).filter((r) => r.spec?.podName === podName);
    return this.ahead.requestsOf(namespace, podName, cached);
  }

  /**
   * The Pod from the cache, or from the API when the cache does not have the one the request is for,
   * or lacks a hook of a container one of the requests names (too large to keep, see MAX_KEPT_HOOK_BYTES).
   */
  private async loadPod(namespace: string, name: string, request: ContainerRecreateRequest, all: readonly ContainerRecreateRequest[]): Promise<AgentPod | undefined> {
    const wantedUid = request.metadata.labels?.[LABEL_POD_UID];
    const cached = this.deps.cache.agentPod(namespace, name);
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
   * statusContext's): asked now, or `given` ahead by the fast path, which asked while it created the request.
   */
  private async runtimeViews(crr: ContainerRecreateRequest, pod: AgentPod, given: (containerID: string) => Promise<RuntimeContainer | undefined>): Promise<Map<string, RuntimeView>> {
    const views = new Map<string, RuntimeView>();
    const recorded = new Map((crr.status?.containerRecreateStates ?? []).map((s) => [s.name, s]));
    await Promise.all(crr.spec.containers.map(async (c) => {
      const containerID = pod.statuses.find((s) => s.name === c.name)?.containerID;
      if (!containerID || isFinal(recorded.get(c.name))) return;
      if (this.stops.stopping(containerID)) {
        views.set(c.name, { containerID, stopping: true });
        return;
      }
      // An answer handed over tells of the container before any stop: once isKilled is recorded
      // (the watch brought the request first, and its reconcile stopped it), the runtime is asked.
      const answer = await given(containerID);
      const usable = recorded.get(c.name)?.isKilled ? undefined : answer;
      views.set(c.name, this.stops.withRecheck({ containerID, ...(usable ? { container: usable } : await this.stops.inspect(containerID)) }));
    }));
    return views;
  }

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
