// What the agent decides when a container of a Pod on its node exits in the runtime. It overlays the
// runtime's view on the Pod's last reported status and applies the controller's own rules
// (rules/decide.ts) to it: when they ask for a first request, the agent creates it, seconds
// before kubelet has relisted, updated the Pod status, and the controller has seen it. Everything
// else (retries, phase patches, image swaps, warnings) stays with the controller, which also creates
// the same request (same name) itself should the agent miss the exit.
import { classify } from '../../rules/classify.ts';
import { decide } from '../../rules/decide.ts';
import { exitSettlesRestart } from '../../rules/main-done.ts';
import type { CreateRequest } from '../../rules/decision.ts';
import type { ContainerStateProjection, ContainerStatusProjection, PodProjection } from '../../rules/projection.ts';
import type { ExistingRequest, SidecarTerminatorOptions } from '../../rules/requests.ts';
import { isOwnRequest } from '../../rules/requests.ts';
import type { RuntimeContainerID } from '../../api/container-id.ts';
import { containerIDOf, parseContainerID } from '../../api/container-id.ts';
import type { PodContainer } from '../runtime/types.ts';

/** The Pod as the runtime sees it, and the mains whose exit only kubelet's report can settle. */
export interface RuntimePodView {
  pod: PodProjection;
  /** Mains the runtime shows exited but kubelet may start again whatever their code (R7): its report decides. */
  awaitingKubelet: string[];
}

/**
 * The Pod as the runtime sees it now: each container's status comes from its latest attempt in the
 * runtime (kubelet's attempt number is the status's restartCount); containers the runtime does not
 * have keep their reported status. A Pending Pod whose containers have all started is running.
 * A main's exit that its code alone cannot settle (a probe kill kubelet restarts, a Pod that may
 * start over) is not laid over the report: kubelet's report of that very exit stands, or, until
 * kubelet has reported it, the main counts as not done.
 */
export function runtimePodView(pod: PodProjection, containers: readonly PodContainer[], runtimePrefix: string): RuntimePodView {
  const mains = new Set(classify(pod).mains);
  const awaitingKubelet: string[] = [];
  const statuses = pod.containers.flatMap((spec): ContainerStatusProjection[] => {
    const reported = pod.statuses.find((s) => s.name === spec.name);
    const latest = latestAttempt(containers, spec.name);
    const state = latest && runtimeState(latest);
    if (!latest || !state) return reported ? [reported] : [];
    const containerID = containerIDOf(runtimePrefix, latest.id);
    if (state.kind === 'terminated' && mains.has(spec.name) && !exitSettlesRestart(pod, spec.name)) {
      if (reported?.containerID === containerID && reported.state.kind === 'terminated') return [reported];
      awaitingKubelet.push(spec.name);
      return [{ name: spec.name, containerID, restartCount: latest.attempt, state: { kind: 'waiting', reason: AWAITING_KUBELET } }];
    }
    return [{ name: spec.name, containerID, restartCount: latest.attempt, state }];
  });
  const started = pod.containers.every((spec) => {
    const state = latestAttempt(containers, spec.name)?.state;
    return state === 'running' || state === 'exited';
  });
  const phase = pod.phase === 'Pending' && started ? 'Running' : pod.phase;
  return { pod: { ...pod, phase, statuses }, awaitingKubelet };
}

/** The state a main's withheld exit is given in the view: not done, until kubelet reports it. */
const AWAITING_KUBELET = 'AwaitingKubeletReport';

/**
 * The Pod's containers as kubelet last reported them, with the exits the runtime announced since
 * (by container ID): enough to decide without asking the runtime when kubelet has reported a
 * container ID for every container and every announced exit is of one of those. Otherwise undefined,
 * and the runtime's own listing decides.
 */
export function reportedContainers(pod: PodProjection, runtimePrefix: string, exits: ReadonlyMap<RuntimeContainerID, number>): PodContainer[] | undefined {
  const containers: PodContainer[] = [];
  for (const spec of pod.containers) {
    const status = pod.statuses.find((s) => s.name === spec.name);
    const reported = status?.containerID === undefined ? undefined : parseContainerID(status.containerID);
    if (!status || reported?.runtime !== runtimePrefix) return undefined;
    const { id } = reported;
    const exitCode = exits.get(id) ?? (status.state.kind === 'terminated' ? status.state.exitCode : undefined);
    const state = exitCode !== undefined ? 'exited' : status.state.kind === 'running' ? 'running' : 'unknown';
    containers.push({ id, name: spec.name, attempt: status.restartCount, state, ...(exitCode === undefined ? {} : { exitCode }) });
  }
  for (const id of exits.keys()) if (!containers.some((c) => c.id === id)) return undefined;
  return containers;
}

function latestAttempt(containers: readonly PodContainer[], name: string): PodContainer | undefined {
  return containers.reduce<PodContainer | undefined>(
    (latest, c) => (c.name === name && (!latest || c.attempt > latest.attempt) ? c : latest),
    undefined,
  );
}

/** undefined when the runtime's view says less than the reported status (an exit without its code). */
function runtimeState(c: PodContainer): ContainerStateProjection | undefined {
  switch (c.state) {
    case 'running':
      return { kind: 'running' };
    case 'exited':
      return c.exitCode === undefined ? undefined : { kind: 'terminated', exitCode: c.exitCode };
    case 'created':
      return { kind: 'waiting' };
    default:
      return undefined;
  }
}

export interface MainExitInput {
  pod: PodProjection;
  containers: readonly PodContainer[];
  runtimePrefix: string;
  /**
   * The active requests of the Pod that the agent watches, and those found holding a name the
   * agent tried (a 409 on its create): a name held by a request not ours is skipped.
   */
  requests: readonly ExistingRequest[];
  nowMs: number;
  options: SidecarTerminatorOptions;
  /** The agent's policy watches are current (PolicyStore.isCurrent). */
  policiesCurrent: boolean;
}

export interface MainExitOutcome {
  /**
   * The first request for the Pod's sidecars (no retry: those are the controller's), when the
   * runtime shows its mains done. Its name is the first of ours no request holds.
   */
  request?: CreateRequest;
  /** Mains whose exit waits for kubelet's report: the Pod is looked at again when its status changes. */
  awaitingKubelet: string[];
  /**
   * A policy marks (or audits) a container of the Pod, as the agent last saw the policies, and their
   * watch is not current: no request, the controller's path decides (a switch to Audit, a policy
   * deleted, may not have reached the agent).
   */
  policiesNotCurrent?: true;
}

export function requestOnMainExit(input: MainExitInput): MainExitOutcome {
  const view = runtimePodView(input.pod, input.containers, input.runtimePrefix);
  if (!input.policiesCurrent && view.pod.containers.some((c) => c.policy || c.auditPolicy)) {
    return { awaitingKubelet: view.awaitingKubelet, policiesNotCurrent: true };
  }
  const decision = decide(view.pod, 'real', { requests: input.requests, nowMs: input.nowMs, options: input.options });
  const first =
    decision.kind === 'createRequest' && decision.retryOf === undefined && decision.delayMs === 0 && !decision.phaseFollows &&
    !input.requests.some((r) => isOwnRequest(r, input.pod));
  return { ...(first ? { request: decision } : {}), awaitingKubelet: view.awaitingKubelet };
}
