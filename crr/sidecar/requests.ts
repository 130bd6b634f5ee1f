// The sidecar terminator's ContainerRecreateRequests: naming, the compact view of existing ones, the
// request body (spec section 3) and the retry backoff.
import type {
  ContainerRecreatePhase,
  ContainerRecreateRequest,
  ContainerRecreateState,
  CRRContainer,
  CRRPhase,
} from '../types.ts';
import { API_VERSION, KIND, LABEL_ACTIVE, LABEL_CREATED_BY, LABEL_NODE_NAME, LABEL_POD_UID } from '../types.ts';
import { REQUEST_NAME_PREFIX } from './constants.ts';
import type { PodProjection } from './projection.ts';

/** Value of the created-by label on the requests the sidecar terminator creates. */
export const CREATED_BY = 'sidecar-terminator';

export interface SidecarTerminatorOptions {
  /** Deadline of a request; raised for Pods whose grace period would not fit in it. */
  activeDeadlineSeconds: number;
  /** Keep above retryMaxDelaySeconds: attempt numbers (and so the backoff) come from existing requests. */
  ttlSecondsAfterFinished: number;
  /** Delay before attempt 2; doubles for every further attempt. */
  retryBaseDelaySeconds: number;
  retryMaxDelaySeconds: number;
}

export const DEFAULT_OPTIONS: SidecarTerminatorOptions = {
  activeDeadlineSeconds: 300,
  ttlSecondsAfterFinished: 1800,
  retryBaseDelaySeconds: 10,
  retryMaxDelaySeconds: 300,
};

/** Kubernetes' default terminationGracePeriodSeconds. */
const DEFAULT_GRACE_SECONDS = 30;
/** Room for the preStop hook's start, the runtime call and the status write around the grace period. */
const DEADLINE_MARGIN_SECONDS = 60;
/** The CRD's lower bound for activeDeadlineSeconds. */
const MIN_DEADLINE_SECONDS = 3;

export function requestName(podUid: string, attempt: number): string {
  const base = `${REQUEST_NAME_PREFIX}${podUid}`;
  return attempt <= 1 ? base : `${base}-${attempt}`;
}

/** The attempt number of one of our requests for this Pod, or undefined for any other name. */
export function requestAttempt(podUid: string, name: string): number | undefined {
  const base = `${REQUEST_NAME_PREFIX}${podUid}`;
  if (name === base) return 1;
  if (!name.startsWith(`${base}-`)) return undefined;
  const suffix = name.slice(base.length + 1);
  if (!/^[1-9][0-9]*$/.test(suffix)) return undefined;
  const attempt = Number(suffix);
  return attempt >= 2 ? attempt : undefined;
}

export interface ExistingRequestContainer {
  name: string;
  statusContext?: { containerID: string; restartCount: number };
  state?: { phase: ContainerRecreatePhase; exitCode?: number; message?: string };
}

/** What decide() reads of an existing request for the Pod. */
export interface ExistingRequest {
  name: string;
  /** Set only for the sidecar terminator's own requests (see requestAttempt). */
  attempt?: number;
  phase: CRRPhase;
  completed: boolean;
  message?: string;
  creationTimeMs?: number;
  completionTimeMs?: number;
  containers: ExistingRequestContainer[];
}

export function projectRequest(crr: ContainerRecreateRequest, podUid: string): ExistingRequest {
  const name = crr.metadata.name ?? '';
  const phase = crr.status?.phase ?? '';
  const states = crr.status?.containerRecreateStates ?? [];
  const attempt = requestAttempt(podUid, name);
  const creationTimeMs = toMs(crr.metadata.creationTimestamp);
  const completionTimeMs = toMs(crr.status?.completionTime);
  return {
    name,
    ...(attempt !== undefined ? { attempt } : {}),
    phase,
    completed: phase === 'Completed',
    ...(crr.status?.message ? { message: crr.status.message } : {}),
    ...(creationTimeMs !== undefined ? { creationTimeMs } : {}),
    ...(completionTimeMs !== undefined ? { completionTimeMs } : {}),
    containers: crr.spec.containers.map((c) => projectRequestContainer(c, states)),
  };
}

function projectRequestContainer(container: CRRContainer, states: readonly ContainerRecreateState[]): ExistingRequestContainer {
  const state = states.find((s) => s.name === container.name);
  return {
    name: container.name,
    ...(container.statusContext ? { statusContext: { ...container.statusContext } } : {}),
    ...(state ? { state: { phase: state.phase, exitCode: state.exitCode, message: state.message } } : {}),
  };
}

function toMs(value: string | Date | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Exponential from retryBaseDelaySeconds for attempt 2, capped at retryMaxDelaySeconds. */
export function retryDelaySeconds(attempt: number, options: SidecarTerminatorOptions): number {
  if (attempt <= 1) return 0;
  const delay = options.retryBaseDelaySeconds * 2 ** (attempt - 2);
  return Math.min(options.retryMaxDelaySeconds, delay);
}

/**
 * The request body that stops `containers` of the Pod (spec section 3). Every named container must
 * have a containerID in the Pod status: the statusContext pins the request to that container.
 */
export function buildTerminationRequest(
  pod: PodProjection,
  containers: readonly string[],
  attempt: number,
  options: SidecarTerminatorOptions = DEFAULT_OPTIONS,
): ContainerRecreateRequest {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: requestName(pod.uid, attempt),
      namespace: pod.namespace,
      // Created admitted: the statusContext is set from the Pod status and the labels from the Pod.
      labels: { [LABEL_NODE_NAME]: pod.nodeName ?? '', [LABEL_POD_UID]: pod.uid, [LABEL_ACTIVE]: 'true', [LABEL_CREATED_BY]: CREATED_BY },
      // Controller reference: garbage-collected with the Pod. No blockOwnerDeletion, which would
      // need permission on pods/finalizers for nothing.
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid, controller: true }],
    },
    spec: {
      podName: pod.name,
      containers: containers.map((name) => ({ name, statusContext: statusContextOf(pod, name) })),
      strategy: { forceRecreate: true, failurePolicy: 'Ignore' },
      activeDeadlineSeconds: deadlineFor(pod, options),
      ttlSecondsAfterFinished: options.ttlSecondsAfterFinished,
    },
  };
}

function statusContextOf(pod: PodProjection, container: string): { containerID: string; restartCount: number } {
  const status = pod.statuses.find((s) => s.name === container);
  if (!status?.containerID) {
    throw new Error(`container "${container}" of Pod ${pod.namespace}/${pod.name} has no container ID yet`);
  }
  return { containerID: status.containerID, restartCount: status.restartCount };
}

/** Never let the deadline cut a graceful stop short: the Pod's grace period plus a margin at least. */
function deadlineFor(pod: PodProjection, options: SidecarTerminatorOptions): number {
  const grace = pod.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
  return Math.max(MIN_DEADLINE_SECONDS, options.activeDeadlineSeconds, grace + DEADLINE_MARGIN_SECONDS);
}
