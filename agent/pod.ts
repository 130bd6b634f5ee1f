// The agent's compact view of a Pod on its node: only what carrying out a request needs.
//
// Not merged with rules/projection.ts's PodProjection, which the agent also keeps, for the Pods the
// Job rules may concern (its fast path): the two read different parts of the Pod (this one the
// preStop hooks, ports, Pod IP, our readiness condition, each container's readiness and start; that
// one the markers, our annotations, images, exit codes and finish times), for Pods chosen
// differently (this one for every Pod of the node, as any request may name it; that one only for
// Pods with a marker and restartPolicy other than Always), and the controller keeps a
// PodProjection for every such Pod of the cluster, where hooks and ports would only cost memory.
import type { V1Pod, V1ContainerStatus } from '@kubernetes/client-node';
import { READINESS_CONDITION } from '../api/container-recreate-request.ts';
import { CONDITION_SIDECAR_TERMINATED } from '../api/names.ts';
import type { ContainerPort, Handler } from '../api/pod.ts';
import { DEFAULT_GRACE_SECONDS } from '../api/pod.ts';
import { toMs } from '../common/time.ts';
import type { ContainerRestartProjection } from '../rules/projection.ts';
import { restartOf } from '../rules/projection.ts';

export type ContainerStatusState = 'waiting' | 'running' | 'terminated' | 'unknown';

export interface AgentContainerStatus {
  name: string;
  /**
   * `<runtime>://<id>` as the API server shows it, absent until the container was created: the only
   * container ID the agent ever stops or execs in.
   */
  containerID?: string;
  restartCount: number;
  ready: boolean;
  state: ContainerStatusState;
  /** When the current container started running (ms since epoch). */
  startedAtMs?: number;
  exitCode?: number;
}

/** A container of the Pod spec: the only source of the hook and ports the agent uses. */
export interface AgentContainerSpec {
  name: string;
  preStop?: Handler;
  /** The container has a hook too large to keep (MAX_KEPT_HOOK_BYTES): read with the Pod from the API when a stop needs it. */
  preStopNotKept?: true;
  ports?: ContainerPort[];
  /** `lifecycle.stopSignal` (e.g. SIGUSR1): the signal the container is stopped with, instead of the image's. */
  stopSignal?: string;
  /** Its own restartPolicy and rules (1.34+): whether kubelet starts it again after an exit (R41). */
  restart?: ContainerRestartProjection;
}

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface AgentPod {
  namespace: string;
  name: string;
  uid: string;
  nodeName: string;
  /** Succeeded and Failed are terminal: kubelet restarts none of the Pod's containers any more. */
  phase: PodPhase;
  restartPolicy: 'Always' | 'OnFailure' | 'Never';
  terminationGracePeriodSeconds: number;
  podIP?: string;
  deleting: boolean;
  containers: AgentContainerSpec[];
  statuses: AgentContainerStatus[];
  /** Our readiness condition: status and when it last changed (ms since epoch). */
  readiness?: { status: string; sinceMs: number };
  /** The controller set the Pod's phase (condition SidecarTerminated=True): what still runs is ours to stop (R45). */
  phaseSetBySidecarTerminator?: boolean;
  /** When it did (the condition's lastTransitionTime, whole seconds, the API server's clock). */
  phaseSetAtMs?: number;
}

/**
 * The largest preStop hook (as JSON) kept for every Pod of the node: a Pod's creator can make a hook
 * as large as the Pod. A larger one is read from the API server only when a request stops its container.
 */
export const MAX_KEPT_HOOK_BYTES = 4096;

/** `wholeHooks`: keep every hook, whatever its size (a Pod read for one stop, not cached). */
export function projectAgentPod(pod: V1Pod, o: { wholeHooks?: boolean } = {}): AgentPod {
  const readiness = pod.status?.conditions?.find((c) => c.type === READINESS_CONDITION);
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    nodeName: pod.spec?.nodeName ?? '',
    phase: (pod.status?.phase as PodPhase | undefined) ?? 'Pending',
    restartPolicy: (pod.spec?.restartPolicy as AgentPod['restartPolicy'] | undefined) ?? 'Always',
    terminationGracePeriodSeconds: pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS,
    podIP: pod.status?.podIP,
    deleting: pod.metadata?.deletionTimestamp !== undefined,
    containers: (pod.spec?.containers ?? []).map((c) => ({
      name: c.name,
      ...keptHook(c.lifecycle?.preStop as Handler | undefined, o.wholeHooks ?? false),
      ports: c.ports as ContainerPort[] | undefined,
      ...(c.lifecycle?.stopSignal ? { stopSignal: c.lifecycle.stopSignal } : {}),
      ...restartOf(c),
    })),
    statuses: (pod.status?.containerStatuses ?? []).map(projectStatus),
    ...phaseSet(pod.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED && c.status === 'True')),
    readiness: readiness && {
      status: readiness.status,
      sinceMs: toMs(readiness.lastTransitionTime) ?? 0,
    },
  };
}

function phaseSet(condition: { lastTransitionTime?: Date | string } | undefined): Pick<AgentPod, 'phaseSetBySidecarTerminator' | 'phaseSetAtMs'> {
  if (!condition) return { phaseSetBySidecarTerminator: false };
  const at = toMs(condition.lastTransitionTime);
  return { phaseSetBySidecarTerminator: true, ...(at !== undefined ? { phaseSetAtMs: at } : {}) };
}

function keptHook(hook: Handler | undefined, whole: boolean): Pick<AgentContainerSpec, 'preStop' | 'preStopNotKept'> {
  if (!hook) return {};
  return whole || JSON.stringify(hook).length <= MAX_KEPT_HOOK_BYTES ? { preStop: hook } : { preStopNotKept: true };
}

function projectStatus(s: V1ContainerStatus): AgentContainerStatus {
  const state: ContainerStatusState = s.state?.terminated
    ? 'terminated'
    : s.state?.running
      ? 'running'
      : s.state?.waiting
        ? 'waiting'
        : 'unknown';
  return {
    name: s.name,
    containerID: s.containerID || undefined,
    restartCount: s.restartCount,
    ready: s.ready,
    state,
    startedAtMs: toMs(s.state?.running?.startedAt),
    exitCode: s.state?.terminated?.exitCode,
  };
}
