// sidecar-terminator deployed on the e2e cluster the way users deploy it: the project image built
// offline from the build output the Dockerfile packages, imported into the node's containerd, and
// manifests/default (1.30+) or manifests/base (before) applied with kubectl through a small overlay
// (image name, the cluster's runtime directory, fast resyncs for tests).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { clients, clusterEnv, containerdSocketOf, versionFeatures } from './cluster.ts';
import { kubectl } from './kubectl.ts';
import { waitFor } from './wait.ts';

export const NAMESPACE = 'sidecar-terminator';
export const AGENT = 'sidecar-terminator-agent';
export const CONTROLLER = 'sidecar-terminator-controller';
export const IMAGE = 'sidecar-terminator.local/sidecar-terminator:dev';
/** Where each part serves /metrics, as the manifests configure it. */
export const AGENT_METRICS_PORT = 9440;
export const CONTROLLER_METRICS_PORT = 9441;
/** The controller's wait for a sidecar that never starts, shortened for tests (shipped: 120 s). */
export const TEST_SIDECAR_START_TIMEOUT_SECONDS = 15;
const ROOT = new URL('../..', import.meta.url).pathname;

/** ctr against a node's containerd (node 1's by default). */
export function ctr(args: string[], socket = clusterEnv().containerdSocket): string {
  return execFileSync('ctr', ['-a', socket, '-n', 'k8s.io', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The project image, built once per cluster (the cluster's directory is new on every e2e run). */
function importImage(): void {
  const dir = join(clusterEnv().clusterDir, 'project-image');
  const archive = join(dir, 'sidecar-terminator.tar');
  if (!existsSync(archive)) {
    execFileSync('bash', [join(ROOT, 'e2e/images/build-project-image.sh'), dir], { stdio: ['ignore', 'inherit', 'inherit'] });
  }
  for (const socket of clusterEnv().containerdSockets) {
    if (!ctr(['images', 'ls', '-q'], socket).split('\n').includes(IMAGE)) ctr(['images', 'import', archive], socket);
  }
}

/**
 * The e2e overlay of `resources` (default: what this release installs on the cluster's version),
 * written to `dir` (default: the cluster's overlay directory, which deployProject() applies);
 * returns `dir`. e2e/upgrade.test.ts points it at an earlier release's manifests.
 */
export function writeOverlay(
  resources = join(ROOT, versionFeatures().admissionPolicies ? 'manifests/default' : 'manifests/base'),
  dir = join(clusterEnv().clusterDir, 'overlay'),
): string {
  mkdirSync(dir, { recursive: true });
  // Shared files deploy at the same moment: each file is replaced whole, so that no `kubectl apply
  // -k` reads one half written (a patch read empty rolls the shipped settings out).
  const write = (file: string, text: string) => {
    const partial = join(dir, `.${file}.${process.pid}`);
    writeFileSync(partial, text);
    renameSync(partial, join(dir, file));
  };
  const [name, tag] = IMAGE.split(':');
  // Fast resyncs for tests: appended to the base's flags, which stay as shipped.
  const resync = (kind: string, target: string) => `  - target: {kind: ${kind}, name: ${target}}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --resync-seconds=5`;
  write('kustomization.yaml', `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ${relative(dir, resources)}
images:
  - name: ghcr.io/sidecar-terminator/sidecar-terminator
    newName: ${name}
    newTag: "${tag}"
patches:
  - path: agent-settings.yaml
  - path: controller-settings.yaml
  - path: settings.yaml
${resync('DaemonSet', AGENT)}
${resync('Deployment', CONTROLLER)}
`);
  // The cluster's containerd socket lives in its state directory, not the host's /run. One object
  // per patch file: 1.27's kubectl takes no more.
  write('agent-settings.yaml', `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ${AGENT}
  namespace: ${NAMESPACE}
spec:
  template:
    spec:
      containers:
        - name: agent
          imagePullPolicy: Never
      volumes:
${runtimeVolume(resources)}
`);
  write('controller-settings.yaml', `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${CONTROLLER}
  namespace: ${NAMESPACE}
spec:
  template:
    spec:
      containers:
        - name: controller
          imagePullPolicy: Never
`);
  write('settings.yaml', `apiVersion: v1
kind: ConfigMap
metadata:
  name: sidecar-terminator-settings
  namespace: ${NAMESPACE}
data:
  SIDECAR_START_TIMEOUT_SECONDS: "${TEST_SIDECAR_START_TIMEOUT_SECONDS}"
`);
  return dir;
}

/**
 * The agent's runtime volume pointed at the cluster's containerd: the socket alone (volume
 * runtime-socket), or for manifests from before that volume (e2e/upgrade.test.ts's previous
 * release) the directory holding it, mounted whole (volume host-run).
 */
function runtimeVolume(resources: string): string {
  const base = existsSync(join(resources, 'agent-daemonset.yaml')) ? resources : join(resources, '../base');
  const socketOnly = readFileSync(join(base, 'agent-daemonset.yaml'), 'utf8').includes('name: runtime-socket');
  const env = clusterEnv();
  return socketOnly
    ? `        - name: runtime-socket\n          hostPath:\n            path: ${env.containerdSocket}`
    : `        - name: host-run\n          hostPath:\n            path: ${env.clusterDir}`;
}

/** Deploys (or re-applies) the project and waits until the agent and the controller are ready. */
export async function deployProject(): Promise<void> {
  importImage();
  kubectl('apply', '-k', writeOverlay());
  kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/containerrecreaterequests.sidecar-terminator.dev');
  kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=180s');
  kubectl('-n', NAMESPACE, 'rollout', 'status', `deployment/${CONTROLLER}`, '--timeout=180s');
  await controllerLeader();
}

/**
 * Waits until no controller Pod is left, terminating ones included: a deleted Pod's controller
 * still acts, as leader, until kubelet has stopped it.
 */
export async function noControllerLeft(timeoutMs = 90_000): Promise<void> {
  await waitFor(async () => (await podsOf('controller', { terminating: true })).length === 0,
    { description: 'no controller Pod left, terminating ones included', timeoutMs });
}

/** A component's Pods; those being deleted only with `terminating`. */
async function podsOf(component: 'agent' | 'controller', { terminating = false } = {}): Promise<V1Pod[]> {
  const list = await clients().core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: `app.kubernetes.io/component=${component}` });
  return terminating ? list.items : list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

export async function agentPod(): Promise<V1Pod> {
  const [pod] = await podsOf('agent');
  if (!pod) throw new Error('no agent Pod');
  return pod;
}

/** Every node's agent Pod. */
export function agentPods(): Promise<V1Pod[]> {
  return podsOf('agent');
}

export function controllerPods(): Promise<V1Pod[]> {
  return podsOf('controller');
}

/** Restarts of each of our Pods (the agents and the controller replicas), by Pod name. */
export async function ourRestarts(): Promise<Map<string, number>> {
  const pods = [...await agentPods(), ...await controllerPods()];
  return new Map(pods.map((p) => [p.metadata!.name!, p.status?.containerStatuses?.[0]?.restartCount ?? 0]));
}

/**
 * Fails naming each of our Pods that restarted since `before` (or at all, if it was not there), with
 * the end of its previous run's log: what it died of.
 */
export async function assertNoRestartSince(before: ReadonlyMap<string, number>): Promise<void> {
  const restarted = [...await ourRestarts()].filter(([name, restarts]) => restarts > (before.get(name) ?? 0));
  const logs = restarted.map(([name, restarts]) => {
    let previous: string;
    try {
      previous = kubectl('-n', NAMESPACE, 'logs', name, '--previous', '--tail=40');
    } catch (err) {
      previous = `(no previous log: ${String(err)})`;
    }
    return `${name} restarted (${restarts} in all); its previous run ended with:\n${previous}`;
  });
  assert.deepEqual(logs, [], logs.join('\n\n'));
}

/** The controller Pod that holds the leader Lease. */
export function controllerLeader(timeoutMs = 60_000): Promise<V1Pod> {
  const leases = clients().kc.makeApiClient(CoordinationV1Api);
  return waitFor(async () => {
    const lease = await leases.readNamespacedLease({ namespace: NAMESPACE, name: CONTROLLER });
    const holder = lease.spec?.holderIdentity;
    return holder ? (await controllerPods()).find((p) => holder.startsWith(`${p.metadata!.name}-`)) : undefined;
  }, { description: 'a controller Pod holding the leader Lease', timeoutMs });
}

export async function scrapePod(pod: V1Pod, port: number): Promise<string> {
  return (await fetch(`http://${pod.status!.podIP}:${port}/metrics`)).text();
}

/** One series' value on a Pod's /metrics (0 when the series is absent), e.g. `name{label="x"}`. */
export async function podMetric(pod: V1Pod, port: number, series: string): Promise<number> {
  const line = (await scrapePod(pod, port)).split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** Kills a Pod's (first) container with SIGKILL through the runtime, as a crash would. */
export function killContainer(pod: V1Pod): void {
  ctr(['tasks', 'kill', '--signal', 'SIGKILL', pod.status!.containerStatuses![0]!.containerID!.replace(/^containerd:\/\//, '')], containerdSocketOf(pod.spec?.nodeName));
}

/** A crash, and kubelet restarting the container. */
export async function crash(pod: V1Pod): Promise<void> {
  const status = pod.status!.containerStatuses![0]!;
  killContainer(pod);
  await waitFor(async () => {
    const now = await clients().core.readNamespacedPod({ namespace: NAMESPACE, name: pod.metadata!.name! });
    const s = now.status?.containerStatuses?.[0];
    return s && s.restartCount > status.restartCount && s.ready;
  }, { description: `${pod.metadata!.name} restarted after the crash and ready`, timeoutMs: 90_000 });
}
