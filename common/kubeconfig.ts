import * as k8s from '@kubernetes/client-node';

/** A kubeconfig file when one is named, else the in-cluster ServiceAccount. */
export function loadKubeConfig(path?: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromCluster();
  return kc;
}
