// The stops the Reconciler orders, carried out: each container stopped once at a time (in flight,
// by full container ID), at most STOPS_PER_POD StopContainer calls per Pod, the hook first when the
// order has one, a failure recorded in the request; the fast path's stops begun before their
// request exists (R55), under the same keys and bounds; the leftovers of a finished Pod (R45); and
// a shutdown's wait for what was begun.
import type { Clock } from '../common/clock.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import type { EventRecorder } from '../common/events.ts';
import { namespacedKey } from '../common/informer.ts';
import { KeyedLimit } from '../common/keyed-limit.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { Refusal, RuntimeView, StopOrder } from './request-plan.ts';
import { leftoverContainers, leftoverStops, ownerRefusal } from './request-plan.ts';
import type { AgentPod } from './pod.ts';
import { runPreStop } from './prestop.ts';
import type { AgentMetrics } from './metrics.ts';
import type { ContainerRuntimeOf } from './runtime/discover.ts';
import type { RuntimeContainer } from './runtime/types.ts';
import type { ExitSeen, RequestKnown, RequestTimings } from './timeline.ts';
import { observeStopSteps, stopTimeline } from './timeline.ts';
import { ReturnedStops } from './returned-stops.ts';
import type { StatusWrites } from './status-writes.ts';
import { podRef } from './status-writes.ts';

export interface StopsDeps {
  /** The runtime serving a Pod status container ID (`<runtime>://<id>`), and the ID's parts. */
  forContainer: (containerID: string) => ContainerRuntimeOf;
  /** Where a stop's failure, or a refusal found right before it, is recorded. */
  statuses: StatusWrites;
  events: EventRecorder;
  metrics: AgentMetrics;
  log: Logger;
  /** When each request became known (a stop's timeline). */
  timings: RequestTimings;
  /** Asks for the Pod's requests to be looked at again (after a stop finishes). */
  requeue: (podKey: string) => void;
  now: Clock;
}

/**
 * Where a stop's outcome goes: the request's status, or for a stop begun before its request exists
 * (R55) the log alone, as the request's own reconcile then finds and records what the stop left.
 */
interface StopRecord {
  /** The request's name (the Killing event, the logs). */
  name: string;
  /** When the request, or the exit that a first stop answers, became known (the timeline). */
  known: () => RequestKnown | undefined;
  failed: (container: string, message: string) => Promise<void>;
  refused: (container: string, refusal: Refusal) => Promise<void>;
}

/** When the reconcile that ordered a stop began, and its time in runtime status calls so far. */
export interface StopTiming {
  actingAtMs: number;
  runtimeCheckMs: number;
}

const MIN_STOP_SECONDS = 2;
/**
 * StopContainer calls at once per Pod. containerd 2 runs all of a Pod's containers under one shim,
 * whose queue of process exits holds 32: on containerd 2.4.2, 32 stops at once in one Pod ended in
 * about a second, 48 hung for a minute with the containers still running (the shim lost exits).
 * Eight keep well inside it (each stop also has a `runc kill` process exit) and stop 64 sidecars in
 * about 6 s (test/cri.test.ts).
 */
export const STOPS_PER_POD = 8;

export class Stops {
  private readonly deps: StopsDeps;
  /**
   * Stops under way in this process (hook, StopContainer, the status write after), by full container
   * ID: never issue the same stop twice at once, and let a shutdown wait for them.
   */
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Set by close(): no new leftover stop is begun. */
  private closing = false;
  /** Stops that returned (answered or failed) while the runtime may still say running: looked at again after a wait. */
  private readonly returnedStops: ReturnedStops;
  /** StopContainer calls under way, by Pod uid (STOPS_PER_POD). */
  private readonly podStops = new KeyedLimit(STOPS_PER_POD);

  constructor(deps: StopsDeps) {
    this.deps = deps;
    this.returnedStops = new ReturnedStops(deps.now);
  }

  /** Stops under way in this process. */
  count(): number {
    return this.inFlight.size;
  }

  /** Whether this process is stopping the container (`<runtime>://<id>`) now. */
  stopping(containerID: string): boolean {
    return this.inFlight.has(containerID);
  }

  /** The stops under way, to wait for. */
  underWay(): Promise<void>[] {
    return [...this.inFlight.values()];
  }

  /** For a shutdown: no new leftover stop is begun (the Reconciler begins no new request's stop). */
  close(): void {
    this.closing = true;
  }

  /** The runtime's exit stream reported the container's (`<runtime>://<id>`) own process exited. */
  exited(containerID: string): void {
    this.returnedStops.exited(containerID);
  }

  /**
   * The view, with this agent's own stop of the container when one returned: when to look again if
   * the runtime still says running, or that its exit is that stop's (a stop begun before its request, R55).
   */
  withRecheck(view: RuntimeView): RuntimeView {
    if (!view.containerID || !this.returnedStops.stoppedHere(view.containerID)) return view;
    const recheckInMs = view.container?.state === 'running' ? this.returnedStops.waitLeftMs(view.containerID) : undefined;
    return { ...view, stoppedHere: true, ...(recheckInMs === undefined ? {} : { recheckInMs }) };
  }

  /** The runtime's view of the container now. */
  async inspect(containerID: string): Promise<RuntimeView> {
    const target = this.deps.forContainer(containerID);
    if (!('runtime' in target)) return { error: target.error };
    try {
      return { container: await target.runtime.status(target.container.id) };
    } catch (err) {
      this.deps.metrics.runtimeErrors.inc({ method: 'status' });
      return { error: `${target.container.runtime} status: ${errorMessage(err)}` };
    }
  }

  /**
   * R45: what still runs in a Pod whose phase the controller set is stopped now, within its grace,
   * but for the containers an active request asks (that request stops them, command and hook first).
   * Returns when to look again at a container whose stop returned while the runtime still says running.
   */
  async stopLeftovers(pod: AgentPod, key: string, askedByRequests: ReadonlySet<string>): Promise<number | undefined> {
    const leftovers = leftoverContainers(pod).filter((s) => !this.inFlight.has(s.containerID) && !askedByRequests.has(s.name));
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
    if (!('runtime' in target) || this.inFlight.has(order.containerID) || this.closing) return;
    const { runtime, container: { id } } = target;
    const where = { pod: namespacedKey(pod.namespace, pod.name), container: order.name, containerID: order.containerID };
    this.track(order.containerID, key, (async () => {
      // Stopped again after the wait (R40): the Pod was told already.
      if (!this.returnedStops.stoppedHere(order.containerID)) {
        this.deps.events.emit(podRef(pod), {
          type: 'Normal', reason: EVENT_REASONS.killing,
          message: `Stopping container ${order.name}: the Pod's phase is ${pod.phase} (set by sidecar-terminator), so nothing of it may run on`,
        });
      }
      const started = this.deps.now();
      try {
        await this.podStops.run(pod.uid, () => runtime.stop(id, order.graceSeconds, order.stopSignal));
        this.returnedStops.returned(order.containerID);
        this.deps.metrics.containerStops.inc({ result: 'stopped' });
        this.deps.log.info('container left running in a finished Pod stopped', { ...where, phase: pod.phase, ms: this.deps.now() - started });
      } catch (err) {
        if (this.failedStopExited(order.containerID)) {
          this.deps.log.info('container left running in a finished Pod stopped: the runtime reported its exit, though the stop call failed', { ...where, error: errorMessage(err) });
        } else {
          this.deps.log.warn('stopping a container left running in a finished Pod failed', { ...where, error: errorMessage(err) });
        }
      }
    })());
  }

  /** Begins a request's stop, unless this process is stopping the container already. */
  startStop(crr: ContainerRecreateRequest, pod: AgentPod, order: StopOrder, key: string, timing: StopTiming, checked?: RuntimeContainer): void {
    const record: StopRecord = {
      name: crr.metadata.name!,
      known: () => (crr.metadata.uid ? this.deps.timings.of(crr.metadata.uid) : undefined),
      failed: (container, message) => this.deps.statuses.markFailed(crr, container, message),
      refused: (container, refusal) => this.deps.statuses.refuseNow(crr, pod, container, refusal),
    };
    this.begin(record, pod, order, key, timing, checked);
  }

  /**
   * R55: begins the stop of a request the fast path is creating, before the create returns: the
   * same checks, hook, signal and bounds, under the same key, so the request's own reconcile sees
   * it in flight (or returned) and only records it. A failure or a refusal found right before the
   * stop is logged: that reconcile finds the container still running, or its labels wrong, again.
   */
  startFirstStop(request: ContainerRecreateRequest, pod: AgentPod, order: StopOrder, key: string, timing: StopTiming & { exit: ExitSeen }, checked?: RuntimeContainer): void {
    // A Pod's first request: a stop this process saw return already is the request's to look at again (R40).
    if (this.returnedStops.stoppedHere(order.containerID)) return;
    const where = { pod: namespacedKey(pod.namespace, pod.name), request: request.metadata.name };
    const record: StopRecord = {
      name: request.metadata.name!,
      known: () => ({ atMs: timing.exit.exitEventAtMs, stoppedOnExit: timing.exit }),
      failed: async (container, message) => {
        this.deps.log.warn('stop begun before its request failed: the request retries it', { ...where, container, message });
      },
      refused: async (container, refusal) => {
        this.deps.log.warn('stop begun before its request refused: the request records it', { ...where, container, message: refusal.message });
      },
    };
    this.begin(record, pod, order, key, timing, checked);
  }

  private begin(record: StopRecord, pod: AgentPod, order: StopOrder, key: string, timing: StopTiming, checked?: RuntimeContainer): void {
    if (this.inFlight.has(order.containerID)) return;
    this.track(order.containerID, key, this.stop(record, pod, order, { actingAtMs: timing.actingAtMs, runtimeCheckMs: timing.runtimeCheckMs }, checked)
      .catch((err: unknown) => {
        this.deps.log.error('stop bookkeeping failed', { container: order.containerID, error: errorMessage(err) });
      }));
  }

  /** Kept in flight until done; then the Pod is looked at again. */
  private track(containerID: string, key: string, stop: Promise<void>): void {
    const done = stop.finally(() => {
      this.inFlight.delete(containerID);
      this.deps.requeue(key);
    });
    this.inFlight.set(containerID, done);
  }

  /**
   * `checked`: the runtime's view of the container taken by the reconcile that ordered this stop,
   * with nothing awaited since; otherwise (a hook ran after the status write) the runtime is asked
   * again right before.
   */
  private async stop(record: StopRecord, pod: AgentPod, order: StopOrder, timing: StopTiming, checked?: RuntimeContainer): Promise<void> {
    const ref = podRef(pod);
    const target = this.deps.forContainer(order.containerID);
    if (!('runtime' in target)) return record.failed(order.name, `${target.error}; nothing was executed`);
    const { runtime, container: parsed } = target;
    const started = this.deps.now();

    let current = checked?.id === parsed.id ? checked : undefined;
    if (!current) {
      try {
        current = await runtime.status(parsed.id);
      } catch (err) {
        this.deps.metrics.runtimeErrors.inc({ method: 'status' });
        return record.failed(order.name, `${parsed.runtime} status before the stop: ${errorMessage(err)}; nothing was executed`);
      } finally {
        timing.runtimeCheckMs += this.deps.now() - started;
      }
    }
    if (!current || current.id !== parsed.id || current.state === 'exited') {
      // Gone or exited meanwhile: nothing to stop; the next plan records what happened.
      this.deps.log.info('container no longer running, not stopped', { pod: namespacedKey(pod.namespace, pod.name), container: order.name, containerID: order.containerID });
      return;
    }
    const refusal = ownerRefusal(pod, order.name, order.containerID, current);
    if (refusal) return record.refused(order.name, refusal);

    if (order.resumed && this.returnedStops.stoppedHere(order.containerID)) {
      // This agent's own stop returned, and the runtime still said running after the wait.
      this.deps.log.info('stopping again: the runtime still reports the container running after this agent\'s stop returned', { pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: record.name });
    } else if (order.resumed) {
      // An earlier agent recorded isKilled, sent its Killing event and ran the hook (or began to).
      this.deps.metrics.stopsResumed.inc();
      this.deps.log.info('resuming a stop an earlier agent began (no hook, no event)', { pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: record.name });
    } else {
      const first = order.stopCommand ? `, first running the stop command of ${order.stopCommand.policy}` : '';
      this.deps.events.emit(ref, { type: 'Normal', reason: EVENT_REASONS.killing, message: `Stopping container ${order.name} (request ${record.name})${first}` });
      if (order.preStopNotRun) {
        this.deps.events.emit(ref, { type: 'Warning', reason: EVENT_REASONS.preStopHookNotRun, message: `PreStop hook of container ${order.name} not run: ${order.preStopNotRun}; the container is stopped` });
      }
    }
    const { graceSeconds } = order; // bounded by the planner (graceSecondsOf)
    // The command, the hook and the signal share the grace period, as kubelet's hook and signal do.
    const graceLeftMs = () => Math.max(0, graceSeconds * 1000 - (this.deps.now() - started));
    let prestopDoneAtMs: number | undefined;
    if (order.stopCommand && !order.resumed) {
      const { command, policy } = order.stopCommand;
      const failure = await runPreStop({ exec: { command: [...command] } }, { runtime, containerID: parsed.id }, graceLeftMs());
      prestopDoneAtMs = this.deps.now();
      if (failure) {
        this.deps.events.emit(ref, { type: 'Warning', reason: EVENT_REASONS.failedStopCommand, message: `Stop command of container ${order.name} (${policy}) failed: ${failure}; the stop goes on` });
      }
    }
    if (order.preStop && !order.resumed) {
      const failure = await runPreStop(order.preStop, { runtime, containerID: parsed.id, podIP: pod.podIP, ports: order.ports }, graceLeftMs());
      prestopDoneAtMs = this.deps.now();
      if (failure) {
        this.deps.events.emit(ref, { type: 'Warning', reason: EVENT_REASONS.failedPreStopHook, message: `PreStop hook of container ${order.name} failed: ${failure}` });
      }
    }
    try {
      let stopSentAtMs = 0;
      await this.podStops.run(pod.uid, () => {
        stopSentAtMs = this.deps.now();
        const remaining = Math.max(MIN_STOP_SECONDS, Math.ceil(graceSeconds - (stopSentAtMs - started) / 1000));
        return runtime.stop(parsed.id, remaining, order.stopSignal);
      });
      this.returnedStops.returned(order.containerID);
      this.deps.metrics.containerStops.inc({ result: 'stopped' });
      const exitedAtMs = this.deps.now();
      // A resumed or repeated stop is not timed: the steps are the first stop's (R44).
      const known = order.resumed ? undefined : record.known();
      const timeline = known && stopTimeline({ knownAtMs: known.atMs, createdOnExit: known.createdOnExit, stoppedOnExit: known.stoppedOnExit, ...timing, prestopDoneAtMs, stopSentAtMs, exitedAtMs });
      if (known) this.deps.metrics.stopSeconds.observe((exitedAtMs - known.atMs) / 1000);
      if (timeline) observeStopSteps(this.deps.metrics, timeline);
      this.deps.log.info('container stopped', {
        pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: record.name, resumed: order.resumed, ms: exitedAtMs - started, ...(timeline ? { timeline } : {}),
      });
    } catch (err) {
      if (this.failedStopExited(order.containerID)) {
        this.deps.log.info('container stopped: the runtime reported its exit, though the stop call failed', {
          pod: namespacedKey(pod.namespace, pod.name), container: order.name, request: record.name, error: errorMessage(err),
        });
        return;
      }
      await record.failed(order.name, `stop: ${errorMessage(err)}`);
    }
  }

  /**
   * After a stop call failed: counted, waited on like one that returned (R40), and whether the
   * runtime reported the process exited anyway. Under a burst the call's deadline passes in
   * containerd's backlog of exits: the stop did its work, and the status follows.
   */
  private failedStopExited(containerID: string): boolean {
    this.returnedStops.returned(containerID);
    this.deps.metrics.runtimeErrors.inc({ method: 'stop' });
    const exited = this.returnedStops.exitReported(containerID);
    this.deps.metrics.containerStops.inc({ result: exited ? 'stopped' : 'failed' });
    return exited;
  }
}
