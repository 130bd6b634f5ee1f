// The only way a decision can set the Pod's phase, and the invariant that guards it: no phase while
// a main container will run again, and never Succeeded unless every main is done (R7) with exit code 0.
import { classify } from './classify.ts';
import { CONDITION_SIDECAR_TERMINATED } from '../api/names.ts';
import type { DecisionEvent } from './events.ts';
import type { NotHandled, PatchPhase, PhasePatchCause, TerminalPhase } from './decision.ts';
import { mainsDone, mainsSucceeded } from './main-done.ts';
import type { PodProjection } from './projection.ts';

/**
 * True when every main container is done (kubelet will not start it again) and every status entry
 * of it is terminated with exit code 0. Mains are recomputed here from the Pod, so no caller can
 * widen the check by passing a wrong list; a Pod without a main has none that succeeded.
 */
export function allMainsSucceeded(pod: PodProjection): boolean {
  return mainsSucceeded(pod, classify(pod).mains);
}

/** THE guard: the phase a patch may set. Every phase patch goes through phasePatch() below. */
export function guardedPhase(wanted: TerminalPhase, pod: PodProjection): TerminalPhase {
  return wanted === 'Succeeded' && allMainsSucceeded(pod) ? 'Succeeded' : 'Failed';
}

const CONDITION_REASONS: Record<PhasePatchCause, string> = {
  ignoreExitCode: 'IgnoredSidecarExitCode',
  restartLoop: 'SidecarRestartLoop',
  sidecarNotStarted: 'SidecarNotStarted',
  allSucceeded: 'AllContainersSucceeded',
};

export interface PhasePatchRequest {
  cause: PhasePatchCause;
  wanted: TerminalPhase;
  /** Texts built from the phase actually set, which the guard may have lowered to Failed. */
  conditionMessage: (phase: TerminalPhase) => string;
  /** None where the condition alone records it (R56: one more write per Pod would buy nothing). */
  event?: (phase: TerminalPhase) => DecisionEvent;
  nowMs: number;
  /** Warnings gathered before (classification, ...). */
  events: DecisionEvent[];
}

/** The only constructor of a patchPhase decision: none at all while a main will run again. */
export function phasePatch(pod: PodProjection, request: PhasePatchRequest): PatchPhase | NotHandled {
  if (!mainsDone(pod, classify(pod).mains)) {
    return { kind: 'notHandled', reason: 'mainsNotDone', message: 'no phase while a main container will run again', events: request.events };
  }
  const phase = guardedPhase(request.wanted, pod);
  const condition = {
    type: CONDITION_SIDECAR_TERMINATED,
    status: 'True' as const,
    reason: CONDITION_REASONS[request.cause],
    message: request.conditionMessage(phase),
    lastTransitionTime: new Date(request.nowMs).toISOString(),
  };
  return {
    kind: 'patchPhase',
    cause: request.cause,
    phase,
    condition,
    statusPatch: { status: { phase, conditions: [condition] } },
    events: [...request.events, ...(request.event ? [request.event(phase)] : [])],
    message: `set phase ${phase} (${request.cause})`,
  };
}

/**
 * R56: the phase kubelet has settled and not yet written. Kubelet reports every container
 * terminated as soon as it sees the last exit, but writes the terminal phase only once it has torn
 * the Pod's sandbox down, a second or more later, and the Job waits for that write. From kubelet's
 * own report (never the runtime's or a request's: kubelet could still send a status computed before
 * an exit it had not seen, and write over ours), when every container and init container is done
 * and exited 0, its getPhase gives `Succeeded` on every supported release, and once the API shows a
 * terminal phase kubelet keeps it. Left to kubelet: `Failed` (only kubelet's own transition adds
 * the DisruptionTarget condition a Job's podFailurePolicy reads), a Pod with activeDeadlineSeconds
 * (kubelet may fail it at the deadline), a static Pod's mirror (kubelet gives it no phase), and a
 * Pod holding exclusive resources: the scheduler frees them at the terminal phase, while kubelet
 * counts them taken until it has torn the Pod down, and would refuse the next Pod they go to.
 */
export function settledSucceeded(pod: PodProjection): boolean {
  if (pod.phase !== 'Running' || pod.deleting || pod.activeDeadline || pod.mirror || pod.exclusiveResources || !pod.initContainersDone) return false;
  // Every container done (R7: a status for each, none kubelet runs again, so not under Always) and exited 0.
  return mainsSucceeded(pod, pod.containers.map((c) => c.name));
}

/** R56's patch: `Succeeded` with the condition, no event, while kubelet has settled it. */
export function settledPhasePatch(pod: PodProjection, nowMs: number, events: DecisionEvent[]): PatchPhase | undefined {
  if (!settledSucceeded(pod)) return undefined;
  const patch = phasePatch(pod, {
    cause: 'allSucceeded',
    wanted: 'Succeeded',
    conditionMessage: () => 'Every container exited 0 as kubelet reports; the phase kubelet settled is written without waiting for its own write.',
    nowMs,
    events,
  });
  return patch.kind === 'patchPhase' ? patch : undefined;
}
