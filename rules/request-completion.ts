// When a request is over without being carried out to the end, whoever looks at it: the agent
// (R35) and the controller (R29, R31) decide these the same way. The deadline's message is the same
// from both; a replaced Pod each reports in its own words (the agent's refusal names both uids).
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_POD_UID, MAX_STRATEGY_SECONDS } from '../api/container-recreate-request.ts';
import { toMs } from '../common/time.ts';

/**
 * The deadline of a request created without activeDeadlineSeconds: every request ends, so none can
 * wait forever (and hold what waits behind it, R34). Three hours: above the longest a request can
 * rightly take, an hour of unreadyGracePeriodSeconds, an hour of minStartedSeconds and the grace.
 */
export const DEFAULT_ACTIVE_DEADLINE_SECONDS = 3 * MAX_STRATEGY_SECONDS;

/** The request's activeDeadlineSeconds, or DEFAULT_ACTIVE_DEADLINE_SECONDS when it has none. */
function deadlineSecondsOf(crr: ContainerRecreateRequest): number {
  return crr.spec.activeDeadlineSeconds ?? DEFAULT_ACTIVE_DEADLINE_SECONDS;
}

/**
 * Milliseconds until the deadline (activeDeadlineSeconds, else DEFAULT_ACTIVE_DEADLINE_SECONDS) has
 * passed since the request's creation (zero or less once it has); undefined without a creation time.
 */
export function untilDeadlineMs(crr: ContainerRecreateRequest, nowMs: number): number | undefined {
  const created = toMs(crr.metadata.creationTimestamp);
  if (created === undefined) return undefined;
  return created + deadlineSecondsOf(crr) * 1000 - nowMs;
}

/** The message the request is completed with once its deadline has passed; undefined before. */
export function deadlinePassed(crr: ContainerRecreateRequest, nowMs: number): string | undefined {
  const left = untilDeadlineMs(crr, nowMs);
  if (left === undefined || left > 0) return undefined;
  if (crr.spec.activeDeadlineSeconds === undefined) {
    return `the request had no activeDeadlineSeconds and is not kept running longer than ${DEFAULT_ACTIVE_DEADLINE_SECONDS}s; it had not finished`;
  }
  return `activeDeadlineSeconds (${crr.spec.activeDeadlineSeconds}s) passed before the request finished`;
}

/**
 * The Pod uid the request's pod-uid label names, when the Pod now under the request's podName has
 * another (`podUid`): that Pod was deleted and recreated since (or the label lies). Such a request
 * is completed and never executed. Undefined when the label is absent or names this very Pod.
 */
export function replacedPodUid(crr: ContainerRecreateRequest, podUid: string): string | undefined {
  const label = crr.metadata.labels?.[LABEL_POD_UID];
  return label !== undefined && label !== podUid ? label : undefined;
}
