// When a request is over without being carried out to the end, whoever looks at it: the agent
// (R34) and the controller (R28, R30) decide these the same way. The deadline's message is the same
// from both; a replaced Pod each reports in its own words (the agent's refusal names both uids).
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_POD_UID } from '../api/container-recreate-request.ts';
import { toMs } from '../common/time.ts';

/**
 * Milliseconds until activeDeadlineSeconds has passed since the request's creation (zero or less
 * once it has); undefined without a deadline or a creation time.
 */
export function untilDeadlineMs(crr: ContainerRecreateRequest, nowMs: number): number | undefined {
  const deadline = crr.spec.activeDeadlineSeconds;
  const created = toMs(crr.metadata.creationTimestamp);
  if (deadline === undefined || created === undefined) return undefined;
  return created + deadline * 1000 - nowMs;
}

/** The message the request is completed with once its deadline has passed; undefined before. */
export function deadlinePassed(crr: ContainerRecreateRequest, nowMs: number): string | undefined {
  const left = untilDeadlineMs(crr, nowMs);
  if (left === undefined || left > 0) return undefined;
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
