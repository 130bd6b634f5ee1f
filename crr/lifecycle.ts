// Pure decisions of the cluster controller about requests: admitting a new one, and ending,
// unlabelling and deleting the ones that are over.
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest, CRRContainer } from '../api/container-recreate-request.ts';
import { boundedDelayMs } from '../rules/decision.ts';
import { deadlinePassed, replacedPodUid, untilDeadlineMs } from '../rules/request-completion.ts';
import { LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID, READINESS_CONDITION, READINESS_FINALIZER, isCompleted, statusContextOf } from '../api/container-recreate-request.ts';
import { toMs } from '../common/time.ts';
import { isValidName } from '../common/kube/paths.ts';

/** How long an admitted request may wait for an agent to pick it up. */
export const AGENT_PICKUP_TIMEOUT_MS = 60_000;

export type LifecycleAction =
  | { kind: 'none'; requeueAfterMs?: number }
  | { kind: 'admit'; labels: Record<string, string>; containers: CRRContainer[] }
  /** `refused`: the request does not match its Pod and was never executed. */
  | { kind: 'complete'; message: string; refused?: true }
  | { kind: 'deactivate' }
  | { kind: 'delete' };

export function isAdmitted(crr: ContainerRecreateRequest): boolean {
  return crr.metadata.labels?.[LABEL_ACTIVE] === 'true';
}

/**
 * What to do about a request now. `pod` is the Pod named by the request as the API has it
 * (undefined when there is none). Whatever labels a request was created with, it is checked against
 * its Pod every time: labels prove nothing, anyone who may create requests may set them.
 */
export function decideLifecycle(crr: ContainerRecreateRequest, pod: V1Pod | undefined, nowMs: number): LifecycleAction {
  if (isCompleted(crr)) return afterCompletion(crr, nowMs);
  if (!isValidName(crr.spec.podName)) return { kind: 'complete', message: `spec.podName ${JSON.stringify(crr.spec.podName)} is not a valid Pod name: request not executed` };
  if (!pod) return { kind: 'complete', message: missingPodMessage(crr) };
  const mismatch = mismatchWithPod(crr, pod);
  if (mismatch) return { kind: 'complete', message: mismatch, refused: true };
  if (needsAdmission(crr)) return admit(crr, pod);
  return whileActive(crr, nowMs);
}

function missingPodMessage(crr: ContainerRecreateRequest): string {
  const podName = crr.spec.podName;
  // A uid label means the Pod was there when the request was admitted (or claims so).
  return crr.metadata.labels?.[LABEL_POD_UID] !== undefined
    ? `Pod ${podName} no longer exists`
    : `Pod ${podName} not found in namespace ${crr.metadata.namespace}`;
}

/** Why the request cannot be about this Pod, if it cannot: the request is then not executed. */
function mismatchWithPod(crr: ContainerRecreateRequest, pod: V1Pod): string | undefined {
  const podName = crr.spec.podName;
  const labels = crr.metadata.labels ?? {};
  const uid = pod.metadata?.uid ?? '';
  const uidLabel = replacedPodUid(crr, uid);
  if (uidLabel !== undefined) {
    return `label ${LABEL_POD_UID}=${uidLabel} does not match Pod ${podName} (${uid}): it was deleted and recreated, or the label is wrong; request not executed`;
  }
  const nodeName = pod.spec?.nodeName;
  const nodeLabel = labels[LABEL_NODE_NAME];
  if (nodeLabel !== undefined && nodeLabel !== nodeName) {
    return `label ${LABEL_NODE_NAME}=${nodeLabel} does not match the node of Pod ${podName} (${nodeName ?? 'none'}): request not executed`;
  }
  const specNames = new Set((pod.spec?.containers ?? []).map((c) => c.name));
  const unknown = crr.spec.containers.find((c) => !specNames.has(c.name));
  if (unknown) return `Pod ${podName} has no container ${unknown.name}: request not executed`;
  return undefined;
}

/** Not yet fully labelled, or a container not yet pinned to its attempt. */
function needsAdmission(crr: ContainerRecreateRequest): boolean {
  const labels = crr.metadata.labels ?? {};
  return (
    labels[LABEL_NODE_NAME] === undefined ||
    labels[LABEL_POD_UID] === undefined ||
    !isAdmitted(crr) ||
    crr.spec.containers.some((c) => !c.statusContext)
  );
}

/** Deadline and agent pickup of an admitted request; looked at again when the nearer one is due. */
function whileActive(crr: ContainerRecreateRequest, nowMs: number): LifecycleAction {
  const expired = deadlinePassed(crr, nowMs);
  if (expired) return { kind: 'complete', message: expired };
  const waits: number[] = [];
  const untilDeadline = untilDeadlineMs(crr, nowMs);
  if (untilDeadline !== undefined) waits.push(untilDeadline);
  if (!crr.status?.phase) {
    const created = toMs(crr.metadata.creationTimestamp) ?? nowMs;
    const left = created + AGENT_PICKUP_TIMEOUT_MS - nowMs;
    if (left <= 0) {
      const node = crr.metadata.labels?.[LABEL_NODE_NAME];
      return { kind: 'complete', message: `no agent on node ${node} picked the request up within ${AGENT_PICKUP_TIMEOUT_MS / 1000}s: is the sidecar-terminator agent running there?` };
    }
    waits.push(left);
  }
  return { kind: 'none', requeueAfterMs: waits.length ? boundedDelayMs(Math.min(...waits) + 1) : undefined };
}

/**
 * How long a completed request without ttlSecondsAfterFinished is kept: every request ends deleted,
 * so that requests created without a TTL cannot pile up in the API server and in our caches.
 */
export const DEFAULT_TTL_SECONDS_AFTER_FINISHED = 86_400;

function afterCompletion(crr: ContainerRecreateRequest, nowMs: number): LifecycleAction {
  if (isAdmitted(crr)) return { kind: 'deactivate' };
  const ttl = crr.spec.ttlSecondsAfterFinished ?? DEFAULT_TTL_SECONDS_AFTER_FINISHED;
  // A completion time the controller cannot read (written by someone else): counted from creation.
  const completed = toMs(crr.status?.completionTime) ?? toMs(crr.metadata.creationTimestamp);
  if (completed === undefined) return { kind: 'none' };
  const left = completed + ttl * 1000 - nowMs;
  return left <= 0 ? { kind: 'delete' } : { kind: 'none', requeueAfterMs: boundedDelayMs(left + 1) };
}

/**
 * Labels the request with its Pod's node and uid and pins each container to its current attempt.
 * Only here, for a request not yet fully labelled, is a finished Pod refused: no label exempts a
 * request from it.
 */
function admit(crr: ContainerRecreateRequest, pod: V1Pod): LifecycleAction {
  const podName = crr.spec.podName;
  const nodeName = pod.spec?.nodeName;
  if (!nodeName) return { kind: 'complete', message: `Pod ${podName} is not scheduled to a node yet` };
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') {
    return { kind: 'complete', message: `Pod ${podName} has already finished (${phase}): there is nothing to stop` };
  }
  const containers: CRRContainer[] = [];
  for (const c of crr.spec.containers) {
    if (c.statusContext) {
      containers.push(c);
      continue;
    }
    const statusContext = statusContextOf(pod.status?.containerStatuses?.find((s) => s.name === c.name));
    if (!statusContext) return { kind: 'complete', message: `container ${c.name} of Pod ${podName} has no container ID yet (not started)` };
    containers.push({ ...c, statusContext });
  }
  const uid = pod.metadata?.uid ?? '';
  return { kind: 'admit', labels: { [LABEL_NODE_NAME]: nodeName, [LABEL_POD_UID]: uid, [LABEL_ACTIVE]: 'true' }, containers };
}

export type ReadinessAction =
  | { kind: 'none' }
  | { kind: 'addFinalizer' }
  /** `podUid`: the patch's precondition, so that a Pod recreated under the same name is never touched. */
  | { kind: 'setPodReady'; ready: boolean; podUid: string }
  | { kind: 'removeFinalizer' };

/** Whether a Pod must be read to decide about the request: not for one completed, unless its readiness is still to restore. */
export function needsPod(crr: ContainerRecreateRequest): boolean {
  return !isCompleted(crr) || hasReadinessFinalizer(crr);
}

function hasReadinessFinalizer(crr: ContainerRecreateRequest): boolean {
  return crr.metadata.finalizers?.includes(READINESS_FINALIZER) ?? false;
}

/**
 * unreadyGracePeriodSeconds: the Pod is marked not-ready (our readiness condition False) while the
 * request runs, and ready again after. The finalizer goes on first and comes off last, so a request
 * deleted at any moment never leaves the Pod not-ready. The Pod is touched only once the request is
 * admitted and checked against it (its labels name this very Pod and node): labels prove nothing
 * until then.
 */
export function decideReadiness(crr: ContainerRecreateRequest, pod: V1Pod | undefined): ReadinessAction {
  const hasFinalizer = hasReadinessFinalizer(crr);
  const condition = pod?.status?.conditions?.find((c) => c.type === READINESS_CONDITION)?.status;
  const podUid = pod?.metadata?.uid ?? '';
  // The very Pod the request was admitted for (its uid label), on the node it names.
  const itsPod = pod !== undefined && podUid !== '' && crr.metadata.labels?.[LABEL_POD_UID] === podUid && mismatchWithPod(crr, pod) === undefined;
  const over = isCompleted(crr) || crr.metadata.deletionTimestamp !== undefined;
  if (over) {
    if (!hasFinalizer) return { kind: 'none' };
    if (itsPod && condition === 'False') return { kind: 'setPodReady', ready: true, podUid };
    return { kind: 'removeFinalizer' };
  }
  if (!crr.spec.strategy?.unreadyGracePeriodSeconds || !itsPod || needsAdmission(crr)) return { kind: 'none' };
  if (!hasFinalizer) return { kind: 'addFinalizer' };
  if (condition !== 'False') return { kind: 'setPodReady', ready: false, podUid };
  return { kind: 'none' };
}
