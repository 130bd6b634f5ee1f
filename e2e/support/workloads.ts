// Reading Jobs, Pods and container statuses in e2e tests.
import type {
  BatchV1Api,
  CoreV1Api,
  V1ContainerStatus,
  V1Job,
  V1JobCondition,
  V1Pod,
} from '@kubernetes/client-node';

/** The Job's condition of this type if it is True (e.g. Complete, Failed, SuccessCriteriaMet). */
export function jobCondition(job: V1Job, type: string): V1JobCondition | undefined {
  return job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

export async function readJobCondition(
  batch: BatchV1Api,
  namespace: string,
  name: string,
  type: string,
): Promise<V1JobCondition | undefined> {
  return jobCondition(await batch.readNamespacedJob({ name, namespace }), type);
}

/** The Pods of a Job (by the controller's job-name label). */
export async function jobPods(core: CoreV1Api, namespace: string, jobName: string): Promise<V1Pod[]> {
  const list = await core.listNamespacedPod({
    namespace,
    labelSelector: `batch.kubernetes.io/job-name=${jobName}`,
  });
  return list.items;
}

/** All container statuses of a Pod: init containers (incl. native sidecars) then regular ones. */
export function containerStatuses(pod: V1Pod): V1ContainerStatus[] {
  return [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
}

export function containerStatus(pod: V1Pod, name: string): V1ContainerStatus | undefined {
  return containerStatuses(pod).find((s) => s.name === name);
}

export async function readContainerStatuses(
  core: CoreV1Api,
  namespace: string,
  podName: string,
): Promise<V1ContainerStatus[]> {
  return containerStatuses(await core.readNamespacedPod({ name: podName, namespace }));
}

/** 'running' | 'terminated(exit N, reason)' | 'waiting(reason)' | 'unknown', for messages. */
export function describeState(s: V1ContainerStatus | undefined): string {
  if (!s?.state) return 'unknown';
  if (s.state.running) return 'running';
  if (s.state.terminated) return `terminated(exit ${s.state.terminated.exitCode}, ${s.state.terminated.reason ?? ''})`;
  if (s.state.waiting) return `waiting(${s.state.waiting.reason ?? ''})`;
  return 'unknown';
}

/** A Date from a client-node timestamp field (Date or RFC 3339 string). */
export function toDate(t: Date | string | undefined): Date | undefined {
  if (t === undefined) return undefined;
  const d = t instanceof Date ? t : new Date(t);
  return Number.isNaN(d.getTime()) ? undefined : d;
}
