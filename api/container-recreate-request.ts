// The ContainerRecreateRequest API (sidecar-terminator.dev/v1alpha1). Field names follow
// OpenKruise's apps.kruise.io/v1alpha1 CRR so that users and tools that know it know this one.

import { resourcePath } from '../common/kube/paths.ts';

export const GROUP = 'sidecar-terminator.dev';
export const VERSION = 'v1alpha1';
export const KIND = 'ContainerRecreateRequest';
export const PLURAL = 'containerrecreaterequests';
export const API_VERSION = `${GROUP}/${VERSION}`;

export const requestPath = (namespace?: string, name?: string, subresource?: string) => resourcePath(API_VERSION, PLURAL, namespace, name, subresource);

export const LABEL_NODE_NAME = 'crr.sidecar-terminator.dev/node-name';
export const LABEL_POD_UID = 'crr.sidecar-terminator.dev/pod-uid';
export const LABEL_ACTIVE = 'crr.sidecar-terminator.dev/active';
/** Set on the requests the sidecar terminator creates itself. */
export const LABEL_CREATED_BY = 'crr.sidecar-terminator.dev/created-by';
/**
 * `true`: the Pod's phase is set right after this request is created, before its containers may
 * exit (R23); the agent begins their stops once the Pod shows a terminal phase. Anyone who sets it
 * only delays their own request.
 */
export const LABEL_AFTER_PHASE = 'crr.sidecar-terminator.dev/after-phase';
/** Readiness gate / condition type used for `unreadyGracePeriodSeconds`. */
export const READINESS_CONDITION = 'sidecar-terminator.dev/ready';
/** Finalizer that keeps the request until the Pod's readiness has been restored. */
export const READINESS_FINALIZER = 'sidecar-terminator.dev/restore-readiness';

export interface StatusContext {
  /** `<runtime>://<id>` */
  containerID: string;
  restartCount: number;
}

/**
 * The attempt a request pins a container to: the container ID and restart count the Pod status
 * reports for it. Undefined before the container has an ID (not started).
 */
export function statusContextOf(status: { containerID?: string; restartCount: number } | undefined): StatusContext | undefined {
  return status?.containerID ? { containerID: status.containerID, restartCount: status.restartCount } : undefined;
}

/**
 * A container the request is about. Only the name is the creator's to choose: the hook, the ports and
 * the container ID the agent acts on always come from the Pod as the API server and the runtime show
 * it. `statusContext` pins the attempt (filled by the controller when absent); the agent compares it
 * with the Pod status and never addresses a container by it.
 */
export interface CRRContainer {
  name: string;
  statusContext?: StatusContext;
}

/** The most containers one request holds (the CRD's maxItems); a Pod with more sidecars gets several. */
export const MAX_REQUEST_CONTAINERS = 64;
/** The CRD's lower bound of activeDeadlineSeconds. */
export const MIN_ACTIVE_DEADLINE_SECONDS = 3;
/** Upper bounds of the request's durations (the CRD's maximums): every timer stays far below Node's 2^31-1 ms. */
export const MAX_ACTIVE_DEADLINE_SECONDS = 86_400;
export const MAX_TTL_SECONDS_AFTER_FINISHED = 604_800;
export const MAX_STRATEGY_SECONDS = 3_600;

export type FailurePolicy = 'Fail' | 'Ignore';

export interface CRRStrategy {
  failurePolicy?: FailurePolicy;
  orderedRecreate?: boolean;
  forceRecreate?: boolean;
  terminationGracePeriodSeconds?: number;
  unreadyGracePeriodSeconds?: number;
  minStartedSeconds?: number;
}

export interface CRRSpec {
  podName: string;
  containers: CRRContainer[];
  strategy?: CRRStrategy;
  activeDeadlineSeconds?: number;
  ttlSecondsAfterFinished?: number;
}

export type CRRPhase = '' | 'Pending' | 'Recreating' | 'Completed';
export type ContainerRecreatePhase = 'Pending' | 'Recreating' | 'Succeeded' | 'Failed';

export interface ContainerRecreateState {
  name: string;
  phase: ContainerRecreatePhase;
  message?: string;
  isKilled?: boolean;
  /**
   * `<runtime>://<id>` whose preStop hook this request started (written with isKilled, before the
   * hook): another request for that container runs no hook (a hook runs at most once per container).
   */
  preStopContainerID?: string;
  exitCode?: number;
}

export interface CRRStatus {
  phase?: CRRPhase;
  completionTime?: string;
  message?: string;
  containerRecreateStates?: ContainerRecreateState[];
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string | Date;
  deletionTimestamp?: string | Date;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: {
    apiVersion: string;
    kind: string;
    name: string;
    uid: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }[];
}

export interface ContainerRecreateRequest {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec: CRRSpec;
  status?: CRRStatus;
}

export function isCompleted(crr: ContainerRecreateRequest): boolean {
  return crr.status?.phase === 'Completed';
}

/** A request's status on completing it at `nowMs`: phase Completed and its completion time, then `fields`. */
export function completedStatus(nowMs: number, fields: Omit<CRRStatus, 'phase' | 'completionTime'> = {}): CRRStatus {
  return { phase: 'Completed', completionTime: new Date(nowMs).toISOString(), ...fields };
}

/** The uid of the Pod a request is for, as a list (empty before admission labels it): an informer index. */
export function podUidIndex(crr: ContainerRecreateRequest): string[] {
  const uid = crr.metadata.labels?.[LABEL_POD_UID];
  return uid ? [uid] : [];
}
