// Pure decisions of the node agent: given a request, its Pod and what the runtime says about each
// target container, what the request's status should be and which containers to stop now.
// Everything here is computed from current state only, so a restarted agent decides the same.
import type {
  ContainerRecreateRequest,
  ContainerRecreateState,
  CRRContainer,
  CRRStatus,
  Handler,
  ContainerPort,
} from '../crr/types.ts';
import { LABEL_POD_UID } from '../crr/types.ts';
import type { AgentContainerStatus, AgentPod } from './pod.ts';
import { parseContainerID } from './runtime/container-id.ts';
import type { RuntimeContainer } from './runtime/types.ts';

/** What the runtime said about a request's target container (`statusContext.containerID`). */
export interface RuntimeView {
  container?: RuntimeContainer;
  /** The runtime could not be asked (down, unknown prefix): the container's state is unknown. */
  error?: string;
}

export interface StopOrder {
  name: string;
  /** `<runtime>://<id>` of the container to stop. */
  containerID: string;
  graceSeconds: number;
  preStop?: Handler;
  ports?: ContainerPort[];
}

export interface RequestPlan {
  status: CRRStatus;
  stops: StopOrder[];
  /** Look again after this long even if nothing changes (a timer, not a retry). */
  requeueAfterMs?: number;
}

export interface RequestInputs {
  crr: ContainerRecreateRequest;
  pod: AgentPod;
  nodeName: string;
  /** Name of an older unfinished request for the same Pod, if any: this one waits behind it. */
  queuedBehind?: string;
  runtime: ReadonlyMap<string, RuntimeView>;
  nowMs: number;
}

type ContainerStep =
  | { kind: 'keep'; state: ContainerRecreateState; requeueAfterMs?: number }
  | { kind: 'stop'; state: ContainerRecreateState; containerID: string };

const FINAL = new Set(['Succeeded', 'Failed']);

export function isFinal(state: ContainerRecreateState | undefined): boolean {
  return state !== undefined && FINAL.has(state.phase);
}

/** Whether kubelet restarts a container that exited with `exitCode` under this restart policy. */
export function kubeletRestarts(restartPolicy: AgentPod['restartPolicy'], exitCode: number | undefined): boolean {
  return restartPolicy === 'Always' || (restartPolicy === 'OnFailure' && exitCode !== 0);
}

export function planRequest(input: RequestInputs): RequestPlan {
  const { crr, pod, nowMs } = input;
  const recorded = new Map((crr.status?.containerRecreateStates ?? []).map((s) => [s.name, s]));

  const refusal = refuse(input);
  if (refusal) return complete(crr, recorded, refusal, nowMs);

  if (input.queuedBehind) {
    const states = crr.spec.containers.map((c) => recorded.get(c.name) ?? pending(c.name));
    return { status: { phase: 'Pending', message: `waiting for ${input.queuedBehind} on the same Pod`, containerRecreateStates: states }, stops: [] };
  }

  const strategy = crr.spec.strategy ?? {};
  const graceSeconds = strategy.terminationGracePeriodSeconds ?? pod.terminationGracePeriodSeconds;
  const unready = unreadyWait(input);
  const failFast = (strategy.failurePolicy ?? 'Fail') === 'Fail';

  const states: ContainerRecreateState[] = [];
  const stops: StopOrder[] = [];
  let requeueAfterMs: number | undefined;
  let blocked = false; // orderedRecreate: a container not yet Succeeded holds back the rest

  for (const container of crr.spec.containers) {
    const previous = recorded.get(container.name);
    if (blocked && !isFinal(previous)) {
      states.push(previous ?? pending(container.name));
      continue;
    }
    const step = stepContainer(container, previous, input);
    if (step.kind === 'stop' && unready !== undefined) {
      states.push({ ...(previous ?? pending(container.name)), message: unready.message });
      requeueAfterMs = minDefined(requeueAfterMs, unready.afterMs);
    } else if (step.kind === 'stop') {
      states.push(step.state);
      const spec = pod.containers.find((c) => c.name === container.name);
      stops.push({
        name: container.name,
        containerID: step.containerID,
        graceSeconds,
        preStop: container.preStop ?? spec?.preStop,
        ports: container.ports ?? spec?.ports,
      });
    } else {
      states.push(step.state);
      requeueAfterMs = minDefined(requeueAfterMs, step.requeueAfterMs);
    }
    const last = states[states.length - 1]!;
    if (strategy.orderedRecreate && last.phase !== 'Succeeded' && last.phase !== 'Failed') blocked = true;
  }

  const failed = states.filter((s) => s.phase === 'Failed');
  if ((failFast && failed.length > 0) || states.every(isFinal)) {
    // With failurePolicy Fail, nothing more is stopped once a container failed.
    return { status: completedStatus(states, failed, nowMs), stops: failFast && failed.length > 0 ? [] : stops };
  }
  return { status: { phase: 'Recreating', containerRecreateStates: states }, stops, requeueAfterMs };
}

/** A reason the request cannot be carried out at all, or undefined. */
function refuse({ crr, pod, nodeName, nowMs }: RequestInputs): string | undefined {
  const uidLabel = crr.metadata.labels?.[LABEL_POD_UID];
  if (uidLabel && uidLabel !== pod.uid) return `Pod ${pod.name} was replaced (uid ${pod.uid}, request is for ${uidLabel})`;
  if (pod.nodeName !== nodeName) return `Pod ${pod.name} runs on node ${pod.nodeName || '(none)'}, not ${nodeName}`;
  if (pod.deleting) return `Pod ${pod.name} is being deleted`;
  const deadline = crr.spec.activeDeadlineSeconds;
  const created = crr.metadata.creationTimestamp ? new Date(crr.metadata.creationTimestamp).getTime() : undefined;
  if (deadline !== undefined && created !== undefined && nowMs > created + deadline * 1000) {
    return `activeDeadlineSeconds (${deadline}s) passed before the request finished`;
  }
  return undefined;
}

function stepContainer(container: CRRContainer, previous: ContainerRecreateState | undefined, input: RequestInputs): ContainerStep {
  const { pod, crr, nowMs } = input;
  const name = container.name;
  const keep = (state: ContainerRecreateState, requeueAfterMs?: number): ContainerStep => ({ kind: 'keep', state, requeueAfterMs });
  if (previous && isFinal(previous)) return keep(previous);

  const isKilled = previous?.isKilled ?? false;
  const context = container.statusContext;
  if (!context) return keep({ name, phase: 'Pending', isKilled, message: 'waiting for statusContext to be filled on admission' });
  if (!parseContainerID(context.containerID)) {
    return keep({ name, phase: 'Failed', isKilled, message: `malformed containerID ${JSON.stringify(context.containerID)}` });
  }
  const status = pod.statuses.find((s) => s.name === name);
  if (!pod.containers.some((c) => c.name === name) || !status) {
    return keep({ name, phase: 'Failed', isKilled, message: `Pod ${pod.name} has no container ${name}` });
  }

  const strategy = crr.spec.strategy ?? {};
  if (wasRecreated(status, context)) {
    if (strategy.forceRecreate && !isKilled) {
      if (status.containerID && status.state === 'running') {
        return { kind: 'stop', containerID: status.containerID, state: { name, phase: 'Recreating', isKilled: true } };
      }
      return keep({ name, phase: 'Recreating', isKilled, message: 'waiting for the recreated container to start before stopping it' });
    }
    return recreatedProgress(name, isKilled, status, strategy.minStartedSeconds ?? 0, nowMs);
  }

  const view = input.runtime.get(name) ?? {};
  if (view.error) return keep({ ...(previous ?? pending(name)), message: `runtime: ${view.error}` });
  const current = view.container;
  if (!current) {
    return keep({ name, phase: 'Pending', isKilled, message: `container ${context.containerID} not found on node ${input.nodeName}` });
  }
  if (current.state === 'exited') {
    const state: ContainerRecreateState = { name, phase: 'Succeeded', isKilled, exitCode: current.exitCode };
    return keep(kubeletRestarts(pod.restartPolicy, current.exitCode) ? { ...state, phase: 'Recreating' } : state);
  }
  // Still the same container, still running: stop it. If an earlier agent died mid-stop
  // (isKilled already recorded), the stop is resumed: a container left running would hang the Job.
  return { kind: 'stop', containerID: context.containerID, state: { name, phase: 'Recreating', isKilled: true } };
}

function wasRecreated(status: AgentContainerStatus, context: { containerID: string; restartCount: number }): boolean {
  const idChanged = status.containerID !== undefined && status.containerID !== context.containerID;
  return idChanged || status.restartCount > context.restartCount;
}

/** A recreated container counts once it is running, ready and older than minStartedSeconds. */
function recreatedProgress(name: string, isKilled: boolean, status: AgentContainerStatus, minStartedSeconds: number, nowMs: number): ContainerStep {
  if (status.state !== 'running' || !status.ready || status.startedAtMs === undefined) {
    return { kind: 'keep', state: { name, phase: 'Recreating', isKilled } };
  }
  const runningMs = nowMs - status.startedAtMs;
  const neededMs = minStartedSeconds * 1000;
  if (runningMs <= neededMs) {
    return { kind: 'keep', state: { name, phase: 'Recreating', isKilled }, requeueAfterMs: neededMs - runningMs + 1 };
  }
  return { kind: 'keep', state: { name, phase: 'Succeeded', isKilled } };
}

/** With unreadyGracePeriodSeconds, stops wait until the Pod has been not-ready that long. */
function unreadyWait({ crr, pod, nowMs }: RequestInputs): { message: string; afterMs: number | undefined } | undefined {
  const seconds = crr.spec.strategy?.unreadyGracePeriodSeconds;
  if (!seconds) return undefined;
  if (pod.readiness?.status !== 'False') {
    return { message: 'waiting for the Pod to be marked not-ready', afterMs: undefined };
  }
  const remaining = pod.readiness.sinceMs + seconds * 1000 - nowMs;
  if (remaining <= 0) return undefined;
  return { message: `waiting ${Math.ceil(remaining / 1000)}s of unreadyGracePeriodSeconds`, afterMs: remaining };
}

function complete(crr: ContainerRecreateRequest, recorded: Map<string, ContainerRecreateState>, message: string, nowMs: number): RequestPlan {
  const states = crr.spec.containers.map((c) => recorded.get(c.name) ?? pending(c.name));
  return { status: { phase: 'Completed', completionTime: new Date(nowMs).toISOString(), message, containerRecreateStates: states }, stops: [] };
}

function completedStatus(states: ContainerRecreateState[], failed: ContainerRecreateState[], nowMs: number): CRRStatus {
  const status: CRRStatus = { phase: 'Completed', completionTime: new Date(nowMs).toISOString(), containerRecreateStates: states };
  if (failed.length > 0) status.message = failed.map((s) => `${s.name}: ${s.message ?? 'failed'}`).join('; ');
  return status;
}

function pending(name: string): ContainerRecreateState {
  return { name, phase: 'Pending', isKilled: false };
}

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}
