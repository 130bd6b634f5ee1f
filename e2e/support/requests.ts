// Requests written by hand, as a user or a controller of theirs would, and the long-running Pods
// they name.
import * as k8s from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import type { CRRSpec } from '../../api/container-recreate-request.ts';
import { GROUP, PLURAL, VERSION } from '../../api/container-recreate-request.ts';
import { clients, clusterEnv } from './cluster.ts';
import { waitFor } from './wait.ts';

export async function createRequest(namespace: string, name: string, spec: CRRSpec, labels?: Record<string, string>): Promise<void> {
  await clients().kc.makeApiClient(k8s.CustomObjectsApi).createNamespacedCustomObject({
    group: GROUP, version: VERSION, plural: PLURAL, namespace,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest', metadata: { name, ...(labels ? { labels } : {}) }, spec },
  });
}

/** A bare Pod on the cluster's node whose one container, `worker`, runs `onTerm` and then loops. */
export function loopPod(name: string, restartPolicy: 'Always' | 'Never', onTerm: string): V1Pod {
  return {
    metadata: { name },
    spec: {
      nodeName: clusterEnv().nodeName,
      restartPolicy,
      terminationGracePeriodSeconds: 30,
      containers: [{
        name: 'worker',
        image: 'sidecar-terminator.local/busybox:1',
        imagePullPolicy: 'Never',
        command: ['sh', '-c', `${onTerm}; while true; do sleep 1; done`],
      }],
    },
  };
}

/** Creates the Pod and returns it once its first container runs. */
export async function runningPod(namespace: string, pod: V1Pod, timeoutMs = 60_000): Promise<V1Pod> {
  const { core } = clients();
  await core.createNamespacedPod({ namespace, body: pod });
  return waitFor(async () => {
    const p = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    return p.status?.containerStatuses?.[0]?.state?.running ? p : undefined;
  }, { description: `Pod ${pod.metadata!.name} running`, timeoutMs });
}
