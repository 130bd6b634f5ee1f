// The I/O around requestOnMainExit: a container exit reported by the runtime leads to its Pod, the
// Pod's containers as the runtime lists them, and, when the rules say so, the first request for its
// sidecars, created by the agent itself.
import type { EventRecorder } from '../../common/events.ts';
import type { Logger } from '../../common/log.ts';
import { errorMessage } from '../../common/log.ts';
import { WorkQueue } from '../../common/queue.ts';
import { EVENT_REASONS } from '../../api/names.ts';
import type { PodProjection } from '../../rules/projection.ts';
import type { SidecarTerminatorOptions } from '../../rules/requests.ts';
import type { ExistingRequest } from '../../rules/requests.ts';
import { DEFAULT_OPTIONS, isOwnRequest, projectRequest } from '../../rules/requests.ts';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { reportedContainers, requestOnMainExit } from './main-exit.ts';
import type { AgentMetrics } from '../metrics.ts';
import { parseContainerID } from '../runtime/container-id.ts';
import type { ContainerOwner, ContainerRuntime, RuntimeContainer } from '../runtime/types.ts';
import type { CreatedOnExit } from '../timeline.ts';

export interface ExitHandlerDeps {
  nodeName: string;
  /** The Pod's projection for the sidecar rules; undefined for Pods that can never need them. */
  cachedPod: (namespace: string, name: string) => PodProjection | undefined;
  /** The same, found by a container ID (`<runtime>://<id>`) that kubelet has reported. */
  cachedPodOfContainer: (containerID: string) => PodProjection | undefined;
  activeRequests: (namespace: string, podUid: string) => ContainerRecreateRequest[];
  runtimeFor: (prefix: string) => ContainerRuntime | undefined;
  /** Resolves to the request as created, or undefined when a request of that name already exists. */
  createRequest: (request: ContainerRecreateRequest) => Promise<ContainerRecreateRequest | undefined>;
  /** The request of that name as the API server has it (after a 409), or undefined when there is none. */
  readRequest: (namespace: string, name: string) => Promise<ContainerRecreateRequest | undefined>;
  /** Hands a request just created to whoever carries it out, without waiting for its watch event. */
  created: (request: ContainerRecreateRequest, timing: CreatedOnExit) => void;
  /** The kubelet labels of a sidecar container (`<runtime>://<id>`), when read ahead. */
  ownerOf: (containerID: string) => ContainerOwner | undefined;
  /** What the runtime says of a container the request about to be created targets, for its stop. */
  runtimeAnswer: (containerID: string, container: RuntimeContainer) => void;
  events: EventRecorder;
  metrics: AgentMetrics;
  log: Logger;
  workers: number;
  /** The request's deadline and TTL, as the controller's flags set them for the requests it creates. */
  requestOptions: Pick<SidecarTerminatorOptions, 'activeDeadlineSeconds' | 'ttlSecondsAfterFinished'>;
}

/** Names found held by requests not ours, at most, before the first request is left to the controller. */
const MAX_NAME_TRIES = 4;

export class ExitHandler {
  private readonly deps: ExitHandlerDeps;
  private readonly queue: WorkQueue;
  private readonly options: SidecarTerminatorOptions;
  private stopped = false;
  /**
   * By Pod key: the exit codes the runtime's event stream announced, by container ID, kept while the
   * Pod is cached (kubelet reports them a second later, and the runtime's own listing may lag too),
   * and when the latest of those events arrived and its exit happened (for the timings).
   */
  private readonly reportedExits = new Map<string, { codes: Map<string, number>; lastAtMs: number; lastExitedAtMs?: number }>();
  /**
   * By Pod key, the runtime prefix of Pods whose mains' exit only kubelet's report settles (R7, R42):
   * looked at again on the Pod's next update, kept while the Pod is cached.
   */
  private readonly awaitingKubelet = new Map<string, string>();

  constructor(deps: ExitHandlerDeps) {
    this.deps = deps;
    this.options = { ...DEFAULT_OPTIONS, ...deps.requestOptions };
    this.queue = new WorkQueue({
      workers: deps.workers,
      handler: (key) => this.handle(key),
      onError: (key, err, retryInMs) => deps.log.warn('could not act on a container exit, retrying', { pod: key, error: errorMessage(err), retryInMs }),
    });
  }

  /** A container exited in `runtime`: look at its Pod again, if it is one the rules may concern. */
  containerExited(runtime: ContainerRuntime, containerId: string, exitCode: number, exitedAtMs?: number): void {
    if (this.stopped) return;
    const receivedAtMs = Date.now();
    if (exitedAtMs !== undefined) this.deps.metrics.exitEventDelay.observe(Math.max(0, receivedAtMs - exitedAtMs) / 1000);
    const known = this.deps.cachedPodOfContainer(`${runtime.idPrefix}://${containerId}`);
    const exit = { containerId, exitCode, receivedAtMs, exitedAtMs };
    if (known) {
      this.enqueue(runtime, known.namespace, known.name, exit);
      return;
    }
    // Not (yet) in a Pod status: the runtime's labels say whose it is.
    runtime.status(containerId).then(
      (container) => {
        const owner = container?.owner;
        // A Pod sandbox, a container kubelet did not create, or one already removed.
        if (!owner || !this.deps.cachedPod(owner.podNamespace, owner.podName)) return;
        this.enqueue(runtime, owner.podNamespace, owner.podName, exit);
      },
      (err: unknown) => this.deps.log.warn('could not read an exited container', { containerId, error: errorMessage(err) }),
    );
  }

  /** The Pod left the cache: its exits are of no more use. */
  forgetPod(namespace: string, name: string): void {
    this.reportedExits.delete(`${namespace}/${name}`);
    this.awaitingKubelet.delete(`${namespace}/${name}`);
  }

  /** The Pod's status changed: one whose main's exit waited for kubelet's report is looked at again. */
  podChanged(namespace: string, name: string): void {
    const podKey = `${namespace}/${name}`;
    const prefix = this.awaitingKubelet.get(podKey);
    if (prefix === undefined || this.stopped) return;
    this.awaitingKubelet.delete(podKey);
    this.queue.add(`${prefix}/${podKey}`);
  }

  private enqueue(runtime: ContainerRuntime, namespace: string, name: string, exit: ReportedExit): void {
    const podKey = `${namespace}/${name}`;
    const codes = this.reportedExits.get(podKey)?.codes ?? new Map<string, number>();
    codes.set(exit.containerId, exit.exitCode);
    this.reportedExits.set(podKey, { codes, lastAtMs: exit.receivedAtMs, ...(exit.exitedAtMs === undefined ? {} : { lastExitedAtMs: exit.exitedAtMs }) });
    this.queue.add(`${runtime.idPrefix}/${podKey}`);
  }

  /** Takes no new exits: nothing is queued or created after this (a request being created may finish). */
  stop(): void {
    this.stopped = true;
    this.queue.stop();
  }

  /**
   * What the runtime says of each container the request targets, for its stop, without waiting:
   * from the labels read ahead and the exits announced, else asked now, while the API server
   * stores the request (the answer comes when it comes; the reconciler asks itself without it).
   */
  private answerTargets(runtime: ContainerRuntime, request: ContainerRecreateRequest, exits: ReadonlyMap<string, number>): void {
    for (const { statusContext } of request.spec.containers) {
      const parsed = statusContext && parseContainerID(statusContext.containerID);
      if (!parsed || parsed.runtime !== runtime.idPrefix) continue;
      const { containerID } = statusContext;
      const owner = this.deps.ownerOf(containerID);
      if (owner) {
        const exitCode = exits.get(parsed.id);
        const state = exitCode === undefined ? 'running' : 'exited';
        this.deps.runtimeAnswer(containerID, { id: parsed.id, state, ...(exitCode === undefined ? {} : { exitCode }), startedAtNs: 0n, finishedAtNs: 0n, owner });
        continue;
      }
      runtime.status(parsed.id).then(
        (container) => container && this.deps.runtimeAnswer(containerID, container),
        () => {}, // the reconciler asks again, and reports the error
      );
    }
  }

  /**
   * Who holds the name of a request whose create got a 409: 'ours' (the controller, or an earlier
   * try, was first), the request that is not ours (its name is to be skipped), or undefined when
   * it is gone again (the name is free: tried again).
   */
  private async holderOf(request: ContainerRecreateRequest, pod: PodProjection): Promise<'ours' | ExistingRequest | undefined> {
    const existing = await this.deps.readRequest(request.metadata.namespace!, request.metadata.name!);
    if (!existing) return undefined;
    const projected = projectRequest(existing, pod.uid);
    if (isOwnRequest(projected, pod)) return 'ours';
    this.deps.log.warn('a request not ours holds our name: skipped', { pod: `${pod.namespace}/${pod.name}`, request: request.metadata.name });
    return projected;
  }

  private async handle(key: string): Promise<void> {
    const [prefix, namespace, name] = key.split('/') as [string, string, string];
    const reported = this.reportedExits.get(`${namespace}/${name}`);
    const exits = reported?.codes ?? new Map<string, number>();
    const pod = this.deps.cachedPod(namespace, name);
    const runtime = this.deps.runtimeFor(prefix);
    if (!pod || pod.nodeName !== this.deps.nodeName || !runtime?.podContainers) return;
    // The runtime is asked only when the cached status cannot answer: under a burst of exits its
    // listing is the slowest step (measured: up to 1.7 s with 100 exits at once).
    const containers = reportedContainers(pod, prefix, exits) ?? (await runtime.podContainers(pod.uid)).map((c) => {
      const exitCode = exits.get(c.id);
      return exitCode === undefined ? c : { ...c, state: 'exited' as const, exitCode };
    });
    const requests = this.deps.activeRequests(namespace, pod.uid).map((r) => projectRequest(r, pod.uid));
    const decide = () => requestOnMainExit({ pod, containers, runtimePrefix: prefix, requests, nowMs: Date.now(), options: this.options });
    const createStartMs = Date.now();
    const first = decide();
    if (first.awaitingKubelet.length > 0) {
      // The runtime cannot tell a probe kill kubelet restarts from a final exit: its report can.
      this.awaitingKubelet.set(`${namespace}/${name}`, prefix);
      this.deps.log.debug('main exited; waiting for kubelet to report whether it restarts it', { pod: `${namespace}/${name}`, containers: first.awaitingKubelet });
    }
    let decision = first.request;
    let created: ContainerRecreateRequest | undefined;
    // A 409: the name is held. By one of ours (the controller was first): the watch brings it. By a
    // request not ours (our name taken, see isOwnRequest): decided again without that name.
    for (let tries = 0; decision && !created && tries < MAX_NAME_TRIES; tries++) {
      if (tries === 0) this.answerTargets(runtime, decision.request, exits);
      created = await this.deps.createRequest(decision.request);
      if (created) break;
      const holder = await this.holderOf(decision.request, pod);
      if (holder === 'ours') break;
      if (holder) requests.push(holder);
      decision = decide().request;
    }
    if (!decision) return;
    const createdAtMs = Date.now();
    this.deps.metrics.requestsOnExit.inc({ result: created ? 'created' : 'existed' });
    if (!created) return;
    const exitEventAtMs = reported?.lastAtMs ?? createStartMs;
    this.deps.created(created, {
      exitEventAtMs, createdAtMs, apiCreateMs: createdAtMs - createStartMs,
      ...(reported?.lastExitedAtMs === undefined ? {} : { mainExitedAtMs: reported.lastExitedAtMs }),
    });
    if (reported) this.deps.metrics.exitToRequest.observe((createdAtMs - exitEventAtMs) / 1000);
    this.deps.log.info('main containers exited; request created', { pod: `${namespace}/${name}`, request: decision.request.metadata.name, containers: decision.containers });
    // Warnings about the Pod are the controller's to give; the agent reports what it did.
    for (const event of decision.events) if (event.reason === EVENT_REASONS.stopping) this.deps.events.emit(pod, event);
  }
}

interface ReportedExit {
  containerId: string;
  exitCode: number;
  receivedAtMs: number;
  /** The runtime's timestamp of the exit, when it gives one. */
  exitedAtMs?: number;
}
