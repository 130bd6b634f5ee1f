// e2e group: serial — it replaces the kubectl deployment with a Helm release, then restores it.
// The Helm chart (manifests/helm/sidecar-terminator) with a real helm, built from its Go module by
// e2e/cluster/build-helm.sh (minutes the first time, cached after):
// - rendered offline (`helm template`), it is the kustomize install (`kubectl kustomize`) object by
//   object, field by field, but for the differences docs/deploy.md lists ("Helm chart"): on 1.30+
//   (manifests/default) and on 1.27 to 1.29 (manifests/base), with the optional monitoring objects,
//   in another namespace, and with every value changed (the flags parsed by the programs' own parsers);
// - from the release directory `npm run release` writes (ST_RELEASE_DIR, or made here once), on the
//   cluster: its checksums verify, its chart package (version and appVersion the project's) installs
//   with the chart's default image, the release's own image archive imported into the nodes'
//   containerd and nothing else built; lint, install into namespace st-helm with name overrides (the Pods carry the release's
//   labels, and the controller replicas' spread rule and disruption budget select them by those;
//   the agent mounting only the runtime's socket), a Job with a sidecar completes, an upgrade that changes flags and a setting rolls both workloads
//   and the next Job's request shows the new setting, an upgrade that keeps the agent off the node
//   and names it with controller.agentlessNodeSelector: a Job finishes through the image swap (R22)
//   to the release's quick-exit image,
//   uninstall leaves nothing behind but the CRD (kept on purpose).
// The rest of the suite runs the kubectl deployment of e2e/support/deploy.ts in namespace
// sidecar-terminator: it is removed first (all but the CRD, which the release adopts), so that no
// node has two agents, and deployed again afterwards.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { loadAll, load as parseYaml } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import type { V1Container, V1DaemonSet, V1Deployment, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { parseAgentConfig } from '../agent/config.ts';
import { parseControllerConfig } from '../crr/config.ts';
import { CRI_SOCKETS, DOCKER_SOCKET } from '../agent/runtime/discover.ts';
import { RELEASED_QUICK_EXIT_IMAGE } from '../rules/requests.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv, parseEnvFile, versionFeatures } from './support/cluster.ts';
import { AGENT, AGENT_METRICS_PORT, CONTROLLER, CONTROLLER_METRICS_PORT, NAMESPACE, ctr, deployProject, podMetric, scrapePod } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { container, requestsFor, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const CHART = join(ROOT, 'manifests/helm/sidecar-terminator');
const RELEASE = 'sidecar-terminator';
const RELEASE_NAMESPACE = 'st-helm';
const CRD = 'containerrecreaterequests.sidecar-terminator.dev';
/** Every CRD of the project: the release adopts them all from the kubectl deployment, and keeps them all. */
const CRDS = [CRD, 'clustersidecarpolicies.sidecar-terminator.dev', 'sidecarpolicies.sidecar-terminator.dev'];
const VAP_API = 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy';
/**
 * The name overrides of the release on the cluster: its labels and object names are none of the
 * kustomize install's. The Lease keeps its name (controller.leaseName, which fullnameOverride does
 * not change).
 */
const NAME_OVERRIDE = 'jobs-stopper';
const PREFIX = 'st';
const HELM_AGENT = `${PREFIX}-agent`;
const HELM_CONTROLLER = `${PREFIX}-controller`;
const LEASE = CONTROLLER;
const versions = parseEnvFile(readFileSync(join(ROOT, 'e2e/cluster/versions.env'), 'utf8'));

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
};

let helmBinary: string | undefined;
/** helm, built (or found in the cache) by e2e/cluster/build-helm.sh on first use. */
function helm(...args: string[]): string {
  helmBinary ??= execFileSync('bash', [join(ROOT, 'e2e/cluster/build-helm.sh')], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 40 * 60_000,
  }).trim();
  try {
    return execFileSync(helmBinary, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string };
    throw new Error(`helm ${args.join(' ')}: ${e.stderr ?? ''}${e.stdout ?? ''}`, { cause: err });
  }
}

/** helm against the e2e cluster. */
const helmOnCluster = (...args: string[]) => helm('--kubeconfig', clusterEnv().kubeconfig, ...args);

/** `kubectl kustomize DIR` with the cluster's kubectl (K8S_BIN_DIR, as e2e/run.sh exports it, or the cluster's). */
function kustomize(dir: string): Obj[] {
  const bin = join(process.env.K8S_BIN_DIR ?? clusterEnv().k8sBinDir, 'kubectl');
  return parseAll(execFileSync(bin, ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 }));
}

function parseAll(text: string): Obj[] {
  return (loadAll(text) as (Obj | null)[]).filter((o): o is Obj => o !== null);
}

/**
 * `helm template` of the chart as release sidecar-terminator, in `namespace`, with its default image
 * (the released one, as the base names it), as for a 1.30+ cluster (the policy API served).
 */
function template(namespace: string, ...args: string[]): Obj[] {
  return parseAll(helm('template', RELEASE, CHART, '--namespace', namespace, '--api-versions', VAP_API, ...args));
}

const key = (o: Obj) => `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;
const byKey = (objs: Obj[]) => new Map(objs.map((o) => [key(o), o]));
const find = (objs: Obj[], kind: string, name: string) => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `no ${kind} ${name} in ${objs.map(key).join(', ')}`);
  return o;
};
const podSpec = (o: Obj) => (o as unknown as V1DaemonSet | V1Deployment).spec!.template.spec as V1PodSpec;
const firstContainer = (o: Obj) => podSpec(o).containers[0] as V1Container;

const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

interface ReleaseFiles { dir: string; chart: string; image: string; quickExit: string }
let releaseDir: string | undefined;
/**
 * The files of the release directory: ST_RELEASE_DIR (CI makes it while the unit tests run), or
 * one `npm run release` writes here, once per process (a minute or two).
 */
function releaseFiles(): ReleaseFiles {
  if (!releaseDir) {
    releaseDir = process.env.ST_RELEASE_DIR;
    if (!releaseDir) {
      releaseDir = mkdtempSync(join(tmpdir(), 'st-release-'));
      const made = releaseDir;
      process.on('exit', () => rmSync(made, { recursive: true, force: true }));
      execFileSync('bash', [join(ROOT, 'scripts/release.sh'), releaseDir], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 15 * 60_000 });
    }
  }
  const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch as string];
  const files = {
    dir: releaseDir,
    chart: join(releaseDir, `sidecar-terminator-${VERSION}.tgz`),
    image: join(releaseDir, `sidecar-terminator-${VERSION}-linux-${arch}.tar`),
    quickExit: join(releaseDir, `quick-exit-${VERSION}-linux-${arch}.tar`),
  };
  for (const file of [files.chart, files.image, files.quickExit]) assert.ok(existsSync(file), `the release has ${file}`);
  return files;
}

const chartYaml = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { name: string; version: string; appVersion: string };

/**
 * The kustomize objects as the chart renders them with its default values: the differences
 * docs/deploy.md lists ("Helm chart"), and nothing else.
 */
function asHelmRendersThem(kustomized: Obj[], rendered: Obj[]): Obj[] {
  const helmLabels = {
    'app.kubernetes.io/managed-by': 'Helm',
    'app.kubernetes.io/instance': RELEASE,
    'app.kubernetes.io/version': chartYaml.appVersion,
    'helm.sh/chart': `${chartYaml.name}-${chartYaml.version}`,
  };
  const out: Obj[] = [];
  for (const original of kustomized) {
    // 1. No Namespace: the release's namespace is Helm's (`--create-namespace`, or one that exists).
    if (original.kind === 'Namespace') continue;
    const o = structuredClone(original);
    // 2. Helm's labels on every object (not on selectors), the release's instance and version on the Pod templates too.
    o.metadata.labels = { ...o.metadata.labels, ...helmLabels };
    // 3. The CRD is kept when the release is uninstalled.
    if (o.kind === 'CustomResourceDefinition') o.metadata.annotations = { ...o.metadata.annotations, 'helm.sh/resource-policy': 'keep' };
    if (o.kind === 'DaemonSet' || o.kind === 'Deployment') {
      // 4. A checksum of the settings ConfigMap on the Pod templates: a changed setting rolls them.
      const template = (o as unknown as V1DaemonSet).spec!.template;
      const checksum = (find(rendered, o.kind, o.metadata.name) as unknown as V1DaemonSet).spec!.template.metadata?.annotations?.['checksum/settings'];
      assert.match(checksum ?? '', /^[0-9a-f]{64}$/, `${key(o)}: checksum/settings`);
      template.metadata!.annotations = { ...template.metadata!.annotations, 'checksum/settings': checksum! };
      template.metadata!.labels = { ...template.metadata!.labels, 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/version': chartYaml.appVersion };
    }
    // 5. The agent at system-node-critical priority (as manifests/overlays/example sets it).
    if (o.kind === 'DaemonSet') podSpec(o).priorityClassName = 'system-node-critical';
    out.push(o);
  }
  // 6. A PodDisruptionBudget for the controller's two replicas.
  const selector = { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': 'controller' };
  out.push({
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: CONTROLLER, namespace: NAMESPACE, labels: { ...selector, 'app.kubernetes.io/part-of': 'sidecar-terminator', ...helmLabels } },
    spec: { minAvailable: 1, selector: { matchLabels: selector } },
  });
  // 7. The ResourceQuota that lets the agent's system-node-critical Pods in outside kube-system (GKE).
  const agentLabels = { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': 'agent' };
  out.push({
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: { name: 'sidecar-terminator-agent-priority', namespace: NAMESPACE, labels: { ...agentLabels, 'app.kubernetes.io/part-of': 'sidecar-terminator', ...helmLabels } },
    spec: { hard: { pods: '10000' }, scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: ['system-node-critical'] }] } },
  });
  return out;
}

function assertSameObjects(rendered: Obj[], expected: Obj[]): void {
  const got = byKey(rendered);
  const want = byKey(expected);
  assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort(), 'the same objects');
  for (const [k, o] of want) assert.deepEqual(got.get(k), o, `${k} differs`);
}

/** A kustomization of `resources` and `components` (paths from the repository root), rendered. */
function kustomizeOf(resources: string[], components: string[]): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'st-helm-kustomize-'));
  try {
    const rel = (p: string) => relative(dir, join(ROOT, p));
    writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [${resources.map(rel).join(', ')}]
components: [${components.map(rel).join(', ')}]
`);
    return kustomize(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `actual` has these fields with these values (and maybe others). */
function assertIncludes(actual: object, fields: Record<string, unknown>): void {
  assert.deepEqual(Object.fromEntries(Object.keys(fields).map((k) => [k, (actual as Record<string, unknown>)[k]])), fields);
}

/** A workload's args with `$(NAME)` taken from the settings ConfigMap, as kubelet expands them. */
function expandedArgs(workload: Obj, objs: Obj[], settings = 'sidecar-terminator-settings'): string[] {
  const data = (find(objs, 'ConfigMap', settings) as unknown as { data: Record<string, string> }).data;
  return (firstContainer(workload).args ?? []).map((a) => a.replace(/\$\((\w+)\)/g, (_, name: string) => data[name] ?? `$(${name})`));
}

describe('the Helm chart, rendered: the kustomize objects', () => {
  it(`on 1.30+ (${versions.K8S_NEWEST}, policy API served): manifests/default`, () => {
    const rendered = template(NAMESPACE, '--kube-version', versions.K8S_NEWEST!);
    assertSameObjects(rendered, asHelmRendersThem(kustomize(join(ROOT, 'manifests/default')), rendered));
  });

  it(`on 1.27 to 1.29 (${versions.K8S_OLDEST}, the policy API not served): manifests/base, no policy and no create permission for the agent, by default`, () => {
    const rendered = parseAll(helm('template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', versions.K8S_OLDEST!));
    assertSameObjects(rendered, asHelmRendersThem(kustomize(join(ROOT, 'manifests/base')), rendered));
    // false: none, even where the API serves them (template() passes the policy API).
    const off = template(NAMESPACE, '--kube-version', versions.K8S_OLDEST!, '--set', 'admissionPolicies.enabled=false');
    assertSameObjects(off, asHelmRendersThem(kustomize(join(ROOT, 'manifests/base')), off));
  });

  it('with the monitoring values: manifests/default with the manifests/optional component', () => {
    const rendered = template(NAMESPACE, '--set', 'metrics.serviceMonitor.enabled=true',
      '--set', 'metrics.prometheusRule.enabled=true', '--set', 'metrics.grafanaDashboard.enabled=true');
    const expected = asHelmRendersThem(kustomizeOf(['manifests/default'], ['manifests/optional']), rendered);
    for (const [kind, name] of [['ServiceMonitor', 'sidecar-terminator'], ['PrometheusRule', 'sidecar-terminator'], ['ConfigMap', 'sidecar-terminator-dashboard']]) find(expected, kind!, name!);
    assertSameObjects(rendered, expected);
  });

  it('with networkPolicy.enabled: manifests/default with the manifests/optional/network-policy component', () => {
    const rendered = template(NAMESPACE, '--set', 'networkPolicy.enabled=true');
    const expected = asHelmRendersThem(kustomizeOf(['manifests/default'], ['manifests/optional/network-policy']), rendered);
    for (const name of [AGENT, CONTROLLER]) find(expected, 'NetworkPolicy', name);
    assertSameObjects(rendered, expected);
  });

  it('in another namespace: every namespaced object, subject, Lease Role and alert follows it', () => {
    const rendered = template(RELEASE_NAMESPACE, '--set', 'metrics.serviceMonitor.enabled=true',
      '--set', 'metrics.prometheusRule.enabled=true', '--set', 'metrics.grafanaDashboard.enabled=true');
    const clusterScoped = new Set(['CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    for (const o of rendered) {
      assert.equal(o.metadata.namespace, clusterScoped.has(o.kind) ? undefined : RELEASE_NAMESPACE, key(o));
      for (const s of (o as { subjects?: { kind: string; namespace?: string }[] }).subjects ?? []) assert.equal(s.namespace, RELEASE_NAMESPACE, `${key(o)} subject`);
    }
    // Nothing names the kustomize namespace any more (object names keep the project's name).
    const text = helm('template', RELEASE, CHART, '--namespace', RELEASE_NAMESPACE, '--api-versions', VAP_API, '--set', 'metrics.serviceMonitor.enabled=true',
      '--set', 'metrics.prometheusRule.enabled=true', '--set', 'metrics.grafanaDashboard.enabled=true');
    const left = text.split('\n').filter((l) => /namespace[:=\s\\"]+sidecar-terminator\b(?![-.])|-n sidecar-terminator\b/.test(l));
    assert.deepEqual(left, []);
    assert.deepEqual((find(rendered, 'ServiceMonitor', 'sidecar-terminator') as unknown as { spec: { namespaceSelector: unknown } }).spec.namespaceSelector, { matchNames: [RELEASE_NAMESPACE] });
  });

  it('every value reaches its field, and every flag value its program (parsed by agent/config.ts and crr/config.ts)', () => {
    const sets = {
      'image.repository': 'registry.example/st', 'image.digest': `sha256:${'ab'.repeat(32)}`, 'image.pullPolicy': 'Always',
      'settings.requestDeadlineSeconds': '301', 'settings.requestTTLSeconds': '602', 'settings.sidecarStartTimeoutSeconds': '123',
      'agent.hostRunPath': '/run/containerd', 'agent.runtimeSocket': '/host/var/run/containerd.sock', 'agent.metricsPort': '9550',
      'agent.workers': '7', 'agent.resyncSeconds': '11', 'agent.priorityClassName': 'agents',
      'controller.replicas': '1', 'controller.metricsPort': '9551', 'controller.workers': '9', 'controller.resyncSeconds': '13',
      'controller.leaderElect': 'false', 'controller.leaseName': 'lease-x', 'controller.leaseNamespace': 'lease-ns',
      'controller.priorityClassName': 'controllers', 'crd.keep': 'false',
      'controller.agentlessNodeSelector': 'eks.amazonaws.com/compute-type=fargate', 'controller.agentlessAfterSeconds': '0',
      'agent.logLevel': 'debug', 'controller.logLevel': 'warn',
    };
    const json = {
      imagePullSecrets: [{ name: 'pull' }],
      'agent.extraArgs': ['--kubeconfig=/k'], 'controller.extraArgs': ['--kubeconfig=/c'],
      // Maps merge with the defaults (null removes one): these name every key the defaults have.
      'agent.resources': { requests: { cpu: '1', memory: '1Gi' }, limits: { memory: '2Gi' } },
      'controller.resources': { requests: { cpu: '2', memory: '3Gi' }, limits: { memory: '4Gi' } },
      'agent.tolerations': [{ key: 'k', operator: 'Exists' }], 'controller.tolerations': [{ key: 'c', operator: 'Exists' }],
      'agent.nodeSelector': { 'kubernetes.io/os': 'linux', pool: 'a' }, 'controller.nodeSelector': { 'kubernetes.io/os': 'linux', pool: 'c' },
      'agent.affinity': null,
      'controller.affinity': { podAntiAffinity: null, nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'x', operator: 'Exists' }] }] } } },
      'agent.podAnnotations': { a: '1' }, 'controller.podAnnotations': { c: '1' }, 'agent.podLabels': { la: 'x' }, 'controller.podLabels': { lc: 'y' },
      // Passed through as they are (a map value replaces the default's keys it names).
      'agent.extraEnv': [{ name: 'A', value: '1' }], 'controller.extraEnv': [{ name: 'C', value: '2' }],
      'agent.extraVolumes': [{ name: 'va', emptyDir: {} }], 'controller.extraVolumes': [{ name: 'vc', emptyDir: {} }],
      'agent.extraVolumeMounts': [{ name: 'va', mountPath: '/va' }], 'controller.extraVolumeMounts': [{ name: 'vc', mountPath: '/vc' }],
      'agent.updateStrategy': { type: 'OnDelete', rollingUpdate: null }, 'controller.strategy': { type: 'Recreate', rollingUpdate: null },
      'agent.livenessProbe': { periodSeconds: 21 }, 'controller.readinessProbe': { periodSeconds: 12 },
      'agent.podSecurityContext': { fsGroup: 5 }, 'controller.securityContext': { runAsUser: 7 },
      'controller.agentlessSwapImages': ['registry.example/qe', 'busybox:1.36'],
    };
    const args = [
      ...Object.entries(sets).flatMap(([k, v]) => ['--set', `${k}=${v}`]),
      ...Object.entries(json).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]),
    ];
    const objs = template(RELEASE_NAMESPACE, ...args);
    const agent = find(objs, 'DaemonSet', AGENT);
    const controller = find(objs, 'Deployment', CONTROLLER);

    const agentArgs = expandedArgs(agent, objs);
    assert.equal(agentArgs[0], 'agent');
    assertIncludes(parseAgentConfig(agentArgs.slice(1), { NODE_NAME: 'n', POD_NAMESPACE: RELEASE_NAMESPACE }), {
      hostRunDir: '/host/var/run', runtimeSocket: '/host/var/run/containerd.sock',
      metricsPort: 9550, workers: 7, resyncSeconds: 11, kubeconfig: '/k', requestDeadlineSeconds: 301, requestTTLSeconds: 602, logLevel: 'debug',
    });
    const controllerArgs = expandedArgs(controller, objs);
    assert.equal(controllerArgs[0], 'controller');
    assertIncludes(parseControllerConfig(controllerArgs.slice(1), { POD_NAMESPACE: RELEASE_NAMESPACE }), {
      kubeconfig: '/c', metricsPort: 9551, workers: 9, resyncSeconds: 13, leaderElect: false, leaseNamespace: 'lease-ns',
      leaseName: 'lease-x', requestDeadlineSeconds: 301, requestTTLSeconds: 602, sidecarStartTimeoutSeconds: 123,
      agentlessNodeSelector: 'eks.amazonaws.com/compute-type=fargate', agentlessAfterSeconds: 0, logLevel: 'warn',
      agentlessSwapImages: ['registry.example/qe', 'busybox:1.36'],
    });

    for (const [workload, part, port] of [[agent, 'agent', 9550], [controller, 'controller', 9551]] as const) {
      const spec = podSpec(workload);
      const c = firstContainer(workload);
      const j = (field: string) => json[`${part}.${field}` as keyof typeof json];
      assert.equal(c.image, sets['image.repository'] + '@' + sets['image.digest']);
      assert.equal(c.imagePullPolicy, 'Always');
      assert.deepEqual(spec.imagePullSecrets, json.imagePullSecrets);
      assert.deepEqual(c.resources, j('resources'));
      assert.deepEqual(spec.tolerations, j('tolerations'));
      assert.deepEqual(spec.nodeSelector, j('nodeSelector'));
      assert.deepEqual(spec.affinity, part === 'agent' ? undefined : { nodeAffinity: json['controller.affinity'].nodeAffinity });
      assert.equal(spec.priorityClassName, sets[`${part}.priorityClassName`]);
      assert.equal(c.ports?.[0]?.containerPort, port);
      const meta = (workload as unknown as V1DaemonSet).spec!.template.metadata!;
      assert.equal(meta.annotations?.['prometheus.io/port'], String(port));
      assert.deepEqual({ ...meta.annotations, 'checksum/settings': undefined, 'prometheus.io/port': undefined, 'prometheus.io/scrape': undefined, 'prometheus.io/path': undefined }, {
        ...j('podAnnotations'), 'checksum/settings': undefined, 'prometheus.io/port': undefined, 'prometheus.io/scrape': undefined, 'prometheus.io/path': undefined,
      });
      assert.deepEqual(meta.labels, { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': part,
        'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/version': chartYaml.appVersion, ...j('podLabels') });
      const service = find(objs, 'Service', `sidecar-terminator-${part}-metrics`) as unknown as k8s.V1Service;
      assert.equal(service.spec?.ports?.[0]?.port, port);
      assert.deepEqual(c.env?.slice(-1), j('extraEnv'));
      assert.deepEqual(spec.volumes?.slice(-1), j('extraVolumes'));
      assert.deepEqual(c.volumeMounts?.slice(-1), j('extraVolumeMounts'));
    }
    assert.deepEqual((agent as unknown as V1DaemonSet).spec?.updateStrategy, { type: 'OnDelete' });
    assert.deepEqual((controller as unknown as V1Deployment).spec?.strategy, { type: 'Recreate' });
    assert.equal(firstContainer(agent).livenessProbe?.periodSeconds, 21);
    assert.equal(firstContainer(controller).readinessProbe?.periodSeconds, 12);
    assert.equal(podSpec(agent).securityContext?.fsGroup, 5);
    assert.equal(firstContainer(controller).securityContext?.runAsUser, 7);
    assert.ok(!objs.some((o) => o.kind === 'ResourceQuota'), 'no quota for a priority class of the user\'s');
    assert.deepEqual(podSpec(agent).volumes?.find((v) => v.name === 'host-run')?.hostPath, { path: '/run/containerd', type: 'Directory' });
    assert.equal((controller as unknown as V1Deployment).spec?.replicas, 1);
    const role = find(objs, 'Role', 'sidecar-terminator-controller-leader-election') as unknown as k8s.V1Role;
    assert.equal(role.metadata?.namespace, 'lease-ns');
    assert.deepEqual(role.rules?.map((r) => r.resourceNames), [undefined, ['lease-x']]);
    const binding = find(objs, 'RoleBinding', 'sidecar-terminator-controller-leader-election') as unknown as k8s.V1RoleBinding;
    assert.equal(binding.metadata?.namespace, 'lease-ns');
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: CONTROLLER, namespace: RELEASE_NAMESPACE }]);
    assert.ok(!objs.some((o) => o.kind === 'PodDisruptionBudget'), 'no PodDisruptionBudget for one replica');
    assert.equal(find(objs, 'CustomResourceDefinition', CRD).metadata.annotations?.['helm.sh/resource-policy'], undefined);
    // Both Pod templates carry the settings' checksum, which a changed setting changes.
    const checksum = (o: Obj) => (o as unknown as V1DaemonSet).spec!.template.metadata!.annotations!['checksum/settings'];
    assert.equal(checksum(agent), checksum(controller));
    assert.notEqual(checksum(agent), checksum(find(template(RELEASE_NAMESPACE), 'DaemonSet', AGENT)));
  });

  it('turns parts off: the CRD, the metrics Services and scrape annotations, the PodDisruptionBudget', () => {
    const objs = template(NAMESPACE, '--set', 'crd.create=false', '--set', 'metrics.services=false', '--set', 'metrics.scrapeAnnotations=false',
      '--set', 'controller.podDisruptionBudget.enabled=false');
    assert.deepEqual(objs.filter((o) => ['CustomResourceDefinition', 'Service', 'PodDisruptionBudget'].includes(o.kind)).map(key), []);
    for (const w of [find(objs, 'DaemonSet', AGENT), find(objs, 'Deployment', CONTROLLER)]) {
      assert.deepEqual(Object.keys((w as unknown as V1DaemonSet).spec!.template.metadata!.annotations!), ['checksum/settings']);
    }
  });

  it('nameOverride and fullnameOverride: every name, label, selector and reference follows, the agent policy\'s match too', () => {
    const objs = template(RELEASE_NAMESPACE, '--set', 'nameOverride=jobs-stopper', '--set', 'fullnameOverride=js',
      '--set', 'controller.leaseName=js-controller', // a value of its own, which the Lease Role follows
      '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.grafanaDashboard.enabled=true');
    // The CRD and the admission policies keep their names (an API group, and names of that group).
    const fixedNames = new Set(['CustomResourceDefinition', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    for (const o of objs) {
      assert.equal(o.metadata.labels?.['app.kubernetes.io/name'], 'jobs-stopper', `${key(o)} label`);
      if (!fixedNames.has(o.kind)) assert.match(o.metadata.name, /^js(-|$)/, `${key(o)} name`);
    }
    const text = JSON.stringify(objs.filter((o) => !fixedNames.has(o.kind)));
    assert.deepEqual(text.match(/sidecar-terminator-(agent|controller|settings)\b/g), null, 'no reference to a default name is left');
    const agent = find(objs, 'DaemonSet', 'js-agent') as unknown as V1DaemonSet;
    assert.deepEqual(agent.spec?.selector.matchLabels, { 'app.kubernetes.io/name': 'jobs-stopper', 'app.kubernetes.io/component': 'agent' });
    assert.equal(agent.spec?.template.spec?.serviceAccountName, 'js-agent');
    assert.equal(agent.spec?.template.spec?.containers[0]?.envFrom?.[0]?.configMapRef?.name, 'js-settings');
    const controller = find(objs, 'Deployment', 'js-controller');
    assert.equal(parseControllerConfig(expandedArgs(controller, objs, 'js-settings').slice(1), {}).agentPodSelector,
      'app.kubernetes.io/name=jobs-stopper,app.kubernetes.io/component=agent');
    for (const binding of objs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')) {
      for (const subject of (binding as unknown as k8s.V1RoleBinding).subjects ?? []) assert.match(subject.name, /^js-(agent|controller)$/, key(binding));
    }
    const policy = JSON.stringify(find(objs, 'ValidatingAdmissionPolicy', 'agent-requests.sidecar-terminator.dev'));
    assert.match(policy, new RegExp(`system:serviceaccount:${RELEASE_NAMESPACE}:js-agent`));
    assert.deepEqual((find(objs, 'ServiceMonitor', 'js') as unknown as { spec: { selector: unknown } }).spec.selector, { matchLabels: { 'app.kubernetes.io/name': 'jobs-stopper' } });
  });

  it('mounts only the runtime\'s socket, where the agent looks for it, for each runtime (or a whole directory when asked)', () => {
    const presets: [string, string, string][] = [
      ['containerd', '/run/containerd/containerd.sock', 'containerd/containerd.sock'],
      ['k3s', '/run/k3s/containerd/containerd.sock', 'k3s/containerd/containerd.sock'],
      ['microk8s', '/var/snap/microk8s/common/run/containerd.sock', 'containerd.sock'],
      ['crio', '/run/crio/crio.sock', 'crio/crio.sock'],
      ['cri-dockerd', '/run/cri-dockerd.sock', 'cri-dockerd.sock'],
      ['docker', '/run/docker.sock', DOCKER_SOCKET],
    ];
    for (const [runtime, hostPath, underRunDir] of presets) {
      assert.ok([...CRI_SOCKETS, DOCKER_SOCKET].includes(underRunDir), `the agent looks for ${underRunDir}`);
      const agent = find(template(NAMESPACE, '--set', `agent.runtime=${runtime}`), 'DaemonSet', AGENT);
      assert.deepEqual(podSpec(agent).volumes?.filter((v) => v.hostPath).map((v) => v.hostPath), [{ path: hostPath, type: 'Socket' }], runtime);
      assert.deepEqual(firstContainer(agent).volumeMounts?.find((m) => m.name === 'runtime-socket'),
        { name: 'runtime-socket', mountPath: `/host/var/run/${underRunDir}`, readOnly: true }, runtime);
    }
    const moved = find(template(NAMESPACE, '--set', 'agent.runtimeSocketHostPath=/opt/run/containerd.sock'), 'DaemonSet', AGENT);
    assert.deepEqual(podSpec(moved).volumes?.find((v) => v.name === 'runtime-socket')?.hostPath, { path: '/opt/run/containerd.sock', type: 'Socket' });
    const whole = find(template(NAMESPACE, '--set', 'agent.hostRunPath=/run'), 'DaemonSet', AGENT);
    assert.deepEqual(podSpec(whole).volumes?.filter((v) => v.hostPath).map((v) => [v.name, v.hostPath]), [['host-run', { path: '/run', type: 'Directory' }]]);
    assert.equal(firstContainer(whole).volumeMounts?.find((m) => m.name === 'host-run')?.mountPath, '/host/var/run');
  });

  it('admissionPolicies.enabled: auto installs them where the API serves them; true forces them; anything else is refused', () => {
    const policies = (...args: string[]) => parseAll(helm('template', RELEASE, CHART, ...args)).filter((o) => o.kind === 'ValidatingAdmissionPolicy').length;
    assert.equal(policies(), 0, 'helm template without --api-versions: not served');
    assert.equal(policies('--api-versions', VAP_API), 4);
    assert.equal(policies('--set', 'admissionPolicies.enabled=true'), 4, 'true: for a 1.30+ cluster, whatever helm template knows');
    assert.throws(() => helm('template', RELEASE, CHART, '--set-string', 'admissionPolicies.enabled=yes'), /admissionPolicies\/enabled/);
  });

  it('refuses what cannot work: an empty image repository, several controllers without leader election, bad values (values.schema.json)', () => {
    assert.throws(() => helm('template', RELEASE, CHART, '--api-versions', VAP_API, '--set', 'image.repository='), /image.repository is empty: leave it unset for the released image/);
    assert.throws(() => template(NAMESPACE, '--set', 'agent.runtime=rkt'), /runtime/);
    assert.throws(() => template(NAMESPACE, '--set', 'controller.leaderElect=false'), /needs controller.replicas: 1/);
    assert.throws(() => template(NAMESPACE, '--set', 'settings.requestTTLSeconds=0'), /requestTTLSeconds/);
    assert.throws(() => template(NAMESPACE, '--set', 'agent.workerz=1'), /workerz/);
    assert.throws(() => template(NAMESPACE, '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.services=false'), /needs metrics.services/);
  });

  it('passes helm lint --strict and helm template, with the defaults and with the values the cluster test uses', () => {
    helm('lint', '--strict', CHART);
    helm('template', RELEASE, CHART);
    helm('lint', '--strict', CHART, '--namespace', RELEASE_NAMESPACE, ...clusterValues('/tmp/sidecar-terminator-cluster'));
  });
});

/**
 * The values the e2e cluster needs, as e2e/support/deploy.ts's overlay sets them (`dir`: the
 * cluster's state directory), the name overrides, and `extra`.
 */
function clusterValues(dir = clusterEnv().clusterDir, extra: Record<string, string> = {}): string[] {
  const values: Record<string, string> = {
    nameOverride: NAME_OVERRIDE,
    fullnameOverride: PREFIX,
    // admissionPolicies.enabled stays auto: the install detects the policy API (asserted below).
    // The cluster's containerd socket lives in its state directory, not the host's /run.
    'agent.runtimeSocketHostPath': `${dir}/containerd/containerd.sock`,
    'settings.sidecarStartTimeoutSeconds': '15',
    'agent.resyncSeconds': '5',
    'controller.resyncSeconds': '5',
    ...extra,
  };
  return Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
}

/**
 * Removes the kubectl deployment's objects (e2e/support/deploy.ts's overlay) but the CRD, which the
 * release adopts, and the Namespace, which deployProject() fills again afterwards.
 */
function removeKubectlDeployment(): void {
  const overlay = join(clusterEnv().clusterDir, 'overlay');
  const objs = kustomize(overlay).filter((o) => o.kind !== 'CustomResourceDefinition' && o.kind !== 'Namespace');
  const file = join(clusterEnv().clusterDir, 'helm-test-removed.yaml');
  // One List object: kubectl before 1.28 cannot read JSON documents separated by `---`.
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }));
  // Foreground: returns once the Pods are gone too, so no node ever has two agents.
  kubectl('delete', '--ignore-not-found', '--cascade=foreground', '--wait=true', '--timeout=180s', '-f', file);
}

/**
 * The CRDs handed to the release (as docs/deploy.md says to do with an existing install), or, with
 * `release` false, Helm's labels and annotations taken off it again.
 */
function crdOwnership(release: boolean): void {
  const set = (value: string) => (release ? value : null);
  const patch = {
    metadata: {
      labels: {
        'app.kubernetes.io/managed-by': set('Helm'),
        ...(release ? {} : { 'app.kubernetes.io/instance': null, 'app.kubernetes.io/version': null, 'helm.sh/chart': null }),
      },
      annotations: {
        'meta.helm.sh/release-name': set(RELEASE),
        'meta.helm.sh/release-namespace': set(RELEASE_NAMESPACE),
        ...(release ? {} : { 'helm.sh/resource-policy': null }),
      },
    },
  };
  for (const crd of CRDS) kubectl('patch', 'crd', crd, '--type=merge', '-p', JSON.stringify(patch));
}

/** Rollout of both workloads, complete. */
function rolledOut(): void {
  kubectl('-n', RELEASE_NAMESPACE, 'rollout', 'status', `daemonset/${HELM_AGENT}`, '--timeout=180s');
  kubectl('-n', RELEASE_NAMESPACE, 'rollout', 'status', `deployment/${HELM_CONTROLLER}`, '--timeout=180s');
}

async function runningPods(component: string) {
  return podsSelectedBy({ 'app.kubernetes.io/component': component });
}

/** The running Pods of the release's namespace that these labels select. */
async function podsSelectedBy(matchLabels: Record<string, string>) {
  const labelSelector = Object.entries(matchLabels).map(([k, v]) => `${k}=${v}`).join(',');
  const list = await clients().core.listNamespacedPod({ namespace: RELEASE_NAMESPACE, labelSelector });
  return list.items.filter((p) => !p.metadata?.deletionTimestamp && p.status?.phase === 'Running');
}

/** The running controller Pod that holds the Lease, if any. */
async function leaderPod(): Promise<V1Pod | undefined> {
  const leases = clients().kc.makeApiClient(k8s.CoordinationV1Api);
  const holder = (await leases.readNamespacedLease({ namespace: RELEASE_NAMESPACE, name: LEASE })).spec?.holderIdentity;
  return holder ? (await runningPods('controller')).find((p) => holder.startsWith(`${p.metadata!.name}-`)) : undefined;
}

async function leaderHeld(): Promise<void> {
  await waitFor(leaderPod, { description: `a controller Pod of ${RELEASE_NAMESPACE} holding the Lease`, timeoutMs: 90_000 });
}

/** A Job whose sidecar runs until stopped; resolves with its request once the Job is complete. */
async function jobCompletes(namespace: string, name: string): Promise<Awaited<ReturnType<typeof requestsFor>>[number]> {
  await jobs.runJob(namespace, name, { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
  const { type } = await jobs.finishedJob(namespace, name);
  assert.equal(type, 'Complete');
  const [request] = await requestsFor(await jobs.onlyPod(namespace, name));
  assert.ok(request, 'a request for the Pod');
  assert.equal(request.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
  return request;
}

const agentMetric = async (series: string) => podMetric((await runningPods('agent'))[0]!, AGENT_METRICS_PORT, series);

/**
 * The metric families README.md's Metrics section names, by part: `sidecar_terminator_agent_...`
 * and `sidecar_terminator_controller_...` as written, `..._x` in the part's paragraph, and
 * `sidecar_terminator_<part>_x` or `..._x` in the paragraph on both, for each part.
 */
function metricFamiliesInReadme(): { agent: string[]; controller: string[] } {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n### Metrics\n');
  const section = readme.slice(start + 1, readme.indexOf('\n#', start + 2));
  const found = { agent: new Set<string>(), controller: new Set<string>() };
  for (const paragraph of section.split('\n\n')) {
    const parts = (['agent', 'controller'] as const).filter((p) => paragraph.startsWith('Both') || paragraph.toLowerCase().startsWith(p));
    for (const [, name] of paragraph.matchAll(/`((?:sidecar_terminator_|\.\.\._)[a-z_<>]*[a-z])[`{]/g)) {
      for (const part of parts) {
        const full = name!.replace(/^\.\.\._/, `sidecar_terminator_${part}_`).replace('<part>', part);
        const owner = full.startsWith('sidecar_terminator_agent_') ? 'agent' : full.startsWith('sidecar_terminator_controller_') ? 'controller' : part;
        found[owner].add(full);
      }
    }
  }
  return { agent: [...found.agent].sort(), controller: [...found.controller].sort() };
}

/** What is left of the release: objects of the chart's kinds with its labels, and its names. */
function leftovers(): string[] {
  const kinds = ['daemonsets', 'deployments', 'pods', 'services', 'configmaps', 'serviceaccounts', 'roles', 'rolebindings', 'poddisruptionbudgets', 'resourcequotas', 'secrets'];
  const names = (args: string[]) => kubectl(...args, '-o', 'name').split('\n').filter(Boolean);
  const inNamespace = names(['-n', RELEASE_NAMESPACE, 'get', kinds.join(',')])
    // What Kubernetes itself puts in every namespace.
    .filter((n) => !['configmap/kube-root-ca.crt', 'serviceaccount/default'].includes(n));
  const clusterKinds = ['clusterroles', 'clusterrolebindings', ...(versionFeatures().admissionPolicies ? ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'] : [])];
  const clusterWide = names(['get', clusterKinds.join(',')]).filter((n) => n.includes('sidecar-terminator') || n.includes(`/${PREFIX}-`));
  const labelled = names(['get', [...kinds, ...clusterKinds].join(','), '-A', '-l', `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/managed-by=Helm`]);
  return [...inNamespace, ...clusterWide, ...labelled];
}

describe('the Helm chart on the cluster: install, upgrade, uninstall', () => {
  let core: k8s.CoreV1Api;
  let namespace: string | undefined;
  let installed = false;

  before(async () => {
    core = clients().core;
    await deployProject(); // its overlay (and the project image in containerd) exists, whatever ran before
    removeKubectlDeployment();
    await waitFor(async () => (await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/name=sidecar-terminator' })).items.length === 0,
      { description: `no Pod of the kubectl deployment left in ${NAMESPACE}`, timeoutMs: 120_000 });
    crdOwnership(true);
    namespace = await createTestNamespace(core, 'helm');
  });

  after(async () => {
    // Each step whatever the others did, so that the kubectl deployment comes back in any case.
    const steps: [string, () => unknown][] = [
      ['helm uninstall', () => installed && helmOnCluster('uninstall', RELEASE, '--namespace', RELEASE_NAMESPACE, '--cascade', 'foreground', '--wait', '--timeout', '3m')],
      ['test namespace', () => namespace && deleteTestNamespace(clients().core, namespace)],
      [RELEASE_NAMESPACE, () => deleteTestNamespace(clients().core, RELEASE_NAMESPACE, { timeoutMs: 180_000 })],
      ['CRD', () => crdOwnership(false)],
    ];
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (err) {
        console.log(`# cleanup, ${what}: ${(err as Error).message}`);
      }
    }
    await deployProject(); // the kubectl deployment back, as the rest of the suite expects it
    // Its Pods restarted: any left from before hold tokens of ServiceAccounts deleted since.
    kubectl('-n', NAMESPACE, 'rollout', 'restart', `daemonset/${AGENT}`, `deployment/${CONTROLLER}`);
    await deployProject();
  });

  it('installs the release\'s chart package (version and appVersion the project\'s) into its own namespace, with its default image from the release\'s archive; the agent and the controller become ready', async () => {
    const features = versionFeatures();
    const release = releaseFiles();
    execFileSync('sha256sum', ['--check', '--strict', '--quiet', 'SHA256SUMS'], { cwd: release.dir, stdio: ['ignore', 'inherit', 'inherit'] });
    const shown = parseYaml(helm('show', 'chart', release.chart)) as { version: string; appVersion: string };
    assert.deepEqual([shown.version, shown.appVersion], [VERSION, VERSION]);
    for (const socket of clusterEnv().containerdSockets) {
      for (const archive of [release.image, release.quickExit]) ctr(['images', 'import', archive], socket);
    }
    installed = true; // from here on, after() uninstalls whatever an install left
    const notes = helmOnCluster('install', RELEASE, release.chart, '--namespace', RELEASE_NAMESPACE, '--create-namespace', ...clusterValues(), '--wait', '--timeout', '5m');
    // admissionPolicies.enabled is auto: the notes say what the install found.
    assert.match(notes, features.admissionPolicies ? /Admission policies: installed/ : /Admission policies: not installed: this API server does not serve/);
    rolledOut();
    await leaderHeld();
    const status = JSON.parse(helmOnCluster('status', RELEASE, '--namespace', RELEASE_NAMESPACE, '-o', 'json')) as { info: { status: string }; version: number };
    assert.equal(status.info.status, 'deployed');
    // The policies (and the agent's fast path) exactly where the API server serves them.
    const policies = kubectl('get', 'clusterroles', '-o', 'name').split('\n').includes(`clusterrole.rbac.authorization.k8s.io/${PREFIX}-agent-requests`);
    assert.equal(policies, features.admissionPolicies);
    if (features.admissionPolicies) kubectl('get', 'validatingadmissionpolicy', 'agent-requests.sidecar-terminator.dev', 'containerrecreaterequests.sidecar-terminator.dev');
    const state = features.admissionPolicies ? 'enabled' : 'no-permission';
    await waitFor(async () => (await agentMetric(`sidecar_terminator_agent_fast_path{state="${state}"}`)) === 1,
      { description: `the agent's fast path ${state}`, timeoutMs: 60_000 });
    // Under the name overrides, the Pods carry the release's labels, and the replicas' spread rule
    // and the disruption budget select exactly the controller Pods by them.
    const controllers = await runningPods('controller');
    assert.equal(controllers.length, 2);
    for (const pod of [...controllers, ...await runningPods('agent')]) {
      assertIncludes(pod.metadata!.labels!, { 'app.kubernetes.io/name': NAME_OVERRIDE, 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/version': chartYaml.appVersion });
    }
    const names = (pods: k8s.V1Pod[]) => pods.map((p) => p.metadata!.name!).sort();
    const deployment = await clients().apps.readNamespacedDeployment({ namespace: RELEASE_NAMESPACE, name: HELM_CONTROLLER });
    const [spread] = deployment.spec!.template.spec!.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
    assert.equal(spread?.podAffinityTerm.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(names(await podsSelectedBy(spread.podAffinityTerm.labelSelector!.matchLabels!)), names(controllers), 'the spread rule selects the controller Pods');
    const pdb = JSON.parse(kubectl('-n', RELEASE_NAMESPACE, 'get', 'pdb', HELM_CONTROLLER, '-o', 'json')) as { spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } };
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(names(await podsSelectedBy(pdb.spec.selector.matchLabels)), names(controllers), 'the disruption budget selects the controller Pods');
    const [agentPod] = await runningPods('agent');
    assert.equal(agentPod?.spec?.priorityClassName, 'system-node-critical');
    kubectl('-n', RELEASE_NAMESPACE, 'get', 'resourcequota', `${PREFIX}-agent-priority`);
    assert.equal(agentPod?.spec?.containers[0]?.image, `ghcr.io/sidecar-terminator/sidecar-terminator:${VERSION}`);
    // The runtime's socket alone is mounted, not the directory it lives in.
    assert.deepEqual(agentPod?.spec?.volumes?.filter((v) => v.hostPath).map((v) => ({ ...v.hostPath })),
      [{ path: `${clusterEnv().clusterDir}/containerd/containerd.sock`, type: 'Socket' }]);
  });

  it('a Job with a sidecar completes', async () => {
    const request = await jobCompletes(namespace!, 'first');
    assert.equal(request.spec.ttlSecondsAfterFinished, 600);
  });

  it('serves every metric family the README names, from the agent and the controller leader', async () => {
    const named = metricFamiliesInReadme();
    assert.ok(named.agent.length >= 20 && named.controller.length >= 15, `the README's Metrics section as read: ${JSON.stringify(named)}`);
    const served = async (pod: V1Pod, port: number) => new Set([...(await scrapePod(pod, port)).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const leader = await leaderPod();
    assert.ok(leader, 'a running controller Pod holds the Lease');
    const agent = await served((await runningPods('agent'))[0]!, AGENT_METRICS_PORT);
    const controller = await served(leader, CONTROLLER_METRICS_PORT);
    const missing = [
      ...named.agent.filter((n) => !agent.has(n)).map((n) => `agent: ${n}`),
      ...named.controller.filter((n) => !controller.has(n)).map((n) => `controller: ${n}`),
    ];
    assert.deepEqual(missing, [], 'named in the README, not served');
  });

  it('upgrades: changed flags and a changed setting roll both workloads; the next request has the new setting', async () => {
    const apps = clients().apps;
    const before = {
      agent: await apps.readNamespacedDaemonSet({ namespace: RELEASE_NAMESPACE, name: HELM_AGENT }),
      controller: await apps.readNamespacedDeployment({ namespace: RELEASE_NAMESPACE, name: HELM_CONTROLLER }),
    };
    helmOnCluster('upgrade', RELEASE, releaseFiles().chart, '--namespace', RELEASE_NAMESPACE,
      ...clusterValues(undefined, { 'agent.workers': '8', 'controller.workers': '8', 'settings.requestTTLSeconds': '900' }), '--wait', '--timeout', '5m');
    rolledOut();
    const agent = await apps.readNamespacedDaemonSet({ namespace: RELEASE_NAMESPACE, name: HELM_AGENT });
    const controller = await apps.readNamespacedDeployment({ namespace: RELEASE_NAMESPACE, name: HELM_CONTROLLER });
    assert.ok(agent.metadata!.generation! > before.agent.metadata!.generation!, 'the DaemonSet changed');
    assert.ok(controller.metadata!.generation! > before.controller.metadata!.generation!, 'the Deployment changed');
    for (const component of ['agent', 'controller']) {
      const pods = await runningPods(component);
      assert.ok(pods.length > 0 && pods.every((p) => p.spec!.containers[0]!.args!.includes('--workers=8')), `every ${component} Pod runs with --workers=8`);
    }
    const history = JSON.parse(helmOnCluster('history', RELEASE, '--namespace', RELEASE_NAMESPACE, '-o', 'json')) as { revision: number; status: string }[];
    assert.deepEqual(history.map((h) => [h.revision, h.status]), [[1, 'superseded'], [2, 'deployed']]);
    await leaderHeld();
    const request = await jobCompletes(namespace!, 'second');
    assert.equal(request.spec.ttlSecondsAfterFinished, 900);
  });

  it('a node where no agent runs (the agent kept off it, the node named by controller.agentlessNodeSelector): a Job finishes through the image swap', async () => {
    const node = clusterEnv().nodeName;
    const label = 'sidecar-terminator.dev/e2e-agentless';
    kubectl('label', 'node', node, `${label}=true`, '--overwrite');
    try {
      helmOnCluster('upgrade', RELEASE, releaseFiles().chart, '--namespace', RELEASE_NAMESPACE, ...clusterValues(),
        '--set-json', `agent.nodeSelector=${JSON.stringify({ 'kubernetes.io/os': 'linux', 'sidecar-terminator.dev/e2e-no-agent': 'true' })}`,
        '--set-string', `controller.agentlessNodeSelector=${label}=true`,
        '--wait', '--timeout', '5m');
      rolledOut();
      await waitFor(async () => (await core.listNamespacedPod({ namespace: RELEASE_NAMESPACE, labelSelector: 'app.kubernetes.io/component=agent' })).items.length === 0,
        { description: `no agent Pod left in ${RELEASE_NAMESPACE}`, timeoutMs: 120_000 });
      await leaderHeld();
      // The release's, which the controller swaps in by default.
      const quickExit = `${RELEASED_QUICK_EXIT_IMAGE}:${VERSION}`;
      await jobs.runJob(namespace!, 'agentless', { restartPolicy: 'Never', containers: [container('main', 'sleep 2'),
        container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK, { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: quickExit }] })] });
      const { type } = await jobs.finishedJob(namespace!, 'agentless');
      assert.equal(type, 'Complete');
      const pod = await jobs.onlyPod(namespace!, 'agentless');
      assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, quickExit);
      assert.deepEqual(await requestsFor(pod), []);
      const swaps = (await jobs.podEvents(pod)).filter((e) => e.includes(EVENT_REASONS.replacingImage));
      assert.equal(swaps.length, 1, swaps.join('\n'));
      assert.match(swaps[0]!, /node without an agent/);
    } finally {
      kubectl('label', 'node', node, `${label}-`);
    }
  });

  it('uninstalls: nothing is left but the CRD (kept on purpose) and what the controller made (its Lease)', async () => {
    // Foreground: the workloads are gone only once their Pods are.
    helmOnCluster('uninstall', RELEASE, '--namespace', RELEASE_NAMESPACE, '--cascade', 'foreground', '--wait', '--timeout', '3m');
    installed = false;
    await waitFor(async () => (await core.listNamespacedPod({ namespace: RELEASE_NAMESPACE })).items.length === 0,
      { description: `no Pod left in ${RELEASE_NAMESPACE}`, timeoutMs: 120_000 });
    assert.deepEqual(leftovers(), []);
    assert.equal(helmOnCluster('list', '--all-namespaces', '--all', '-q').trim(), '');
    for (const name of CRDS) {
      const crd = JSON.parse(kubectl('get', 'crd', name, '-o', 'json')) as Obj;
      assert.equal(crd.metadata.annotations?.['helm.sh/resource-policy'], 'keep', name);
    }
    // The Lease is the controller's, not the chart's: it goes with the namespace.
    const leases = kubectl('-n', RELEASE_NAMESPACE, 'get', 'leases', '-o', 'name').split('\n').filter(Boolean);
    assert.deepEqual(leases, [`lease.coordination.k8s.io/${LEASE}`]);
  });
});
