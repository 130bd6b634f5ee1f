// Access to the local e2e cluster started by e2e/cluster/up.sh.
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';

/** Values from the env file up.sh writes ($ST_CLUSTER_DIR/env). */
export interface ClusterEnv {
  clusterDir: string;
  kubeconfig: string;
  /** Node 1, named after the host. */
  nodeName: string;
  /** Every node, node 1 first (more than one with ST_NODES, see e2e/cluster/lib.sh). */
  nodeNames: string[];
  nodeIP: string;
  /** Node 1's containerd socket. */
  containerdSocket: string;
  /** Each node's containerd socket as the host sees it, in the order of nodeNames. */
  containerdSockets: string[];
  containerdNamespace: string;
  k8sBinDir: string;
  /** The Kubernetes release the cluster runs (e2e/cluster/versions.env). */
  k8sVersion: string;
  imagesDir: string;
  podCIDR: string;
  serviceIP: string;
  logsDir: string;
}

export function envFilePath(): string {
  if (process.env.ST_CLUSTER_ENV) return process.env.ST_CLUSTER_ENV;
  return `${process.env.ST_CLUSTER_DIR ?? '/tmp/sidecar-terminator-cluster'}/env`;
}

/** Parses `export KEY=VALUE` lines (values may be single- or double-quoted). */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim().replace(/^export\s+/, '');
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m || !m[1] || m[2] === undefined) continue;
    out[m[1]] = m[2].replace(/^(['"])(.*)\1$/, '$2');
  }
  return out;
}

let cached: ClusterEnv | undefined;

export function clusterEnv(): ClusterEnv {
  if (cached) return cached;
  const path = envFilePath();
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${path}: is the e2e cluster up (bash e2e/cluster/up.sh)? ${String(err)}`, {
      cause: err,
    });
  }
  const env = parseEnvFile(text);
  const need = (key: string): string => {
    const v = env[key];
    if (!v) throw new Error(`${path} has no ${key}`);
    return v;
  };
  cached = {
    clusterDir: need('ST_CLUSTER_DIR'),
    kubeconfig: need('KUBECONFIG'),
    nodeName: need('ST_NODE_NAME'),
    nodeNames: (env.ST_NODE_NAMES ?? need('ST_NODE_NAME')).split(' '),
    nodeIP: need('ST_NODE_IP'),
    containerdSocket: need('ST_CONTAINERD_SOCK'),
    containerdSockets: (env.ST_CONTAINERD_SOCKS ?? need('ST_CONTAINERD_SOCK')).split(' '),
    containerdNamespace: need('ST_CONTAINERD_NAMESPACE'),
    k8sBinDir: need('ST_K8S_BIN'),
    k8sVersion: need('ST_K8S_VERSION'),
    imagesDir: need('ST_IMAGES_DIR'),
    podCIDR: need('ST_POD_CIDR'),
    serviceIP: need('ST_SERVICE_IP'),
    logsDir: need('ST_LOGS_DIR'),
  };
  return cached;
}

/** The containerd socket of a node, as the host sees it. */
export function containerdSocketOf(nodeName: string | undefined): string {
  const env = clusterEnv();
  const socket = env.containerdSockets[env.nodeNames.indexOf(nodeName ?? '')];
  if (!socket) throw new Error(`no node ${nodeName} in this cluster (${env.nodeNames.join(', ')})`);
  return socket;
}

/**
 * What differs by release, as the README's "Supported Kubernetes versions" states it: the tests
 * expect it from the version, so a wrong detection by the agent or the controller shows.
 */
export function versionFeatures(version = clusterEnv().k8sVersion): {
  admissionPolicies: boolean;
  nativeSidecars: boolean;
  /** The `sleep` lifecycle action (PodLifecycleSleepAction: beta, on by default, from 1.30). */
  sleepHook: boolean;
  /**
   * `lifecycle.stopSignal` (ContainerStopSignals: alpha from 1.33, still off by default in 1.37;
   * e2e/cluster/up.sh turns it on). The runtime must apply it too: containerd 2.4 does, 1.6 does not.
   */
  stopSignal: boolean;
  /**
   * `containers[].restartPolicy` and `restartPolicyRules` on regular containers (ContainerRestartRules:
   * alpha in 1.34, off by default; beta and on by default from 1.35).
   */
  containerRestartRules: boolean;
  /** The `RestartAllContainers` rule action (RestartAllContainersOnContainerExits: alpha 1.35; beta, on by default, from 1.36). */
  restartAllContainers: boolean;
  /** In-place resize through the Pod's `resize` subresource (InPlacePodVerticalScaling: beta, on by default, from 1.33). */
  podResize: boolean;
} {
  const minor = Number(/^v1\.(\d+)\./.exec(version)?.[1]);
  if (!Number.isInteger(minor)) throw new Error(`not a Kubernetes version: ${version}`);
  return { admissionPolicies: minor >= 30, nativeSidecars: minor >= 29, sleepHook: minor >= 30, stopSignal: minor >= 33,
    containerRestartRules: minor >= 35, restartAllContainers: minor >= 36, podResize: minor >= 33 };
}

export interface Clients {
  kc: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  batch: k8s.BatchV1Api;
  apps: k8s.AppsV1Api;
  rbac: k8s.RbacAuthorizationV1Api;
}

/** API clients for the cluster admin (kubeconfig from the env file). */
export function clients(): Clients {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(clusterEnv().kubeconfig);
  return {
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    batch: kc.makeApiClient(k8s.BatchV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    rbac: kc.makeApiClient(k8s.RbacAuthorizationV1Api),
  };
}

/** The HTTP status of a client-node ApiException, or undefined for other errors. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof k8s.ApiException ? err.code : undefined;
}
