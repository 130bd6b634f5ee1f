// Test helpers: terse Pod and request builders for the sidecar terminator's table-driven tests.
import type { V1Container, V1ContainerStatus, V1EnvVar, V1Pod } from '@kubernetes/client-node';
import type { NodeKind } from '../../rules/classify.ts';
import { ENV_IGNORE_EXIT_CODE, ENV_TERMINATE_WHEN_JOB_EXIT, ENV_TERMINATE_WITH_IMAGE } from '../../api/names.ts';
import type { DecideContext } from '../../rules/decide.ts';
import { decide } from '../../rules/decide.ts';
import type { Decision } from '../../rules/decision.ts';
import { projectPod } from '../../rules/projection.ts';
import type { ExistingRequest, ExistingRequestContainer, SidecarTerminatorOptions } from '../../rules/requests.ts';
import { DEFAULT_OPTIONS, requestName } from '../../rules/requests.ts';

export const UID = '0f7e8d6c-1111-2222-3333-444455556666';
export const NOW = Date.parse('2025-01-01T00:10:00Z');
/** When the fixture Pods were created and started. */
export const POD_START = NOW - 600_000;
/** The node the fixture Pods run on, and the labels of their own requests. */
export const NODE = 'node-1';

/** `noStatus`: no containerStatuses entry at all. */
export type StateSpec = 'running' | 'waiting' | { exit: number } | 'noStatus';

export interface ContainerSpec {
  name: string;
  env?: V1EnvVar[];
  image?: string;
  state?: StateSpec;
  /** Container ID; `null` for none (not created yet). Default: derived from the name. */
  id?: string | null;
  restarts?: number;
  /** For a terminated state: how long before NOW it finished (default 10 s); `null` for no finishedAt. */
  finishedAgoMs?: number | null;
  /** For a waiting state: its reason (default ContainerCreating). */
  waitingReason?: string;
}

export interface PodSpec {
  containers: ContainerSpec[];
  restartPolicy?: string;
  phase?: string;
  deleting?: boolean;
  annotations?: Record<string, string>;
  initContainers?: V1Container[];
  nodeName?: string;
  terminationGracePeriodSeconds?: number;
}

export const WHEN_JOB_EXIT: V1EnvVar = { name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'true' };
export const IGNORE_EXIT_CODE: V1EnvVar = { name: ENV_IGNORE_EXIT_CODE, value: 'true' };
export const withImage = (image: string): V1EnvVar => ({ name: ENV_TERMINATE_WITH_IMAGE, value: image });

export const main = (name: string, state: StateSpec = 'running', extra: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name,
  state,
  ...extra,
});

/** A request-kind sidecar (env WHEN_JOB_EXIT=true) plus any extra env. */
export const sidecar = (name: string, state: StateSpec = 'running', env: V1EnvVar[] = [], extra: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name,
  state,
  env: [WHEN_JOB_EXIT, ...env],
  ...extra,
});

export const imageSidecar = (name: string, image: string, state: StateSpec = 'running', extra: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name,
  state,
  env: [withImage(image)],
  ...extra,
});

export const exited = (code: number): StateSpec => ({ exit: code });

export function makePod(spec: PodSpec): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'job-pod',
      namespace: 'ns',
      uid: UID,
      resourceVersion: '42',
      creationTimestamp: new Date(POD_START),
      ...(spec.annotations ? { annotations: spec.annotations } : {}),
      ...(spec.deleting ? { deletionTimestamp: new Date(NOW) } : {}),
    },
    spec: {
      nodeName: spec.nodeName ?? NODE,
      ...(spec.restartPolicy !== undefined ? { restartPolicy: spec.restartPolicy } : { restartPolicy: 'Never' }),
      ...(spec.terminationGracePeriodSeconds !== undefined ? { terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds } : {}),
      ...(spec.initContainers ? { initContainers: spec.initContainers } : {}),
      containers: spec.containers.map((c) => ({ name: c.name, image: c.image ?? `${c.name}:1`, ...(c.env ? { env: c.env } : {}) })),
    },
    status: {
      phase: spec.phase ?? 'Running',
      startTime: new Date(POD_START),
      containerStatuses: spec.containers.filter((c) => c.state !== 'noStatus').map(toStatus),
    },
  };
}

function toStatus(c: ContainerSpec): V1ContainerStatus {
  const state = c.state ?? 'running';
  const id = c.id === undefined ? `containerd://${c.name}-id` : c.id;
  const finishedAgo = c.finishedAgoMs === undefined ? 10_000 : c.finishedAgoMs;
  return {
    name: c.name,
    image: c.image ?? `${c.name}:1`,
    imageID: '',
    ready: state === 'running',
    restartCount: c.restarts ?? 0,
    ...(id ? { containerID: id } : {}),
    state:
      state === 'running'
        ? { running: { startedAt: new Date(NOW - 60_000) } }
        : state === 'waiting'
          ? { waiting: { reason: c.waitingReason ?? 'ContainerCreating' } }
          : {
              terminated: {
                exitCode: (state as { exit: number }).exit,
                reason: 'Exited',
                ...(finishedAgo === null ? {} : { finishedAt: new Date(NOW - finishedAgo) }),
              },
            },
  };
}

export function decideFor(
  pod: V1Pod,
  node: NodeKind = 'real',
  requests: ExistingRequest[] = [],
  extra: Partial<DecideContext> = {},
): Decision {
  return decide(projectPod(pod), node, { requests, nowMs: NOW, ...extra });
}

export interface RequestSpec {
  attempt?: number;
  name?: string;
  completed?: boolean;
  completedAgoMs?: number;
  message?: string;
  containers: Array<ExistingRequestContainer | string>;
  /** Its pod-uid and node-name labels; default this Pod's (UID, NODE), `null` for none. */
  labels?: { podUid?: string; nodeName?: string } | null;
}

/** One of our requests (by attempt), completed `completedAgoMs` before NOW unless active. */
export function request(spec: RequestSpec): ExistingRequest {
  const completed = spec.completed ?? true;
  const labels: { podUid?: string; nodeName?: string } = spec.labels === null ? {} : { podUid: UID, nodeName: NODE, ...spec.labels };
  return {
    name: spec.name ?? requestName(UID, spec.attempt ?? 1),
    ...(labels.podUid !== undefined ? { podUidLabel: labels.podUid } : {}),
    ...(labels.nodeName !== undefined ? { nodeNameLabel: labels.nodeName } : {}),
    phase: completed ? 'Completed' : 'Recreating',
    completed,
    ...(spec.message ? { message: spec.message } : {}),
    creationTimeMs: NOW - 120_000,
    ...(completed ? { completionTimeMs: NOW - (spec.completedAgoMs ?? 1_000) } : {}),
    containers: spec.containers.map((c) =>
      typeof c === 'string' ? { name: c, statusContext: { containerID: `containerd://${c}-id`, restartCount: 0 } } : c,
    ),
  };
}

export const FAST_RETRY: SidecarTerminatorOptions = { ...DEFAULT_OPTIONS, retryMaxDelaySeconds: 60 };

/** Narrow a decision to one kind, failing the test otherwise. */
export function expectKind<K extends Decision['kind']>(decision: Decision, kind: K): Extract<Decision, { kind: K }> {
  if (decision.kind !== kind) {
    throw new Error(`expected ${kind}, got ${decision.kind}: ${decision.message}`);
  }
  return decision as Extract<Decision, { kind: K }>;
}

export const reasons = (decision: Decision): string[] => decision.events.map((e) => e.reason);
