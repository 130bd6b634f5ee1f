// What decide() returns: one action (or none, and why) plus the events that go with it.
import { clampDelay, MAX_REQUEUE_MS } from '../common/queue.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import type { DecisionEvent } from './events.ts';
import type { UnmarkedHolder } from './unmarked-sidecars.ts';

export type TerminalPhase = 'Succeeded' | 'Failed';

/** The Pod is not one to act on, or nothing can act on it. */
export type NotHandledReason =
  | 'deleting'
  | 'restartPolicyAlways'
  | 'pending'
  | 'noSidecar'
  /** Every container is a sidecar: nothing could say when they are done (a Warning says so). */
  | 'noMain'
  /** Every sidecar's current state is terminated. */
  | 'noRunningSidecar'
  | 'statusesIncomplete'
  | 'mainsNotDone'
  /** The sidecars still running cannot be stopped on this kind of node (a Warning says why). */
  | 'noStoppableSidecar'
  /** MAX_REQUEST_ATTEMPTS of our own requests did not stop the sidecars (a Warning says so). */
  | 'attemptsExhausted'
  /** Well-known sidecars nobody marked hold the Pod open after its other mains are done (a Warning says so). */
  | 'heldByUnmarkedSidecar';

/** Handled, but the next step belongs to someone else; a later Pod or request update re-triggers. */
export type WaitReason =
  /** The phase is terminal already: kubelet stops the remaining containers itself; no request is made. */
  | 'podTerminal'
  /** One of our requests is still being carried out. */
  | 'requestActive'
  /** The running sidecars to stop show no container ID yet: handled again once they do. */
  | 'containerIds'
  /** Images already swapped: kubelet is replacing the containers. */
  | 'imageSwapInProgress'
  /** Only sidecars that never started are left: waited for up to sidecarStartTimeoutSeconds, then the phase is set. */
  | 'sidecarNotStarted'
  /** The agent saw the sidecars exit (their request says so); kubelet's report is due, a retry is not. */
  | 'statusReportPending'
  /** Every name of ours for the Pod is held by requests that are not ours (a Warning says so): looked at again later. */
  | 'namesTaken';

interface DecisionBase {
  /** Emit when the action is carried out (for notHandled/wait: right away), once per Pod and key. */
  events: DecisionEvent[];
  /** One line for logs. */
  message: string;
}

export interface NotHandled extends DecisionBase {
  kind: 'notHandled';
  reason: NotHandledReason;
  /** For `heldByUnmarkedSidecar`: the containers holding the Pod. */
  holders?: UnmarkedHolder[];
}

export interface Wait extends DecisionBase {
  kind: 'wait';
  reason: WaitReason;
  /** The request waited for, for `requestActive`. */
  requestName?: string;
  /** The sidecars waited for. */
  containers: string[];
  /** Decide again after this long: nothing else may change the Pod or its requests meanwhile. */
  requeueAfterMs?: number;
}

export interface CreateRequest extends DecisionBase {
  kind: 'createRequest';
  attempt: number;
  /** The body to create; its name is `sidecar-termination-<uid>`, `-2`, `-3`, ... by attempt. */
  request: ContainerRecreateRequest;
  containers: string[];
  /**
   * Milliseconds before the request may be created (retry backoff). When > 0, do nothing now and
   * decide again after this delay; the events are for the moment of creation.
   */
  delayMs: number;
  /** The completed request this one retries, if any of its sidecars was already asked to stop. */
  retryOf?: string;
  /** Sidecars left out because they have no container ID yet; a later attempt covers them. */
  waitingForContainerId: string[];
  /**
   * The controller sets the Pod's phase as soon as this request exists, before its sidecars exit
   * (R23): the agent's fast path leaves such a request to the controller, so that no stop outruns it.
   */
  phaseFollows: boolean;
}

export interface ImageSwap {
  container: string;
  from: string;
  to: string;
}

export interface SwapImages extends DecisionBase {
  kind: 'swapImages';
  /** All in one Pod update (retry on conflict). */
  swaps: ImageSwap[];
}

export type PhasePatchCause = 'ignoreExitCode' | 'restartLoop' | 'sidecarNotStarted' | 'allSucceeded';

export interface PodConditionPatch {
  type: string;
  status: 'True';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

export interface PatchPhase extends DecisionBase {
  kind: 'patchPhase';
  cause: PhasePatchCause;
  phase: TerminalPhase;
  condition: PodConditionPatch;
  /** Strategic-merge patch for the Pod's `status` subresource (conditions merge by type). */
  statusPatch: { status: { phase: TerminalPhase; conditions: PodConditionPatch[] } };
}

export type Decision = NotHandled | Wait | CreateRequest | SwapImages | PatchPhase;

/**
 * A delay fit for a timer, the one bound of every requeue the rules and the agent's planner ask for:
 * whole, within the work queue's bounds; NaN (a bad timestamp) counts as the most, never as "now"
 * (which would run the key again and again). undefined stays undefined (no requeue).
 */
export function boundedDelayMs(ms: number): number;
export function boundedDelayMs(ms: number | undefined): number | undefined;
export function boundedDelayMs(ms: number | undefined): number | undefined {
  if (ms === undefined) return undefined;
  return Number.isNaN(ms) ? MAX_REQUEUE_MS : clampDelay(Math.ceil(ms));
}
