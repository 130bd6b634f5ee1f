// The sidecar terminator's ContainerRecreateRequests: naming, the compact view of existing ones, the
// request body and the retry backoff.
import type {
  ContainerRecreatePhase,
  ContainerRecreateRequest,
  ContainerRecreateState,
  CRRContainer,
  CRRPhase,
  StatusContext,
} from '../api/container-recreate-request.ts';
import {
  API_VERSION,
  KIND,
  LABEL_ACTIVE,
  LABEL_AFTER_PHASE,
  LABEL_CREATED_BY,
  LABEL_NODE_NAME,
  LABEL_POD_UID,
  MAX_ACTIVE_DEADLINE_SECONDS,
  MAX_REQUEST_CONTAINERS,
  MIN_ACTIVE_DEADLINE_SECONDS,
  MAX_TTL_SECONDS_AFTER_FINISHED,
  READINESS_FINALIZER,
  statusContextOf,
} from '../api/container-recreate-request.ts';
import { REQUEST_NAME_PREFIX } from '../api/names.ts';
import { DEFAULT_GRACE_SECONDS } from '../api/pod.ts';
import { toMs } from '../common/time.ts';
import type { PodProjection } from './projection.ts';

/** Value of the created-by label on the requests the sidecar terminator creates. */
export const CREATED_BY = 'sidecar-terminator';

export interface SidecarTerminatorOptions {
  /** Deadline of a request; raised for Pods whose grace period would not fit in it. */
  activeDeadlineSeconds: number;
  /** At least MIN_REQUEST_TTL_SECONDS. */
  ttlSecondsAfterFinished: number;
  /** Delay before attempt 2; doubles for every further attempt. */
  retryBaseDelaySeconds: number;
  retryMaxDelaySeconds: number;
  /**
   * How long sidecars that never started (waiting: image pull or config error) are waited for,
   * counted from when the main containers finished, before the Pod's phase is set without them.
   */
  sidecarStartTimeoutSeconds: number;
  /**
   * The images a sidecar may be swapped for on a real node without an agent (R22), by repository or
   * in full: no admission saw them at the Pod's creation, so only those the operator allows run.
   */
  agentlessSwapImages: readonly string[];
  /** R56: the phase kubelet settled is written from its report, not waited for (--settled-phase). */
  settledPhase: boolean;
}

/** The quick-exit image as released: the one image allowed for swaps on agentless nodes by default. */
export const RELEASED_QUICK_EXIT_IMAGE = 'ghcr.io/sidecar-terminator/quick-exit';

export const DEFAULT_OPTIONS: SidecarTerminatorOptions = {
  activeDeadlineSeconds: 300,
  ttlSecondsAfterFinished: 600,
  retryBaseDelaySeconds: 10,
  retryMaxDelaySeconds: 300,
  sidecarStartTimeoutSeconds: 120,
  agentlessSwapImages: [RELEASED_QUICK_EXIT_IMAGE],
  settledPhase: true,
};

/**
 * The shortest TTL of the requests we create: above the longest retry delay. Attempt numbers, and so
 * the backoff, are counted from the requests still there: one deleted before its retry was due would
 * have its attempt made again and the backoff start over. Both programs' --request-ttl-seconds
 * refuse less, saying REQUEST_TTL_FLOOR.
 */
export const MIN_REQUEST_TTL_SECONDS = DEFAULT_OPTIONS.retryMaxDelaySeconds + 1;
export const REQUEST_TTL_FLOOR = `a request must outlive the longest retry delay (${DEFAULT_OPTIONS.retryMaxDelaySeconds} s), as retries are counted from the requests still there`;

/**
 * How many of our own requests for one Pod may exist at once before the Pod is given up
 * (SidecarNotStoppable): only requests that are ours count (isOwnRequest), never names others took.
 */
export const MAX_REQUEST_ATTEMPTS = 1000;

/**
 * The highest number in our names: a larger suffix is not ours. Far above MAX_REQUEST_ATTEMPTS, so
 * that names taken by others (skipped, see decide) never leave us without one.
 */
export const MAX_REQUEST_NAME_NUMBER = 999_999;

/** Room for the preStop hook's start, the runtime call and the status write around the grace period. */
const DEADLINE_MARGIN_SECONDS = 60;

export function requestName(podUid: string, attempt: number): string {
  const base = `${REQUEST_NAME_PREFIX}${podUid}`;
  return attempt <= 1 ? base : `${base}-${attempt}`;
}

/**
 * The attempt number a request's name stands for, for this Pod, or undefined for any other name. A
 * name is not proof that a request is ours: see isOwnRequest.
 */
export function requestAttempt(podUid: string, name: string): number | undefined {
  const base = `${REQUEST_NAME_PREFIX}${podUid}`;
  if (name === base) return 1;
  if (!name.startsWith(`${base}-`)) return undefined;
  const suffix = name.slice(base.length + 1);
  // At most six digits: never a number too large to read exactly.
  if (!/^[1-9][0-9]{0,5}$/.test(suffix)) return undefined;
  const attempt = Number(suffix);
  return attempt >= 2 && attempt <= MAX_REQUEST_NAME_NUMBER ? attempt : undefined;
}

/**
 * Informer index of the controller's requests: the Pod uid of the pod-uid label and the one in the
 * name (deduplicated). A request whose name is ours but whose labels lie must still be found for
 * the Pod, so that its name is never taken again.
 */
export function requestPodUids(crr: ContainerRecreateRequest): string[] {
  const uids = new Set<string>();
  const label = crr.metadata.labels?.[LABEL_POD_UID];
  if (label) uids.add(label);
  const name = crr.metadata.name ?? '';
  if (name.startsWith(REQUEST_NAME_PREFIX)) {
    const rest = name.slice(REQUEST_NAME_PREFIX.length);
    if (rest) uids.add(rest);
    // `<uid>-<n>`: a uid may itself end in `-<digits>`, so both readings are indexed.
    const numbered = /^(.+)-([1-9][0-9]{0,5})$/.exec(rest);
    if (numbered?.[1] && requestAttempt(numbered[1], name) !== undefined) uids.add(numbered[1]);
  }
  return [...uids];
}

/**
 * Requests per list page to start with: a request may be large (its creator's labels and
 * annotations, up to the API server's object size), and a page is parsed whole before it is
 * projected; a page over the client's answer cap is asked again smaller (common/kube/list.ts).
 */
export const REQUEST_PAGE_SIZE = 100;

/**
 * Requests per page when one Pod's are listed (before a hooked stop): a Pod has one or two, and
 * two of the largest requests the API server stores (1.5 MiB each) fit the answer cap, so a Pod whose
 * requests someone made big costs no answer that is read only to be asked again smaller.
 */
export const POD_REQUESTS_PAGE_SIZE = 2;

/** The labels a kept request carries: ours, which route it; no other label is read. */
const KEPT_LABELS = [LABEL_NODE_NAME, LABEL_POD_UID, LABEL_ACTIVE, LABEL_CREATED_BY, LABEL_AFTER_PHASE];

/**
 * What the controller and the agent keep of a request in their caches: what they read of it, and
 * nothing anyone may make large. Its creator may give it a megabyte of labels, annotations and
 * finalizers; kept are our labels, whether it carries our finalizer, and the spec and status (each
 * bounded by the CRD; the status is written by our components only). No annotations, no
 * managedFields, no owner references.
 */
export function keptRequest(crr: ContainerRecreateRequest): ContainerRecreateRequest {
  const m = crr.metadata;
  const labels: Record<string, string> = {};
  for (const key of KEPT_LABELS) {
    const value = m.labels?.[key];
    if (value !== undefined) labels[key] = value;
  }
  return {
    apiVersion: crr.apiVersion,
    kind: crr.kind,
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
      ...(m.deletionTimestamp !== undefined ? { deletionTimestamp: m.deletionTimestamp } : {}),
      ...(m.labels ? { labels } : {}),
      ...(m.finalizers?.includes(READINESS_FINALIZER) ? { finalizers: [READINESS_FINALIZER] } : {}),
    },
    spec: crr.spec,
    ...(crr.status ? { status: crr.status } : {}),
  };
}

export interface ExistingRequestContainer {
  name: string;
  statusContext?: { containerID: string; restartCount: number };
  state?: { phase: ContainerRecreatePhase; exitCode?: number; message?: string };
}

/** What decide() reads of an existing request for the Pod. */
export interface ExistingRequest {
  name: string;
  /** Set when the name is one of ours for the Pod (see requestAttempt); the labels decide whether it is. */
  attempt?: number;
  /** The pod-uid and node-name labels, as the request carries them. */
  podUidLabel?: string;
  nodeNameLabel?: string;
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
  const podUidLabel = crr.metadata.labels?.[LABEL_POD_UID];
  const nodeNameLabel = crr.metadata.labels?.[LABEL_NODE_NAME];
  return {
    name,
    ...(attempt !== undefined ? { attempt } : {}),
    ...(podUidLabel !== undefined ? { podUidLabel } : {}),
    ...(nodeNameLabel !== undefined ? { nodeNameLabel } : {}),
    phase,
    completed: phase === 'Completed',
    ...(crr.status?.message ? { message: crr.status.message } : {}),
    ...(creationTimeMs !== undefined ? { creationTimeMs } : {}),
    ...(completionTimeMs !== undefined ? { completionTimeMs } : {}),
    containers: crr.spec.containers.map((c) => projectRequestContainer(c, states)),
  };
}

/**
 * One of ours for this Pod: a name of ours, and labels naming this very Pod and its node. Anyone who
 * may create requests can take our names; one with other labels is never counted as ours (its name
 * is skipped, see decide).
 */
export function isOwnRequest(request: ExistingRequest, pod: Pick<PodProjection, 'uid' | 'nodeName'>): boolean {
  return (
    requestAttempt(pod.uid, request.name) !== undefined &&
    pod.nodeName !== undefined &&
    request.podUidLabel === pod.uid &&
    request.nodeNameLabel === pod.nodeName
  );
}

function projectRequestContainer(container: CRRContainer, states: readonly ContainerRecreateState[]): ExistingRequestContainer {
  const state = states.find((s) => s.name === container.name);
  return {
    name: container.name,
    ...(container.statusContext ? { statusContext: { ...container.statusContext } } : {}),
    ...(state ? { state: { phase: state.phase, exitCode: state.exitCode, message: state.message } } : {}),
  };
}

/**
 * The least time MAX_REQUEST_ATTEMPTS requests of ours take after the mains finished: the backoff
 * before each retry. Requests others make with our names and labels can come as fast as they like.
 */
export function attemptsSpanMs(options: SidecarTerminatorOptions): number {
  let seconds = 0;
  for (let attempt = 2; attempt <= MAX_REQUEST_ATTEMPTS; attempt++) seconds += retryDelaySeconds(attempt, options);
  return seconds * 1000;
}

/** Exponential from retryBaseDelaySeconds for attempt 2, capped at retryMaxDelaySeconds. */
export function retryDelaySeconds(attempt: number, options: SidecarTerminatorOptions): number {
  if (attempt <= 1) return 0;
  const delay = options.retryBaseDelaySeconds * 2 ** (attempt - 2);
  return Math.min(options.retryMaxDelaySeconds, delay);
}

/**
 * The request body that stops `containers` of the Pod. Every named container must have a
 * containerID in the Pod status (the statusContext pins the request to that container), and there
 * are at most MAX_REQUEST_CONTAINERS of them.
 */
export function buildTerminationRequest(
  pod: PodProjection,
  containers: readonly string[],
  attempt: number,
  options: SidecarTerminatorOptions = DEFAULT_OPTIONS,
  afterPhase = false,
): ContainerRecreateRequest {
  if (containers.length === 0 || containers.length > MAX_REQUEST_CONTAINERS) {
    throw new Error(`a request holds 1 to ${MAX_REQUEST_CONTAINERS} containers, not ${containers.length}`);
  }
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: requestName(pod.uid, attempt),
      namespace: pod.namespace,
      // Created admitted: the statusContext is set from the Pod status and the labels from the Pod.
      labels: {
        [LABEL_NODE_NAME]: pod.nodeName ?? '', [LABEL_POD_UID]: pod.uid, [LABEL_ACTIVE]: 'true', [LABEL_CREATED_BY]: CREATED_BY,
        ...(afterPhase ? { [LABEL_AFTER_PHASE]: 'true' } : {}),
      },
      // Controller reference: garbage-collected with the Pod. No blockOwnerDeletion, which would
      // need permission on pods/finalizers for nothing.
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid, controller: true }],
    },
    spec: {
      podName: pod.name,
      containers: containers.map((name) => ({ name, statusContext: pinnedTo(pod, name) })),
      strategy: { forceRecreate: true, failurePolicy: 'Ignore' },
      activeDeadlineSeconds: deadlineFor(pod, options),
      ttlSecondsAfterFinished: Math.min(MAX_TTL_SECONDS_AFTER_FINISHED, options.ttlSecondsAfterFinished),
    },
  };
}

function pinnedTo(pod: PodProjection, container: string): StatusContext {
  const context = statusContextOf(pod.statuses.find((s) => s.name === container));
  if (!context) throw new Error(`container "${container}" of Pod ${pod.namespace}/${pod.name} has no container ID yet`);
  return context;
}

/**
 * Never let the deadline cut a graceful stop short: the Pod's grace period plus a margin at least;
 * but never above the API's maximum, which a grace period of days would pass (and get a 422).
 */
export function deadlineFor(pod: PodProjection, options: SidecarTerminatorOptions): number {
  const grace = pod.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
  const wanted = Math.max(MIN_ACTIVE_DEADLINE_SECONDS, options.activeDeadlineSeconds, grace + DEADLINE_MARGIN_SECONDS);
  return Math.min(MAX_ACTIVE_DEADLINE_SECONDS, wanted);
}
