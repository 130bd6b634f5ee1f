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
};

export interface PhasePatchRequest {
  cause: PhasePatchCause;
  wanted: TerminalPhase;
  /** Texts built from the phase actually set, which the guard may have lowered to Failed. */
  conditionMessage: (phase: TerminalPhase) => string;
  event: (phase: TerminalPhase) => DecisionEvent;
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
    events: [...request.events, request.event(phase)],
    message: `set phase ${phase} (${request.cause})`,
  };
}
