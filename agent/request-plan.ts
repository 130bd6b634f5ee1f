// Pure decisions of the node agent: given a request, its Pod and what the runtime says about each
// target container, what the request's status should be and which containers to stop now.
// Everything here is computed from current state only, so a restarted agent decides the same.
//
// A request's creator may hold nothing but `create` on requests in one namespace, and anything they
// write is hostile. So only the container names come from the request: the container ID acted on is
// the one the Pod status (as the API server shows it) reports for that name, the hook and its ports
// come from the Pod spec, and the runtime's kubelet labels of that container must name the very Pod
// and container before anything is executed or stopped. `statusContext` only pins the attempt.
import { isDeepStrictEqual } from 'node:util';
import type { PodEvent } from '../common/events.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRContainer, CRRStatus } from '../api/container-recreate-request.ts';
import { completedStatus, LABEL_AFTER_PHASE, LABEL_POD_UID, MAX_STRATEGY_SECONDS } from '../api/container-recreate-request.ts';
import type { ContainerPort, Handler } from '../api/pod.ts';
import type { StopCommand } from '../rules/policy-marker.ts';
import { deadlinePassed, replacedPodUid, untilDeadlineMs } from '../rules/request-completion.ts';
import { boundedDelayMs } from '../rules/decision.ts';
import { restartAfterExit } from '../rules/main-done.ts';
import type { AgentContainerStatus, AgentPod } from './pod.ts';
import { parseContainerID } from '../api/container-id.ts';
import { KUBELET_LABELS } from './runtime/owner.ts';
import type { RuntimeContainer } from './runtime/types.ts';

/** What the runtime said about the container the Pod status reports for a request's target. */
export interface RuntimeView {
  /** The `<runtime>://<id>` the runtime was asked about: a view of any other ID is not used. */
  containerID?: string;
  container?: RuntimeContainer;
  /** The runtime could not be asked (down, unknown prefix): the container's state is unknown. */
  error?: string;
  /** This agent's stop of this very container is under way: its outcome is known once the stop returns. */
  stopping?: true;
  /**
   * This agent's stop of this very container returned, yet the runtime still says running (its
   * status may lag the stop: agent/returned-stops.ts): look again in this many ms, not stop again now.
   */
  recheckInMs?: number;
  /** This process's stop of this very container returned: an exit found since is recorded as its kill (R55). */
  stoppedHere?: true;
}

export interface StopOrder {
  name: string;
  /** `<runtime>://<id>` of the container to stop: always the one the Pod status reports. */
  containerID: string;
  /** Capped at MAX_STRATEGY_SECONDS. */
  graceSeconds: number;
  /**
   * From the Pod spec only; set only when the agent runs it: never on a resumed stop, nor for a
   * container whose hook an earlier request already started (`preStopsStarted`).
   */
  preStop?: Handler;
  /** The Pod spec's hook that is not run, and why (RequestInputs.httpHooks, `hookRefusal`): reported on the Pod. */
  preStopNotRun?: string;
  /**
   * A cluster policy's command (R54), run before the hook; set, as the hook is, only when the agent
   * runs it, and recorded the same way (`preStopContainerID`): at most once per container.
   */
  stopCommand?: StopCommand;
  /** From the Pod spec only (named ports of an httpGet hook). */
  ports?: ContainerPort[];
  /** The Pod spec's `lifecycle.stopSignal`: the Docker Engine is told it; a CRI runtime was given it at creation. */
  stopSignal?: string;
  /**
   * isKilled was already recorded and the container still runs: an earlier agent began this stop
   * and died. It is finished without running the hook again and without a second Killing event.
   */
  resumed: boolean;
}

export type RefusalReason =
  | 'pod-uid-mismatch'
  | 'other-node'
  | 'runtime-owner-missing'
  | 'runtime-owner-mismatch';

/** The request does not match its Pod: it is completed at once and nothing is executed. */
export interface Refusal {
  reason: RefusalReason;
  /** `refused: <what>; nothing was executed` */
  message: string;
}

export interface RequestPlan {
  status: CRRStatus;
  stops: StopOrder[];
  /** Look again after this long even if nothing changes (a timer, not a retry); at most MAX_REQUEUE_MS. */
  requeueAfterMs?: number;
  /** Set when the request was refused (status Completed, no stops). */
  refusal?: Refusal;
  /** Events for the Pod, to record once the status was written. */
  events: PodEvent[];
}

export interface RequestInputs {
  crr: ContainerRecreateRequest;
  pod: AgentPod;
  nodeName: string;
  /** Name of an older unfinished request that holds one of this one's containers (`blockingRequest`): this one waits behind it. */
  queuedBehind?: string;
  /** By container name: the runtime's view of the container ID the Pod status reports for it. */
  runtime: ReadonlyMap<string, RuntimeView>;
  nowMs: number;
  /**
   * The API server's time (common/kube/server-clock.ts), for the deadline, which counts from the
   * creationTimestamp it stamped; default nowMs. A node clock ahead must not end requests early.
   */
  apiNowMs?: number;
  /** false: httpGet hooks are not run (agent flag --prestop-http-hooks); default true. */
  httpHooks?: boolean;
  /**
   * `<runtime>://<id>` of the containers whose hook another request of the Pod already started (its
   * status's `preStopContainerID`): a hook runs at most once per container, whichever request asks.
   */
  preStopsStarted?: ReadonlySet<string>;
  /** By container name: what the cluster policies in effect run in it before its stop (rules/policies.ts stopCommandsOf). */
  stopCommands?: ReadonlyMap<string, StopCommand>;
}

type ContainerStep =
  | { kind: 'keep'; state: ContainerRecreateState; requeueAfterMs?: number }
  | { kind: 'stop'; state: ContainerRecreateState; containerID: string; resumed: boolean };

const FINAL = new Set(['Succeeded', 'Failed']);

export function isFinal(state: ContainerRecreateState | undefined): boolean {
  return state !== undefined && FINAL.has(state.phase);
}

/** Succeeded and Failed Pods are done: kubelet restarts none of their containers. */
export function isTerminal(phase: AgentPod['phase']): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

/**
 * Whether kubelet starts this container again after it exited with `exitCode` (R7's
 * restartAfterExit: its own rules and policy, else the Pod's); never in a terminal Pod. An unknown
 * exit code counts as a failure.
 */
export function kubeletRestarts(pod: Pick<AgentPod, 'restartPolicy' | 'phase' | 'containers'>, name: string, exitCode: number | undefined): boolean {
  if (isTerminal(pod.phase)) return false;
  return restartAfterExit(pod.containers.find((c) => c.name === name), pod.restartPolicy, exitCode ?? -1) !== 'none';
}

/** The grace period handed to the runtime: the strategy's, else the Pod's, within 0..MAX_STRATEGY_SECONDS. */
export function graceSecondsOf(strategySeconds: number | undefined, podSeconds: number): number {
  const seconds = strategySeconds ?? podSeconds;
  if (!Number.isFinite(seconds)) return MAX_STRATEGY_SECONDS;
  return Math.min(MAX_STRATEGY_SECONDS, Math.max(0, Math.floor(seconds)));
}

const refusedMessage = (what: string) => `refused: ${what}; nothing was executed`;

/**
 * Whether the runtime container is the Pod's container `name` by kubelet's labels; a Refusal when it
 * has none (not created by kubelet) or they name another Pod, namespace or container.
 */
export function ownerRefusal(pod: AgentPod, name: string, containerID: string, container: RuntimeContainer): Refusal | undefined {
  const requested = `the request named Pod ${pod.namespace}/${pod.name} (uid ${pod.uid}) container ${name}`;
  const which = `container ${containerID}, which the Pod status reports for container ${name},`;
  const owner = container.owner;
  if (!owner) {
    const labels = Object.values(KUBELET_LABELS).join(', ');
    return { reason: 'runtime-owner-missing', message: refusedMessage(`${which} has no kubelet labels (${labels}), so it was not created by kubelet for any Pod; ${requested}`) };
  }
  if (owner.podUid !== pod.uid || owner.podNamespace !== pod.namespace || owner.podName !== pod.name || owner.container !== name) {
    const labelled = `Pod ${owner.podNamespace}/${owner.podName} (uid ${owner.podUid}) container ${owner.container}`;
    return { reason: 'runtime-owner-mismatch', message: refusedMessage(`${which} belongs to ${labelled} by its kubelet labels, but ${requested}`) };
  }
  return undefined;
}

export function planRequest(input: RequestInputs): RequestPlan {
  const { crr, pod, nowMs } = input;
  const recorded = new Map((crr.status?.containerRecreateStates ?? []).map((s) => [s.name, s]));

  const refusal = refuse(input) ?? runtimeOwnerRefusal(input, recorded);
  if (refusal) return refused(input, recorded, refusal);
  const ending = ended(input);
  if (ending) return complete(crr, recorded, ending, nowMs);
  // Look again just after the deadline, so that a request left waiting ends on time.
  const remaining = untilDeadlineMs(crr, input.apiNowMs ?? nowMs);
  const untilDeadline = remaining === undefined ? undefined : remaining + 1;

  if (input.queuedBehind) {
    const states = crr.spec.containers.map((c) => recorded.get(c.name) ?? pending(c.name));
    return {
      status: { phase: 'Pending', message: `waiting for ${input.queuedBehind}, which holds a container of this request`, containerRecreateStates: states },
      stops: [],
      requeueAfterMs: boundedDelayMs(untilDeadline),
      events: [],
    };
  }

  const strategy = crr.spec.strategy ?? {};
  const graceSeconds = graceSecondsOf(strategy.terminationGracePeriodSeconds, pod.terminationGracePeriodSeconds);
  // Stops not yet begun wait: for the Pod to be marked not ready, or for its phase.
  const held = unreadyWait(input) ?? phaseWait(input);
  const failFast = (strategy.failurePolicy ?? 'Fail') === 'Fail';

  const states: ContainerRecreateState[] = [];
  const stops: StopOrder[] = [];
  let requeueAfterMs: number | undefined;
  let blocked = false; // orderedRecreate: a container not yet Succeeded holds back the rest

  for (const container of crr.spec.containers) {
    const previous = recorded.get(container.name);
    if (blocked && !isFinal(previous)) {
      states.push(previous ?? pending(container.name));
      continue;
    }
    const step = stepContainer(container, previous, input);
    if (step.kind === 'stop' && held !== undefined && !step.resumed) {
      states.push({ ...(previous ?? pending(container.name)), message: held.message });
      requeueAfterMs = minDefined(requeueAfterMs, held.afterMs);
    } else if (step.kind === 'stop') {
      const order = stopOrder(input, container.name, step, graceSeconds);
      // Recorded with isKilled, before the hook starts: no later request runs it again.
      states.push(runsInContainer(order) ? { ...step.state, preStopContainerID: order.containerID } : step.state);
      stops.push(order);
    } else {
      states.push(step.state);
      requeueAfterMs = minDefined(requeueAfterMs, step.requeueAfterMs);
    }
    // The hook's record stays for as long as the request does, whatever the container does since.
    if (previous?.preStopContainerID && !states[states.length - 1]!.preStopContainerID) {
      states[states.length - 1] = { ...states[states.length - 1]!, preStopContainerID: previous.preStopContainerID };
    }
    const last = states[states.length - 1]!;
    if (strategy.orderedRecreate && last.phase !== 'Succeeded' && last.phase !== 'Failed') blocked = true;
  }

  const failed = states.filter((s) => s.phase === 'Failed');
  if ((failFast && failed.length > 0) || states.every(isFinal)) {
    // With failurePolicy Fail, nothing more is stopped once a container failed.
    return { status: finishedStatus(states, failed, nowMs), stops: failFast && failed.length > 0 ? [] : stops, events: [] };
  }
  return {
    status: { phase: 'Recreating', containerRecreateStates: states },
    stops,
    requeueAfterMs: boundedDelayMs(minDefined(requeueAfterMs, untilDeadline)),
    events: [],
  };
}

/**
 * The older unfinished request (of `older`, oldest first) that `crr` waits behind, or undefined: one
 * that holds a container `crr` names. A request holds a container until it is done with it, and
 * stops holding it once the container it was about is gone (recreated: another ID or a higher
 * restart count than its statusContext), unless it still has to stop the new one (forceRecreate,
 * not yet killed). So a request that only waits for a recreated container to prove itself
 * (minStartedSeconds) holds nothing, and one for other containers never holds this one up. An
 * ordered one (orderedRecreate) holds no container it has not reached: one stuck on an earlier
 * container (never recreated, never ready) would otherwise hold the rest until its deadline.
 */
export function blockingRequest(crr: ContainerRecreateRequest, older: readonly ContainerRecreateRequest[], pod: AgentPod): string | undefined {
  const wanted = new Set(crr.spec.containers.map((c) => c.name));
  return older.find((o) => o.spec.containers.some((c) => wanted.has(c.name) && holds(o, c, pod)))?.metadata.name;
}

function holds(request: ContainerRecreateRequest, container: CRRContainer, pod: AgentPod): boolean {
  const states = request.status?.containerRecreateStates ?? [];
  const state = states.find((s) => s.name === container.name);
  if (isFinal(state)) return false;
  if (request.spec.strategy?.orderedRecreate && !state?.isKilled) {
    const earlier = request.spec.containers.slice(0, request.spec.containers.findIndex((c) => c.name === container.name));
    if (!earlier.every((c) => isFinal(states.find((s) => s.name === c.name)))) return false;
  }
  const context = container.statusContext;
  // Not pinned yet: it acts on nothing until the controller pins it (and this is decided again).
  if (!context) return false;
  const status = pod.statuses.find((s) => s.name === container.name);
  if (!status || !wasRecreated(status, context)) return true;
  return (request.spec.strategy?.forceRecreate ?? false) && !(state?.isKilled ?? false);
}

/** The stop runs something inside the container first (a hook, a policy's command): at most once, so recorded before. */
export function runsInContainer(order: StopOrder): boolean {
  return order.preStop !== undefined || order.stopCommand !== undefined;
}

/**
 * The hook, ports and stop signal come from the Pod spec, never from the request, and the command
 * from a cluster policy. A resumed stop runs neither, nor does a container whose hook (or command)
 * another request already started.
 */
function stopOrder(input: RequestInputs, name: string, step: { containerID: string; resumed: boolean }, graceSeconds: number): StopOrder {
  const order: StopOrder = { name, containerID: step.containerID, graceSeconds, resumed: step.resumed };
  const spec = input.pod.containers.find((c) => c.name === name);
  if (spec?.stopSignal) order.stopSignal = spec.stopSignal;
  if (step.resumed || input.preStopsStarted?.has(step.containerID)) return order;
  const stopCommand = input.stopCommands?.get(name);
  if (stopCommand) order.stopCommand = stopCommand;
  if (!spec?.preStop) return order;
  const refusal = hookRefusal(spec.preStop, input.httpHooks ?? true);
  if (refusal) {
    order.preStopNotRun = refusal;
    return order;
  }
  order.preStop = spec.preStop;
  if (spec.ports) order.ports = spec.ports;
  return order;
}

const HOOK_KINDS = new Set(['exec', 'httpGet', 'sleep', 'tcpSocket']);

/**
 * Why a preStop hook is not run, or undefined: kubelet does not run `tcpSocket` as a lifecycle
 * handler (only as a probe), a kind a later release adds is unknown here, and operators may turn
 * httpGet hooks off (they are sent from the agent's network position, its own Pod's).
 */
export function hookRefusal(hook: Handler, httpHooks: boolean): string | undefined {
  const unknown = Object.keys(hook).filter((kind) => !HOOK_KINDS.has(kind));
  if (unknown.length > 0) return `the preStop hook's kind ${JSON.stringify(unknown.join(', '))} is unknown to this agent, so it was not run`;
  if (hook.tcpSocket) return 'a tcpSocket preStop hook is not run: kubelet runs tcpSocket only as a probe, never as a lifecycle hook';
  if (hook.exec) return hook.exec.command?.length ? undefined : 'the exec preStop hook has no command, so it was not run';
  if (hook.httpGet) return httpHooks ? undefined : 'HTTP preStop hooks are turned off on this node\'s agent (--prestop-http-hooks=false), so it was not run';
  if (hook.sleep) return undefined;
  return 'the preStop hook names no action, so it was not run';
}

/**
 * R45: a Pod whose phase the controller set (ignore-exit-code sidecars, R23) while containers still
 * run. Kubelet never leaves a terminal phase and stops them itself, but only at its next sync of the
 * Pod (about 85 s seen), while the scheduler already counts their resources as free. So the agent
 * stops them now, each within the Pod's grace period: from the current state alone, so a restarted
 * agent decides the same, and without a request, as repeating a stop by container ID is harmless.
 * A container with a preStop hook is left to kubelet, whose kill runs the hook: with nothing
 * recorded, a hook run here could run twice.
 */
export function leftoverContainers(pod: AgentPod): (AgentContainerStatus & { containerID: string })[] {
  if (!isTerminal(pod.phase) || !pod.phaseSetBySidecarTerminator || pod.deleting) return [];
  return pod.statuses.filter((s): s is AgentContainerStatus & { containerID: string } =>
    s.state === 'running' && s.containerID !== undefined && !hasPreStop(pod, s.name));
}

/** A hook in the spec, whether the cache kept it or not (agent/pod.ts MAX_KEPT_HOOK_BYTES). */
function hasPreStop(pod: AgentPod, name: string): boolean {
  const spec = pod.containers.find((c) => c.name === name);
  return spec?.preStop !== undefined || spec?.preStopNotKept === true;
}

/**
 * The stops of leftoverContainers the runtime confirms: the very container the Pod status reports,
 * still running, and labelled by kubelet as this Pod's (R37). No hook, no request.
 */
export function leftoverStops(pod: AgentPod, runtime: ReadonlyMap<string, RuntimeView>): StopOrder[] {
  const graceSeconds = graceSecondsOf(undefined, pod.terminationGracePeriodSeconds);
  return leftoverContainers(pod).flatMap((status): StopOrder[] => {
    const view = runtime.get(status.name);
    const current = view?.containerID === status.containerID ? view.container : undefined;
    if (current?.state !== 'running' || current.id !== parseContainerID(status.containerID)?.id) return [];
    if (view?.recheckInMs !== undefined) return [];
    if (ownerRefusal(pod, status.name, status.containerID, current)) return [];
    const stopSignal = pod.containers.find((c) => c.name === status.name)?.stopSignal;
    return [{ name: status.name, containerID: status.containerID, graceSeconds, resumed: false, ...(stopSignal ? { stopSignal } : {}) }];
  });
}

/**
 * A request without a pod-uid label is not admitted yet: the controller labels it from its Pod or
 * refuses it (R35). The agent leaves it alone until then, so that whether a request created with our
 * node and active labels runs never depends on which of the two sees it first.
 */
export function awaitsAdmission(crr: ContainerRecreateRequest): boolean {
  return !crr.metadata.labels?.[LABEL_POD_UID];
}

/** A reason the admitted request does not match its Pod (uid, node), or undefined. */
function refuse({ crr, pod, nodeName }: RequestInputs): Refusal | undefined {
  const request = `request ${crr.metadata.namespace}/${crr.metadata.name}`;
  const podRef = `Pod ${pod.namespace}/${pod.name}`;
  const replaced = replacedPodUid(crr, pod.uid);
  if (replaced !== undefined) {
    return { reason: 'pod-uid-mismatch', message: refusedMessage(`${request} is for Pod uid ${replaced}, but ${podRef} has uid ${pod.uid} (${pod.name} was replaced)`) };
  }
  if (pod.nodeName !== nodeName) {
    return { reason: 'other-node', message: refusedMessage(`${podRef} runs on node ${pod.nodeName || '(none)'}, not ${nodeName}`) };
  }
  return undefined;
}

/**
 * Checked before any container is stepped, so that no stop of one container is planned next to a
 * container whose runtime labels name another Pod (a forged Pod status).
 */
function runtimeOwnerRefusal(input: RequestInputs, recorded: Map<string, ContainerRecreateState>): (Refusal & { container: string }) | undefined {
  for (const c of input.crr.spec.containers) {
    if (isFinal(recorded.get(c.name))) continue;
    const status = input.pod.statuses.find((s) => s.name === c.name);
    const current = status?.containerID && viewOf(input, c.name, status.containerID).container;
    if (!current) continue;
    const refusal = ownerRefusal(input.pod, c.name, status.containerID!, current);
    if (refusal) return { ...refusal, container: c.name };
  }
  return undefined;
}

/** The request ends without a refusal: the Pod is going away, or the deadline passed. */
function ended({ crr, pod, nowMs, apiNowMs }: RequestInputs): string | undefined {
  if (pod.deleting) return `Pod ${pod.name} is being deleted`;
  return deadlinePassed(crr, apiNowMs ?? nowMs);
}

/** The runtime's view of exactly `containerID`, or an empty view. */
function viewOf(input: RequestInputs, name: string, containerID: string): RuntimeView {
  const view = input.runtime.get(name);
  if (!view || view.containerID !== containerID) return {};
  const bare = parseContainerID(containerID)?.id;
  if (view.container && view.container.id !== bare) return { containerID };
  return view;
}

function stepContainer(container: CRRContainer, previous: ContainerRecreateState | undefined, input: RequestInputs): ContainerStep {
  const { pod, crr, nowMs } = input;
  const name = container.name;
  const keep = (state: ContainerRecreateState, requeueAfterMs?: number): ContainerStep => ({ kind: 'keep', state, requeueAfterMs });
  if (previous && isFinal(previous)) return keep(previous);

  const isKilled = previous?.isKilled ?? false;
  const context = container.statusContext;
  if (!context) return keep({ name, phase: 'Pending', isKilled, message: 'waiting for statusContext to be filled on admission' });
  if (!parseContainerID(context.containerID)) {
    return keep({ name, phase: 'Failed', isKilled, message: `malformed containerID ${JSON.stringify(context.containerID)}` });
  }
  if (!pod.containers.some((c) => c.name === name)) {
    return keep({ name, phase: 'Failed', isKilled, message: `Pod ${pod.name} has no container ${name}` });
  }
  const status = pod.statuses.find((s) => s.name === name);
  // The only container ID ever acted on is the Pod status's; statusContext's is the creator's.
  const currentID = status?.containerID;
  if (!status || !currentID) {
    return keep({ name, phase: 'Pending', isKilled, message: `container ${name} has not started yet (no container ID in the Pod status)` });
  }
  if (!parseContainerID(currentID)) {
    return keep({ name, phase: 'Failed', isKilled, message: `malformed containerID ${JSON.stringify(currentID)} in the Pod status` });
  }
  const view = viewOf(input, name, currentID);
  // The state its stop order recorded: nothing new to write until the stop returns.
  if (view.stopping) return keep({ name, phase: 'Recreating', isKilled: true });
  const current = view.container;
  const terminal = isTerminal(pod.phase);

  const strategy = crr.spec.strategy ?? {};
  if (wasRecreated(status, context)) {
    if (strategy.forceRecreate && !isKilled) {
      if (current?.state === 'running') {
        return { kind: 'stop', containerID: currentID, resumed: false, state: { name, phase: 'Recreating', isKilled: true } };
      }
      if (terminal && status.state === 'terminated') return keep({ name, phase: 'Succeeded', isKilled, exitCode: status.exitCode });
      const why = view.error ? `runtime: ${view.error}` : 'waiting for the recreated container to start before stopping it';
      return keep({ name, phase: 'Recreating', isKilled, message: why });
    }
    // In a finished Pod, kubelet starts no container again: an exited one is done.
    if (terminal && status.state === 'terminated') return keep({ name, phase: 'Succeeded', isKilled, exitCode: status.exitCode });
    return recreatedProgress(name, isKilled, status, strategy.minStartedSeconds ?? 0, nowMs);
  }

  if (view.error) return keep({ ...(previous ?? pending(name)), message: `runtime: ${view.error}` });
  if (!current) {
    return keep({ name, phase: 'Pending', isKilled, message: `container ${currentID} not found on node ${input.nodeName}` });
  }
  if (current.state === 'exited') {
    const state: ContainerRecreateState = { name, phase: 'Succeeded', isKilled: isKilled || view.stoppedHere === true, exitCode: current.exitCode };
    return keep(kubeletRestarts(pod, name, current.exitCode) ? { ...state, phase: 'Recreating' } : state);
  }
  if (view.recheckInMs !== undefined) return keep({ name, phase: 'Recreating', isKilled: true }, view.recheckInMs);
  // Still the same container, still running: stop it. If an earlier agent died mid-stop (isKilled
  // already recorded), the stop is resumed, without its hook: a container left running would hang the Job.
  return { kind: 'stop', containerID: currentID, resumed: isKilled, state: { name, phase: 'Recreating', isKilled: true } };
}

/**
 * Whether writing `planned` over `recorded` changes nothing: compared as data, whatever the order of
 * keys (the API server sends a custom resource's keys sorted, a plan builds them in its own order),
 * and without completionTime, which every plan sets anew.
 */
export function sameStatus(recorded: CRRStatus | undefined, planned: CRRStatus): boolean {
  const data = (s: CRRStatus | undefined): unknown => JSON.parse(JSON.stringify({ ...s, completionTime: undefined }));
  return isDeepStrictEqual(data(recorded), data(planned));
}

function wasRecreated(status: AgentContainerStatus, context: { containerID: string; restartCount: number }): boolean {
  const idChanged = status.containerID !== undefined && status.containerID !== context.containerID;
  return idChanged || status.restartCount > context.restartCount;
}

/** A recreated container counts once it is running, ready and older than minStartedSeconds. */
function recreatedProgress(name: string, isKilled: boolean, status: AgentContainerStatus, minStartedSeconds: number, nowMs: number): ContainerStep {
  if (status.state !== 'running' || !status.ready || status.startedAtMs === undefined) {
    return { kind: 'keep', state: { name, phase: 'Recreating', isKilled } };
  }
  const runningMs = nowMs - status.startedAtMs;
  const neededMs = Math.min(minStartedSeconds, MAX_STRATEGY_SECONDS) * 1000;
  if (runningMs <= neededMs) {
    return { kind: 'keep', state: { name, phase: 'Recreating', isKilled }, requeueAfterMs: neededMs - runningMs + 1 };
  }
  return { kind: 'keep', state: { name, phase: 'Succeeded', isKilled } };
}

/** With unreadyGracePeriodSeconds, stops wait until the Pod has been not-ready that long. */
/** How often a request waiting for its Pod's phase looks again, besides each Pod update. */
const PHASE_WAIT_RECHECK_MS = 5_000;

/**
 * How long after the controller set the phase kubelet is given to see it, before the Pod's last
 * containers may exit: kubelet keeps a terminal phase it has seen, but writes its own over one it
 * had not seen when the last exit came (its watch lags ours under load: tried, the Pod ended Failed).
 */
export const KUBELET_SEES_PHASE_MS = 2_000;

/**
 * A request labelled after-phase (R23): its containers' exit codes must not reach kubelet before the
 * Pod's phase, which the controller sets once the request exists. No stop begins (not even its stop
 * command, which may end the container) until the Pod shows a terminal phase, and the phase we set
 * is KUBELET_SEES_PHASE_MS old (by the API server's clock; its time has whole seconds).
 */
function phaseWait({ crr, pod, nowMs, apiNowMs }: RequestInputs): { message: string; afterMs: number } | undefined {
  if (crr.metadata.labels?.[LABEL_AFTER_PHASE] !== 'true') return undefined;
  if (!isTerminal(pod.phase)) return { message: 'waiting for the Pod\'s phase, which the controller sets before these containers may exit', afterMs: PHASE_WAIT_RECHECK_MS };
  if (!pod.phaseSetBySidecarTerminator || pod.phaseSetAtMs === undefined) return undefined;
  const left = pod.phaseSetAtMs + KUBELET_SEES_PHASE_MS - (apiNowMs ?? nowMs);
  return left > 0 ? { message: 'the Pod\'s phase is set; giving kubelet a moment to see it', afterMs: left } : undefined;
}

function unreadyWait({ crr, pod, nowMs }: RequestInputs): { message: string; afterMs: number | undefined } | undefined {
  const seconds = crr.spec.strategy?.unreadyGracePeriodSeconds;
  if (!seconds) return undefined;
  if (pod.readiness?.status !== 'False') {
    return { message: 'waiting for the Pod to be marked not-ready', afterMs: undefined };
  }
  const remaining = pod.readiness.sinceMs + Math.min(seconds, MAX_STRATEGY_SECONDS) * 1000 - nowMs;
  if (remaining <= 0) return undefined;
  return { message: `waiting ${Math.ceil(remaining / 1000)}s of unreadyGracePeriodSeconds`, afterMs: remaining };
}

/** Completed at once, nothing stopped; the container the runtime labels were wrong for is Failed. */
function refused(input: RequestInputs, recorded: Map<string, ContainerRecreateState>, refusal: Refusal & { container?: string }): RequestPlan {
  const { crr, nowMs } = input;
  const { container, ...bare } = refusal;
  const states = crr.spec.containers.map((c): ContainerRecreateState => {
    const state = recorded.get(c.name) ?? pending(c.name);
    return c.name === container ? { ...state, phase: 'Failed', message: refusal.message } : state;
  });
  const status = completedStatus(nowMs, { message: refusal.message, containerRecreateStates: states });
  const event: PodEvent = { type: 'Warning', reason: EVENT_REASONS.requestRefused, message: `Request ${crr.metadata.name} ${refusal.message}` };
  return { status, stops: [], refusal: bare, events: [event] };
}

function complete(crr: ContainerRecreateRequest, recorded: Map<string, ContainerRecreateState>, message: string, nowMs: number): RequestPlan {
  const states = crr.spec.containers.map((c) => recorded.get(c.name) ?? pending(c.name));
  return { status: completedStatus(nowMs, { message, containerRecreateStates: states }), stops: [], events: [] };
}

function finishedStatus(states: ContainerRecreateState[], failed: ContainerRecreateState[], nowMs: number): CRRStatus {
  const message = failed.map((s) => `${s.name}: ${s.message ?? 'failed'}`).join('; ');
  return completedStatus(nowMs, { containerRecreateStates: states, ...(message ? { message } : {}) });
}

function pending(name: string): ContainerRecreateState {
  return { name, phase: 'Pending', isKilled: false };
}

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}
