// Pure decisions of the cluster controller about requests: admitting a new one, and ending,
// unlabelling and deleting the ones that are over.
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest, CRRContainer } from './types.ts';
import { LABEL_ACTIVE, LABEL_CREATED_BY, LABEL_NODE_NAME, LABEL_POD_UID, READINESS_CONDITION, READINESS_FINALIZER, isCompleted } from './types.ts';

/** How long an admitted request may wait for an agent to pick it up. */
export const AGENT_PICKUP_TIMEOUT_MS = 60_000;

export type LifecycleAction =
  | { kind: 'none'; requeueAfterMs?: number }
  | { kind: 'admit'; labels: Record<string, string>; containers: CRRContainer[] }
  | { kind: 'complete'; message: string }
  | { kind: 'deactivate' }
  | { kind: 'delete' };

export function isAdmitted(crr: ContainerRecreateRequest): boolean {
  return crr.metadata.labels?.[LABEL_ACTIVE] === 'true';
}

/**
 * What to do about a request now. `pod` is the Pod named by the request as the API has it
 * (undefined when there is none).
 */
export function decideLifecycle(crr: ContainerRecreateRequest, pod: V1Pod | undefined, nowMs: number): LifecycleAction {
  if (isCompleted(crr)) return afterCompletion(crr, nowMs);
  if (!isAdmitted(crr)) return admit(crr, pod);

  const podName = crr.spec.podName;
  if (!pod) return { kind: 'complete', message: `Pod ${podName} no longer exists` };
  if (pod.metadata?.uid !== crr.metadata.labels?.[LABEL_POD_UID]) return { kind: 'complete', message: `Pod ${podName} was deleted and recreated` };

  const created = timeMs(crr.metadata.creationTimestamp) ?? nowMs;
  const waits: number[] = [];
  const deadline = crr.spec.activeDeadlineSeconds;
  if (deadline !== undefined) {
    const left = created + deadline * 1000 - nowMs;
    if (left <= 0) return { kind: 'complete', message: `activeDeadlineSeconds (${deadline}s) passed before the request finished` };
    waits.push(left);
  }
  if (!crr.status?.phase) {
    const left = created + AGENT_PICKUP_TIMEOUT_MS - nowMs;
    if (left <= 0) {
      const node = crr.metadata.labels?.[LABEL_NODE_NAME];
      return { kind: 'complete', message: `no agent on node ${node} picked the request up within ${AGENT_PICKUP_TIMEOUT_MS / 1000}s: is the sidecar-terminator agent running there?` };
    }
    waits.push(left);
  }
  return { kind: 'none', requeueAfterMs: waits.length ? Math.min(...waits) + 1 : undefined };
}

function afterCompletion(crr: ContainerRecreateRequest, nowMs: number): LifecycleAction {
  if (isAdmitted(crr)) return { kind: 'deactivate' };
  const ttl = crr.spec.ttlSecondsAfterFinished;
  const completed = timeMs(crr.status?.completionTime);
  if (ttl === undefined || completed === undefined) return { kind: 'none' };
  const left = completed + ttl * 1000 - nowMs;
  return left <= 0 ? { kind: 'delete' } : { kind: 'none', requeueAfterMs: left + 1 };
}

function admit(crr: ContainerRecreateRequest, pod: V1Pod | undefined): LifecycleAction {
  const podName = crr.spec.podName;
  if (!pod) return { kind: 'complete', message: `Pod ${podName} not found in namespace ${crr.metadata.namespace}` };
  const nodeName = pod.spec?.nodeName;
  if (!nodeName) return { kind: 'complete', message: `Pod ${podName} is not scheduled to a node yet` };
  const uid = pod.metadata?.uid ?? '';
  const labels = crr.metadata.labels ?? {};
  for (const [label, want] of [[LABEL_NODE_NAME, nodeName], [LABEL_POD_UID, uid]] as const) {
    if (labels[label] !== undefined && labels[label] !== want) {
      return { kind: 'complete', message: `label ${label}=${labels[label]} does not match the Pod (${want}); the label cannot be changed once set` };
    }
  }
  const phase = pod.status?.phase;
  if ((phase === 'Succeeded' || phase === 'Failed') && labels[LABEL_CREATED_BY] === undefined) {
    return { kind: 'complete', message: `Pod ${podName} has already finished (${phase}): there is nothing to stop` };
  }

  const specNames = new Set((pod.spec?.containers ?? []).map((c) => c.name));
  const containers: CRRContainer[] = [];
  for (const c of crr.spec.containers) {
    if (!specNames.has(c.name)) return { kind: 'complete', message: `Pod ${podName} has no container ${c.name}` };
    if (c.statusContext) {
      containers.push(c);
      continue;
    }
    const status = pod.status?.containerStatuses?.find((s) => s.name === c.name);
    if (!status?.containerID) return { kind: 'complete', message: `container ${c.name} of Pod ${podName} has no container ID yet (not started)` };
    containers.push({ ...c, statusContext: { containerID: status.containerID, restartCount: status.restartCount } });
  }
  return { kind: 'admit', labels: { [LABEL_NODE_NAME]: nodeName, [LABEL_POD_UID]: uid, [LABEL_ACTIVE]: 'true' }, containers };
}

function timeMs(t: string | Date | undefined): number | undefined {
  if (t === undefined) return undefined;
  const ms = new Date(t).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

export type ReadinessAction =
  | { kind: 'none' }
  | { kind: 'addFinalizer' }
  | { kind: 'setPodReady'; ready: boolean }
  | { kind: 'removeFinalizer' };

/**
 * unreadyGracePeriodSeconds: the Pod is marked not-ready (our readiness condition False) while the
 * request runs, and ready again after. The finalizer goes on first and comes off last, so a request
 * deleted at any moment never leaves the Pod not-ready.
 */
export function decideReadiness(crr: ContainerRecreateRequest, pod: V1Pod | undefined): ReadinessAction {
  const hasFinalizer = crr.metadata.finalizers?.includes(READINESS_FINALIZER) ?? false;
  const condition = pod?.status?.conditions?.find((c) => c.type === READINESS_CONDITION)?.status;
  const over = isCompleted(crr) || crr.metadata.deletionTimestamp !== undefined;
  if (over) {
    if (!hasFinalizer) return { kind: 'none' };
    if (pod && condition === 'False') return { kind: 'setPodReady', ready: true };
    return { kind: 'removeFinalizer' };
  }
  if (!crr.spec.strategy?.unreadyGracePeriodSeconds || !isAdmitted(crr)) return { kind: 'none' };
  if (!hasFinalizer) return { kind: 'addFinalizer' };
  if (pod && condition !== 'False') return { kind: 'setPodReady', ready: false };
  return { kind: 'none' };
}
