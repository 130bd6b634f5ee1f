// Jobs with sidecars on the e2e cluster: building them, waiting for them, and printing what happened.
import * as k8s from '@kubernetes/client-node';
import type { V1Container, V1Job, V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { GROUP, PLURAL, VERSION } from '../../api/container-recreate-request.ts';
import { apiStatus, clients, clusterEnv } from './cluster.ts';
import { waitFor } from './wait.ts';
import { containerStatus, jobCondition, jobPods, toDate } from './workloads.ts';

export const BUSYBOX = 'sidecar-terminator.local/busybox:1';
/** The same busybox tree under another name (its entrypoint sleeps; a command replaces it): an image update. */
export const PAUSE = 'sidecar-terminator.local/pause:1';
export const SIDECAR_MARK = { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' };
export const IGNORE_EXIT_MARK = { name: 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE', value: 'true' };

/** A sidecar that says which signal came (any of TERM, INT, USR1) and exits 0 on it. */
export const SIGNAL_LOGGER = [
  ...['TERM', 'INT', 'USR1'].map((sig) => `trap 'echo "got SIG${sig}"; exit 0' ${sig}`),
  'echo ready',
  // sleep in the background: a trapped signal interrupts `wait` at once.
  'while :; do sleep 1 & wait $!; done',
].join('\n');

/** A log shipper that takes 3 s after its SIGTERM to flush, says so, and exits 0. */
export const FLUSHING_SHIPPER = [
  `trap 'echo "got SIGTERM"; sleep 3; echo "flushed"; exit 0' TERM`,
  'echo ready',
  'while :; do sleep 1 & wait $!; done',
].join('\n');

/** A sidecar loop that exits with `code` on SIGTERM. */
export function stopOnTerm(code: number): string {
  return `trap 'exit ${code}' TERM; while true; do sleep 1; done`;
}

export function container(name: string, script: string, extra: Partial<V1Container> = {}): V1Container {
  return { name, image: BUSYBOX, imagePullPolicy: 'Never', command: ['sh', '-c', script], ...extra };
}

export interface JobSpec {
  restartPolicy: 'Never' | 'OnFailure';
  containers: V1Container[];
  initContainers?: V1Container[];
  annotations?: Record<string, string>;
  grace?: number;
  backoffLimit?: number;
  volumes?: k8s.V1Volume[];
  /** spec.os: the API requires it for a container's lifecycle.stopSignal. */
  os?: k8s.V1PodOS;
  /** The node to run on (default: node 1). */
  nodeName?: string;
}

export async function runJob(namespace: string, name: string, spec: JobSpec): Promise<void> {
  const job: V1Job = {
    metadata: { name },
    spec: {
      backoffLimit: spec.backoffLimit ?? 0,
      template: {
        metadata: { annotations: spec.annotations },
        spec: {
          nodeName: spec.nodeName ?? clusterEnv().nodeName,
          restartPolicy: spec.restartPolicy,
          terminationGracePeriodSeconds: spec.grace ?? 10,
          // The local cluster has no cluster DNS and no test Pod needs one: with the default
          // policy kubelet gives every Pod a MissingClusterDNS Warning.
          dnsPolicy: 'Default',
          containers: spec.containers,
          initContainers: spec.initContainers,
          volumes: spec.volumes,
          ...(spec.os ? { os: spec.os } : {}),
        },
      },
    },
  };
  await clients().batch.createNamespacedJob({ namespace, body: job });
}

export async function finishedJob(namespace: string, name: string, timeoutMs = 120_000): Promise<{ job: V1Job; type: string }> {
  const { batch } = clients();
  return waitFor(async () => {
    const job = await batch.readNamespacedJob({ namespace, name });
    for (const type of ['Complete', 'Failed']) {
      if (jobCondition(job, type)?.status === 'True') return { job, type };
    }
    return undefined;
  }, { description: `Job ${name} finished`, timeoutMs });
}

export async function onlyPod(namespace: string, job: string): Promise<V1Pod> {
  const pods = await jobPods(clients().core, namespace, job);
  if (pods.length !== 1) throw new Error(`Job ${job} has ${pods.length} Pods`);
  return pods[0]!;
}

export async function requestsFor(pod: V1Pod): Promise<ContainerRecreateRequest[]> {
  const custom = clients().kc.makeApiClient(k8s.CustomObjectsApi);
  const list = (await custom.listNamespacedCustomObject({
    group: GROUP, version: VERSION, plural: PLURAL, namespace: pod.metadata!.namespace!,
    labelSelector: `crr.sidecar-terminator.dev/pod-uid=${pod.metadata!.uid}`,
  })) as { items: ContainerRecreateRequest[] };
  return list.items;
}

/** A request by name, or undefined when there is none. */
export async function readRequest(namespace: string, name: string): Promise<ContainerRecreateRequest | undefined> {
  const custom = clients().kc.makeApiClient(k8s.CustomObjectsApi);
  try {
    return (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name })) as ContainerRecreateRequest;
  } catch (err) {
    if (apiStatus(err) === 404) return undefined;
    throw err;
  }
}

/** The request once its phase is Completed. */
export function completedRequest(namespace: string, name: string, timeoutMs = 60_000): Promise<ContainerRecreateRequest> {
  return waitFor(async () => {
    const r = await readRequest(namespace, name);
    return r?.status?.phase === 'Completed' ? r : undefined;
  }, { description: `request ${name} Completed`, timeoutMs });
}

export async function podEvents(pod: V1Pod): Promise<string[]> {
  const list = await clients().core.listNamespacedEvent({ namespace: pod.metadata!.namespace!, fieldSelector: `involvedObject.uid=${pod.metadata!.uid}` });
  return list.items.map((e) => `${e.type} ${e.reason}: ${e.message}`);
}

export function finishedAt(pod: V1Pod, name: string): Date | undefined {
  return toDate(containerStatus(pod, name)?.state?.terminated?.finishedAt);
}

/** Main finished → stop requested → sidecar finished → Job finished, in ms from the first (1 s precision: Pod status times). */
export function timeline(title: string, job: V1Job, pod: V1Pod, main: string, sidecar: string, request?: ContainerRecreateRequest): string {
  const points: [string, Date | undefined][] = [
    ['main finished', finishedAt(pod, main)],
    ['sidecar stop requested', request ? toDate(request.metadata.creationTimestamp) : undefined],
    ['sidecar finished', finishedAt(pod, sidecar)],
    ['Job finished', toDate(jobCondition(job, 'Complete')?.lastTransitionTime ?? jobCondition(job, 'Failed')?.lastTransitionTime)],
  ];
  const start = points[0]![1]?.getTime() ?? 0;
  return `${title}: ${points.map(([what, at]) => `${what} ${at ? `+${at.getTime() - start}ms` : '-'}`).join(', ')}`;
}
