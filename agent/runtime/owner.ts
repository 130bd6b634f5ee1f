// Whose container it is, by the labels kubelet puts on every container it creates, whichever
// runtime (CRI or Docker Engine, through cri-dockerd) created it.
import type { ContainerOwner } from './types.ts';

/** The labels kubelet sets on the containers it creates (kubelet's kuberuntime labels). */
export const KUBELET_LABELS = {
  podUid: 'io.kubernetes.pod.uid',
  podNamespace: 'io.kubernetes.pod.namespace',
  podName: 'io.kubernetes.pod.name',
  container: 'io.kubernetes.container.name',
} as const;

/** The Pod container the labels name; undefined unless all four labels are there and not empty. */
export function ownerFromLabels(labels: Readonly<Record<string, string>> | null | undefined): ContainerOwner | undefined {
  const podUid = labels?.[KUBELET_LABELS.podUid];
  const podNamespace = labels?.[KUBELET_LABELS.podNamespace];
  const podName = labels?.[KUBELET_LABELS.podName];
  const container = labels?.[KUBELET_LABELS.container];
  if (!podUid || !podNamespace || !podName || !container) return undefined;
  return { podUid, podNamespace, podName, container };
}
