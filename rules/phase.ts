// The only way a decision can set the Pod's phase, and the invariant that guards it:
// never Succeeded unless every main container's current state is terminated with exit code 0.
import { classify } from './classify.ts';
import { CONDITION_SIDECAR_TERMINATED } from '../api/names.ts';
import type { DecisionEvent } from './events.ts';
import type { PatchPhase, PhasePatchCause, TerminalPhase } from './decision.ts';
import type { PodProjection } from './projection.ts';

/**
 * True when every main container's current state is terminated with exit code 0. Mains are
 * recomputed here from the Pod, so no caller can widen the check by passing a wrong list.
 */
export function allMainsSucceeded(pod: PodProjection): boolean {
  return classify(pod).mains.every((name) => {
    const statuses = pod.statuses.filter((s) => s.name === name);
    // Every entry, not just the first: a duplicated status must not hide a running or failed main.
    return statuses.length > 0 && statuses.every((s) => s.state.kind === 'terminated' && s.state.exitCode === 0);
  });
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

/** The only constructor of a patchPhase decision. */
export function phasePatch(pod: PodProjection, request: PhasePatchRequest): PatchPhase {
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
