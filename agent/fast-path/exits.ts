// The I/O around requestOnMainExit: a container exit reported by the runtime leads to its Pod, the
// Pod's containers as the runtime lists them, and, when the rules say so, the first request for its
// sidecars, created by the agent itself once its stops have begun (R55).
import type { Clock } from '../../common/clock.ts';
import { now } from '../../common/clock.ts';
import type { EventRecorder } from '../../common/events.ts';
import type { Logger } from '../../common/log.ts';
import { errorMessage } from '../../common/log.ts';
import type { QueueWorker } from '../../common/queue.ts';
import { WorkQueue } from '../../common/queue.ts';
import { EVENT_REASONS } from '../../api/names.ts';
import type { PodProjection } from '../../rules/projection.ts';
import type { SidecarTerminatorOptions } from '../../rules/requests.ts';
import type { ExistingRequest } from '../../rules/requests.ts';
import { DEFAULT_OPTIONS, isOwnRequest, projectRequest } from '../../rules/requests.ts';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { reportedContainers, requestOnMainExit } from './main-exit.ts';
import type { AgentMetrics } from '../metrics.ts';
import type { ContainerID, RuntimeContainerID } from '../../api/container-id.ts';
import { containerIDOf } from '../../api/container-id.ts';
import type { RuntimeRegistry } from '../runtime-registry.ts';
import type { ContainerOwner, ContainerRuntime } from '../runtime/types.ts';
import type { FirstStop, Handoff, RuntimeAnswer } from './handoff.ts';
import { namespacedKey, splitKey } from '../../common/informer.ts';

/** What the agent's watches hold, as the fast path reads it. */
export interface ExitCache {
  /** The Pod's projection for the sidecar rules; undefined for Pods that can never need them. */
  sidecarPod: (namespace: string, name: string) => PodProjection | undefined;
  /** The same, found by a container ID that kubelet has reported. */
  sidecarPodOfContainer: (containerID: ContainerID) => PodProjection | undefined;
  /** The Pod's active requests on this node. */
  activeRequests: (namespace: string, podUid: string) => ContainerRecreateRequest[];
  /** Whether the policy watches are current: a Pod that a policy marks is left to the controller otherwise. */
  policiesCurrent: () => boolean;
}

/** The request calls of the fast path. */
export interface RequestApi {
  /** Resolves to the request as created, or undefined when a request of that name already exists. */
  create: (request: ContainerRecreateRequest) => Promise<ContainerRecreateRequest | undefined>;
  /** The request of that name as the API server has it (after a 409), or undefined when there is none. */
  read: (namespace: string, name: string) => Promise<ContainerRecreateRequest | undefined>;
}

export interface ExitHandlerDeps {
  nodeName: string;
  cache: ExitCache;
  api: RequestApi;
  runtimes: Pick<RuntimeRegistry, 'runtimeFor' | 'forContainer'>;
  /** The kubelet labels of a sidecar container, when read ahead. */
  ownerOf: (containerID: ContainerID) => ContainerOwner | undefined;
  /**
   * Begins the stops of a request about to be created (R55); resolves to the containers
   * (`<runtime>://<id>`) whose stop is under way.
   */
  stopFirst: (first: FirstStop) => Promise<ReadonlySet<string>>;
  /** Hands a request just created to whoever carries it out, without waiting for its watch event. */
  handOff: (handoff: Handoff) => void;
  events: EventRecorder;
  metrics: AgentMetrics;
  log: Logger;
  workers: number;
  /** The request's deadline and TTL, as the controller's flags set them for the requests it creates. */
  requestOptions: Pick<SidecarTerminatorOptions, 'activeDeadlineSeconds' | 'ttlSecondsAfterFinished'>;
  now?: Clock;
}

/** Names found held by requests not ours, at most, before the first request is left to the controller. */
const MAX_NAME_TRIES = 4;

declare const exitKeyBrand: unique symbol;
/** A key of the exit queue: a Pod and the runtime whose exits concern it, `<runtime>/<namespace>/<name>`. */
type ExitKey = string & { readonly [exitKeyBrand]: true };

function exitKey(runtimePrefix: string, namespace: string, name: string): ExitKey {
  return `${runtimePrefix}/${namespacedKey(namespace, name)}` as ExitKey;
}

/** A runtime prefix has no slash (api/container-id.ts), so the first one ends it. */
function parseExitKey(key: string): { runtimePrefix: string; namespace: string; name: string } {
  const slash = key.indexOf('/');
  const [namespace, name] = splitKey(key.slice(slash + 1));
  return { runtimePrefix: key.slice(0, slash), namespace, name };
}

export class ExitHandler {
  private readonly deps: ExitHandlerDeps;
  private readonly queue: WorkQueue;
  private readonly options: SidecarTerminatorOptions;
  private readonly now: Clock;
  /** Runtime lookups of exited containers kubelet has not reported yet, under way. */
  private readonly lookups = new Set<Promise<void>>();
  private stopped = false;
  /**
   * By Pod key: the exit codes the runtime's event stream announced, by container ID, kept while the
   * Pod is cached (kubelet reports them a second later, and the runtime's own listing may lag too),
   * and when the latest of those events arrived and its exit happened (for the timings).
   */
  private readonly reportedExits = new Map<string, { codes: Map<RuntimeContainerID, number>; lastAtMs: number; lastExitedAtMs?: number }>();
  /**
   * By Pod key, the runtime prefix of Pods whose mains' exit only kubelet's report settles (R7, R43):
   * looked at again on the Pod's next update, kept while the Pod is cached.
   */
  private readonly awaitingKubelet = new Map<string, string>();

  constructor(deps: ExitHandlerDeps) {
    this.deps = deps;
    this.options = { ...DEFAULT_OPTIONS, ...deps.requestOptions };
    this.now = deps.now ?? now;
    this.queue = new WorkQueue({
      workers: deps.workers,
      now: this.now,
      handler: (key, worker) => this.handle(key, worker),
      observe: deps.metrics.workQueue('exits'),
      onError: (key, err, retryInMs) => deps.log.warn('could not act on a container exit, retrying', { pod: key, error: errorMessage(err), retryInMs }),
    });
  }

  /** A container exited in `runtime`: look at its Pod again, if it is one the rules may concern. */
  containerExited(runtime: ContainerRuntime, containerId: RuntimeContainerID, exitCode: number, exitedAtMs?: number): void {
    if (this.stopped) return;
    const receivedAtMs = this.now();
    if (exitedAtMs !== undefined) this.deps.metrics.exitEventDelay.observe(Math.max(0, receivedAtMs - exitedAtMs) / 1000);
    const reportedPod = this.deps.cache.sidecarPodOfContainer(containerIDOf(runtime.idPrefix, containerId));
    const exit = { containerId, exitCode, receivedAtMs, exitedAtMs };
    if (reportedPod) {
      this.enqueue(runtime, reportedPod.namespace, reportedPod.name, exit);
      return;
    }
    // Not (yet) in a Pod status: the runtime's labels say whose it is.
    const lookup: Promise<void> = runtime.status(containerId).then(
      (container) => {
        const owner = container?.owner;
        // A Pod sandbox, a container kubelet did not create, or one already removed.
        if (!owner || !this.deps.cache.sidecarPod(owner.podNamespace, owner.podName)) return;
        this.enqueue(runtime, owner.podNamespace, owner.podName, exit);
      },
      (err: unknown) => {
        this.deps.log.warn('could not read an exited container', { containerId, error: errorMessage(err) });
      },
    );
    this.lookups.add(lookup);
    void lookup.finally(() => this.lookups.delete(lookup));
  }

  /** Resolves once every exit received so far has been acted on (for tests). */
  async idle(): Promise<void> {
    while (this.lookups.size > 0) await Promise.all(this.lookups);
    await this.queue.idle();
  }

  /** The Pod left the cache: its exits are of no more use. */
  forgetPod(namespace: string, name: string): void {
    this.reportedExits.delete(namespacedKey(namespace, name));
    this.awaitingKubelet.delete(namespacedKey(namespace, name));
  }

  /** The Pod's status changed: one whose main's exit waited for kubelet's report is looked at again. */
  podChanged(namespace: string, name: string): void {
    const key = namespacedKey(namespace, name);
    const prefix = this.awaitingKubelet.get(key);
    if (prefix === undefined || this.stopped) return;
    this.awaitingKubelet.delete(key);
    this.queue.add(exitKey(prefix, namespace, name));
  }

  private enqueue(runtime: ContainerRuntime, namespace: string, name: string, exit: ReportedExit): void {
    const key = namespacedKey(namespace, name);
    const codes = this.reportedExits.get(key)?.codes ?? new Map<RuntimeContainerID, number>();
    codes.set(exit.containerId, exit.exitCode);
    this.reportedExits.set(key, { codes, lastAtMs: exit.receivedAtMs, ...(exit.exitedAtMs === undefined ? {} : { lastExitedAtMs: exit.exitedAtMs }) });
    this.queue.add(exitKey(runtime.idPrefix, namespace, name));
  }

  /** Takes no new exits: nothing is queued or created after this (a request being created may finish). */
  stop(): void {
    this.stopped = true;
    this.queue.stop();
  }

  /**
   * The runtime's answers about the request's targets whose labels were not read ahead, for their
   * stops: asked now, while the API server stores the request (an answer comes when it comes; the
   * reconciler asks itself without it).
   */
  private askRuntimeAboutTargets(runtime: ContainerRuntime, request: ContainerRecreateRequest): Map<ContainerID, Promise<RuntimeAnswer | undefined>> {
    const answers = new Map<ContainerID, Promise<RuntimeAnswer | undefined>>();
    for (const { full, id, owner } of this.targetsOn(runtime, request)) {
      if (owner) continue;
      answers.set(full, runtime.status(id).then(
        (container) => (container ? { container, atMs: this.now() } : undefined),
        () => undefined, // the reconciler asks again, and reports the error
      ));
    }
    return answers;
  }

  /**
   * The answers about the targets whose labels were read ahead, from them and the exits announced
   * so far: made as the create returns, so that they are fresh for the stops (a burst's create
   * can take seconds, and exits announced meanwhile count).
   */
  private answersFromLabels(runtime: ContainerRuntime, request: ContainerRecreateRequest, exits: ReadonlyMap<RuntimeContainerID, number>): Map<ContainerID, Promise<RuntimeAnswer>> {
    const answers = new Map<ContainerID, Promise<RuntimeAnswer>>();
    for (const { full, id, owner } of this.targetsOn(runtime, request)) {
      if (!owner) continue;
      const exitCode = exits.get(id);
      const state = exitCode === undefined ? 'running' : 'exited';
      const container = { id, state, ...(exitCode === undefined ? {} : { exitCode }), startedAtNs: 0n, finishedAtNs: 0n, owner } as const;
      answers.set(full, Promise.resolve({ container, atMs: this.now() }));
    }
    return answers;
  }

  /** The request's targets on `runtime`, by the IDs their statusContext pins, with their labels when read ahead. */
  private *targetsOn(runtime: ContainerRuntime, request: ContainerRecreateRequest): Generator<{ full: ContainerID; id: RuntimeContainerID; owner: ContainerOwner | undefined }> {
    for (const { statusContext } of request.spec.containers) {
      const target = statusContext && this.deps.runtimes.forContainer(statusContext.containerID);
      if (!target || !('runtime' in target) || target.runtime.idPrefix !== runtime.idPrefix) continue;
      const { full, id } = target.container;
      yield { full, id, owner: this.deps.ownerOf(full) };
    }
  }

  /**
   * Who holds the name of a request whose create got a 409: 'ours' (the controller, or an earlier
   * try, was first), the request that is not ours (its name is to be skipped), or undefined when
   * it is gone again (the name is free: tried again).
   */
  private async holderOf(request: ContainerRecreateRequest, pod: PodProjection): Promise<'ours' | ExistingRequest | undefined> {
    const existing = await this.deps.api.read(request.metadata.namespace!, request.metadata.name!);
    if (!existing) return undefined;
    const projected = projectRequest(existing, pod.uid);
    if (isOwnRequest(projected, pod)) return 'ours';
    this.deps.log.warn('a request not ours holds our name: skipped', { pod: namespacedKey(pod.namespace, pod.name), request: request.metadata.name });
    return projected;
  }

  private async handle(key: string, worker?: QueueWorker): Promise<void> {
    const { runtimePrefix: prefix, namespace, name } = parseExitKey(key);
    const reported = this.reportedExits.get(namespacedKey(namespace, name));
    const exits = reported?.codes ?? new Map<RuntimeContainerID, number>();
    const pod = this.deps.cache.sidecarPod(namespace, name);
    const runtime = this.deps.runtimes.runtimeFor(prefix);
    if (!pod || pod.nodeName !== this.deps.nodeName || !runtime?.podContainers) return;
    // The runtime is asked only when the cached status cannot answer: under a burst of exits its
    // listing is the slowest step (measured: up to 1.7 s with 100 exits at once).
    const containers = reportedContainers(pod, prefix, exits) ?? (await runtime.podContainers(pod.uid)).map((c) => {
      const exitCode = exits.get(c.id);
      return exitCode === undefined ? c : { ...c, state: 'exited' as const, exitCode };
    });
    const requests = this.deps.cache.activeRequests(namespace, pod.uid).map((r) => projectRequest(r, pod.uid));
    const decide = () => requestOnMainExit({ pod, containers, runtimePrefix: prefix, requests, nowMs: this.now(), options: this.options, policiesCurrent: this.deps.cache.policiesCurrent() });
    const createStartMs = this.now();
    const first = decide();
    if (first.policiesNotCurrent) {
      this.deps.metrics.requestsOnExit.inc({ result: 'policies-not-current' });
      this.deps.log.info('a policy marks a container of the Pod, and the policy watch is not current: the controller creates its request', { pod: namespacedKey(namespace, name) });
    }
    if (first.awaitingKubelet.length > 0) {
      // The runtime cannot tell a probe kill kubelet restarts from a final exit: its report can.
      this.awaitingKubelet.set(namespacedKey(namespace, name), prefix);
      this.deps.log.debug('main exited; waiting for kubelet to report whether it restarts it', { pod: namespacedKey(namespace, name), containers: first.awaitingKubelet });
    }
    let decision = first.request;
    let created: ContainerRecreateRequest | undefined;
    let asked: ReadonlyMap<ContainerID, Promise<RuntimeAnswer | undefined>> = new Map();
    let stoppedFirst: ReadonlySet<string> = new Set();
    const exitEventAtMs = reported?.lastAtMs ?? createStartMs;
    const exit = { exitEventAtMs, ...(reported?.lastExitedAtMs === undefined ? {} : { mainExitedAtMs: reported.lastExitedAtMs }) };
    // A 409: the name is held. By one of ours (the controller was first): the watch brings it. By a
    // request not ours (our name taken, see isOwnRequest): decided again without that name.
    for (let tries = 0; decision && !created && tries < MAX_NAME_TRIES; tries++) {
      if (tries === 0) {
        asked = this.askRuntimeAboutTargets(runtime, decision.request);
        // The stop first, the record after (R55): the create is off the stop's path, and whatever
        // becomes of it (a 409, an error the queue retries), the request's reconcile records the stop.
        const answers = new Map([...asked, ...this.answersFromLabels(runtime, decision.request, exits)]);
        stoppedFirst = await this.deps.stopFirst({ request: decision.request, answers, exit }).catch((err: unknown) => {
          this.deps.log.warn('could not begin the stop before the create: the request\'s reconcile stops', { pod: namespacedKey(namespace, name), error: errorMessage(err) });
          return new Set<string>();
        });
        // Begun: the create holds up no stop, so the worker goes to the next Pod's exit (a burst's
        // stops wait on no one's create), and the stop is in flight before its request can be seen.
        worker?.release();
      }
      created = await this.deps.api.create(decision.request);
      if (created) break;
      const holder = await this.holderOf(decision.request, pod);
      if (holder === 'ours') break;
      if (holder) requests.push(holder);
      decision = decide().request;
    }
    if (!decision) return;
    const createdAtMs = this.now();
    this.deps.metrics.requestsOnExit.inc({ result: created ? 'created' : 'existed' });
    if (!created) return;
    // An answer from before a stop this agent began says nothing of the container now.
    const answers = [...asked, ...this.answersFromLabels(runtime, decision.request, exits)].filter(([containerID]) => !stoppedFirst.has(containerID));
    this.deps.handOff({
      request: created,
      answers: new Map(answers),
      timing: { ...exit, createdAtMs, apiCreateMs: createdAtMs - createStartMs },
    });
    if (reported) this.deps.metrics.exitToRequest.observe((createdAtMs - exitEventAtMs) / 1000);
    this.deps.log.info('main containers exited; request created', { pod: namespacedKey(namespace, name), request: decision.request.metadata.name, containers: decision.containers });
    // Warnings about the Pod are the controller's to give; the agent reports what it did.
    for (const event of decision.events) if (event.reason === EVENT_REASONS.stopping) this.deps.events.emit(pod, event);
  }
}

interface ReportedExit {
  containerId: RuntimeContainerID;
  exitCode: number;
  receivedAtMs: number;
  /** The runtime's timestamp of the exit, when it gives one. */
  exitedAtMs?: number;
}
