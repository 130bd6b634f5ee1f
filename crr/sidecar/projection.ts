// The compact view of a Pod kept for every watched Pod (spec section 6): only what the rules read.
import type { V1Container, V1ContainerStatus, V1EnvVar, V1Pod } from '@kubernetes/client-node';
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_SIDECARS,
  CONDITION_SIDECAR_TERMINATED,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  ENV_TERMINATE_WITH_IMAGE,
} from './constants.ts';

/** Markers read from a container's env (literal `value` only). */
export interface EnvMarkers {
  /** ENV_TERMINATE_WHEN_JOB_EXIT is `true` in any letter case. */
  whenJobExit: boolean;
  /** ENV_TERMINATE_WITH_IMAGE, trimmed; absent when empty. */
  withImage?: string;
  /** ENV_IGNORE_EXIT_CODE is `true`; whether it counts is classify's business. */
  ignoreExitCode: boolean;
}

export interface ContainerProjection {
  name: string;
  image: string;
  markers: EnvMarkers;
}

/** The current state only: the rules never read lastState or timestamps. */
export type ContainerState =
  | { kind: 'running' }
  | { kind: 'waiting'; reason?: string }
  | { kind: 'terminated'; exitCode: number; reason?: string };

export interface ContainerStatusProjection {
  name: string;
  /** `<runtime>://<id>`, absent until the container was created. */
  containerID?: string;
  restartCount: number;
  state: ContainerState;
}

export interface PodProjection {
  namespace: string;
  name: string;
  uid: string;
  nodeName?: string;
  resourceVersion?: string;
  phase?: string;
  /** Defaults to `Always`, as the API server does. */
  restartPolicy: string;
  deleting: boolean;
  terminationGracePeriodSeconds?: number;
  /** Raw values of our two annotations; parsed by classify. */
  annotations: { sidecars?: string; ignoreExitCode?: string };
  /** Only the names: init containers are never classified, but an annotation naming one gets a precise warning. */
  initContainerNames: string[];
  containers: ContainerProjection[];
  statuses: ContainerStatusProjection[];
  /** Our SidecarTerminated condition, if present. */
  sidecarTerminated?: { status: string; reason?: string; message?: string };
}

export function projectPod(pod: V1Pod): PodProjection {
  const meta = pod.metadata ?? {};
  const spec = pod.spec;
  const status = pod.status;
  const condition = status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED);
  return {
    namespace: meta.namespace ?? '',
    name: meta.name ?? '',
    uid: meta.uid ?? '',
    nodeName: spec?.nodeName || undefined,
    resourceVersion: meta.resourceVersion,
    phase: status?.phase,
    restartPolicy: spec?.restartPolicy ?? 'Always',
    deleting: meta.deletionTimestamp != null,
    terminationGracePeriodSeconds: spec?.terminationGracePeriodSeconds ?? undefined,
    annotations: {
      sidecars: meta.annotations?.[ANNOTATION_SIDECARS],
      ignoreExitCode: meta.annotations?.[ANNOTATION_IGNORE_EXIT_CODE],
    },
    initContainerNames: (spec?.initContainers ?? []).map((c) => c.name),
    containers: (spec?.containers ?? []).map(projectContainer),
    statuses: (status?.containerStatuses ?? []).map(projectStatus),
    sidecarTerminated: condition && {
      status: condition.status,
      reason: condition.reason,
      message: condition.message,
    },
  };
}

function projectContainer(container: V1Container): ContainerProjection {
  return { name: container.name, image: container.image ?? '', markers: readMarkers(container.env ?? []) };
}

export function readMarkers(env: readonly V1EnvVar[]): EnvMarkers {
  const whenJobExit = literalEnv(env, ENV_TERMINATE_WHEN_JOB_EXIT);
  const withImage = literalEnv(env, ENV_TERMINATE_WITH_IMAGE)?.trim();
  const ignoreExitCode = literalEnv(env, ENV_IGNORE_EXIT_CODE);
  return {
    whenJobExit: isTrue(whenJobExit),
    ...(withImage ? { withImage } : {}),
    ignoreExitCode: isTrue(ignoreExitCode),
  };
}

/**
 * The literal value the container would see. The last entry of a name wins (as in kubelet), and an
 * entry with `valueFrom` yields no literal value at all: we never resolve references.
 */
function literalEnv(env: readonly V1EnvVar[], name: string): string | undefined {
  let value: string | undefined;
  for (const entry of env) {
    if (entry.name !== name) continue;
    value = entry.valueFrom ? undefined : entry.value;
  }
  return value;
}

function isTrue(value: string | undefined): boolean {
  return value?.toLowerCase() === 'true';
}

function projectStatus(status: V1ContainerStatus): ContainerStatusProjection {
  return {
    name: status.name,
    ...(status.containerID ? { containerID: status.containerID } : {}),
    restartCount: status.restartCount ?? 0,
    state: projectState(status),
  };
}

function projectState(status: V1ContainerStatus): ContainerState {
  const state = status.state;
  if (state?.terminated) {
    return { kind: 'terminated', exitCode: state.terminated.exitCode, reason: state.terminated.reason };
  }
  if (state?.running) return { kind: 'running' };
  // No state at all is what kubelet reports before the container exists: waiting.
  return { kind: 'waiting', reason: state?.waiting?.reason };
}
