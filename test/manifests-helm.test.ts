// The Helm chart (manifests/helm/sidecar-terminator) against its sources, without helm: the files it
// carries are the kustomize manifests' own, its values' defaults are the programs' own defaults and
// the settings ConfigMap's, every flag of both parts is a value (or named here as deliberately not),
// and its schema bounds the settings as the programs do. Then, rendered by `helm template` (helm
// built from its Go module by e2e/cluster/build-helm.sh and cached; without it those tests say so
// and do not run, CI requires it): every selector follows the name overrides and selects the Pods
// it is for, and the values of the operator's second day (labels, namespace, disruption budget,
// scrape options, NetworkPolicies, the admission policies' API) reach their objects. That the chart
// renders the kustomize objects is checked by e2e/helm.test.ts (it needs kubectl's kustomize).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { loadAll, load as parseYaml } from 'js-yaml';
import { AGENT_RENAMED_FLAGS, parseAgentConfig } from '../agent/config.ts';
import { CONTROLLER_RENAMED_FLAGS, CONTROLLER_USAGE, parseControllerConfig } from '../crr/config.ts';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const CHART = 'manifests/helm/sidecar-terminator';

interface Values {
  settings: Record<string, number>;
  agent: Record<string, unknown>;
  controller: Record<string, unknown>;
}
const values = parseYaml(read(`${CHART}/values.yaml`)) as Values;

/** The usage text of `sidecar-terminator agent` (its parser appends it to every flag error). */
function agentUsage(): string {
  try {
    parseAgentConfig(['--help'], {});
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('--help did not fail');
}

/** The flags a usage text names. */
const flagsOf = (usage: string) => new Set([...usage.matchAll(/^\s+--([a-z-]+)/gm)].map((m) => m[1]!));

/** A template's flag from a value: the value's key, how the value is written as the flag's, and the default the template leaves out. */
interface ValueFlag {
  key: string;
  asFlag: (value: unknown) => string;
  programDefault: string;
}

/**
 * The flags a workload template passes: `(list "name" .Values.<part>.<key> default)` items, and
 * the literal `- --name=` args.
 */
function templateFlags(template: string): { values: Map<string, ValueFlag>; literal: Set<string> } {
  const text = read(`${CHART}/templates/${template}`);
  const fromValues = new Map<string, ValueFlag>();
  // A list value is passed joined with commas, `(join "," .Values.part.key)`; a port as a bind
  // address, `(printf ":%d" (int64 .Values.part.key))`.
  const item = /\(list "([a-z-]+)" (\(join "," |\(printf ":%d" \(int64 )?\.Values\.(?:agent|controller)\.(\w+)\)* ("[^"]*"|[^)\s]+)\)/g;
  for (const m of text.matchAll(item)) {
    const asFlag = m[2]?.startsWith('(printf') ? (value: unknown) => `:${String(value)}` : String;
    fromValues.set(m[1]!, { key: m[3]!, asFlag, programDefault: m[4]!.replace(/^"|"$/g, '') });
  }
  const literal = new Set([...text.matchAll(/^\s+- --([a-z-]+)=/gm)].map((m) => m[1]!));
  return { values: fromValues, literal };
}

/** The range a program accepts for a whole-number flag, from its refusal of a value outside any range. */
function flagBounds(part: 'agent' | 'controller', flag: string): { minimum: number; maximum: number } {
  const argv = [`--${flag}=-1`];
  try {
    if (part === 'agent') parseAgentConfig([...argv, '--node-name', 'n'], {});
    else parseControllerConfig(argv, {});
  } catch (err) {
    const m = /must be a whole number from (\d+) to (\d+)/.exec((err as Error).message);
    assert.ok(m, (err as Error).message);
    return { minimum: Number(m[1]), maximum: Number(m[2]) };
  }
  throw new Error(`the ${part} took --${flag}=-1`);
}

describe(`the Helm chart (${CHART})`, () => {
  it("carries the kustomize manifests' CRD, alerts and dashboard byte for byte", () => {
    for (const [copy, source] of [
      ['files/crd.yaml', 'manifests/base/crd.yaml'],
      ['files/crd-clustersidecarpolicies.yaml', 'manifests/base/crd-clustersidecarpolicies.yaml'],
      ['files/crd-sidecarpolicies.yaml', 'manifests/base/crd-sidecarpolicies.yaml'],
      ['files/prometheusrule.yaml', 'manifests/optional/prometheusrule.yaml'],
      ['files/grafana-dashboard.json', 'manifests/optional/grafana-dashboard.json'],
    ] as const) {
      assert.ok(read(`${CHART}/${copy}`) === read(source), `${CHART}/${copy} differs from ${source}: cp ${source} ${CHART}/${copy}`);
    }
  });

  it("has the project's version as its version and appVersion (the default image tag): they move together (docs/releasing.md)", () => {
    const chart = parseYaml(read(`${CHART}/Chart.yaml`)) as { version: string; appVersion: string };
    const pkg = JSON.parse(read('package.json')) as { version: string };
    assert.equal(chart.appVersion, pkg.version);
    assert.equal(chart.version, pkg.version);
    const kustomization = parseYaml(read('manifests/base/kustomization.yaml')) as { images: { newTag: string }[] };
    assert.equal(kustomization.images[0]?.newTag, pkg.version, 'manifests/base/kustomization.yaml images[0].newTag');
  });

  it('has a README that lists every value of values.yaml', () => {
    // Objects passed through to Kubernetes as they are: listed as one value, not key by key.
    const passedThrough = new Set(['resources', 'affinity', 'tolerations', 'nodeSelector', 'podAnnotations', 'podLabels', 'securityContext',
      'podSecurityContext', 'livenessProbe', 'readinessProbe', 'updateStrategy', 'strategy', 'labels']);
    const paths = (obj: Record<string, unknown>, prefix: string): string[] => Object.entries(obj).flatMap(([k, v]) =>
      v !== null && typeof v === 'object' && !Array.isArray(v) && !passedThrough.has(k) ? paths(v as Record<string, unknown>, `${prefix}${k}.`) : [`${prefix}${k}`]);
    const readme = read(`${CHART}/README.md`);
    const missing = paths(values as unknown as Record<string, unknown>, '').filter((p) => !readme.includes(`\`${p}\``));
    assert.deepEqual(missing, [], `values missing from ${CHART}/README.md`);
  });

  it("defaults the shared settings to the settings ConfigMap's and both programs' defaults", () => {
    const configMap = parseYaml(read('manifests/base/settings.yaml')) as { data: Record<string, string> };
    assert.deepEqual(values.settings, {
      requestDeadlineSeconds: Number(configMap.data.REQUEST_DEADLINE_SECONDS),
      requestTTLSeconds: Number(configMap.data.REQUEST_TTL_SECONDS),
      sidecarStartTimeoutSeconds: Number(configMap.data.SIDECAR_START_TIMEOUT_SECONDS),
    });
    const agent = parseAgentConfig(['--node-name', 'n'], {});
    const controller = parseControllerConfig([], {});
    assert.equal(values.settings.requestDeadlineSeconds, agent.requestDeadlineSeconds);
    assert.equal(values.settings.requestDeadlineSeconds, controller.requestDeadlineSeconds);
    assert.equal(values.settings.requestTTLSeconds, agent.requestTTLSeconds);
    assert.equal(values.settings.requestTTLSeconds, controller.requestTTLSeconds);
    assert.equal(values.settings.sidecarStartTimeoutSeconds, controller.sidecarStartTimeoutSeconds);
  });

  for (const part of ['agent', 'controller'] as const) {
    it(`makes every flag of the ${part} a value, defaulting to the program's default`, () => {
      const usage = part === 'agent' ? agentUsage() : CONTROLLER_USAGE;
      const { values: fromValues, literal } = templateFlags(part === 'agent' ? 'agent-daemonset.yaml' : 'controller-deployment.yaml');
      // Not values: each agent's node comes from the downward API, both run in-cluster (a
      // kubeconfig could still be passed through extraArgs), --help and --version only print, and
      // the agent Pods' labels are the chart's own (the program's default selector).
      // -v is another spelling of --log-level (agent.logLevel, controller.logLevel).
      const notValues = new Set(['node-name', 'kubeconfig', 'help', 'version', 'agent-pod-selector', 'v']);
      // Former names, taken for one release: the chart passes the current ones.
      const renamed = new Set((part === 'agent' ? AGENT_RENAMED_FLAGS : CONTROLLER_RENAMED_FLAGS).map((r) => r.old));
      assert.ok(renamed.has('metrics-port'), `the ${part}'s former flag names`);
      for (const old of renamed) assert.ok(!fromValues.has(old) && !literal.has(old), `the chart passes the former --${old}`);
      const missing = [...flagsOf(usage)].filter((f) => !fromValues.has(f) && !literal.has(f) && !notValues.has(f) && !renamed.has(f));
      assert.deepEqual(missing, [], `flags of the ${part} the chart cannot set`);
      assert.ok(fromValues.size >= 3 && fromValues.has('metrics-bind-address'), `the walk found the ${part}'s flags: ${[...fromValues.keys()].join(', ')}`);

      const parse = (args: string[]) => (part === 'agent' ? parseAgentConfig(['--node-name', 'n', ...args], {}) : parseControllerConfig(args, {}));
      const chartValues = values[part];
      for (const [flag, { key, asFlag, programDefault }] of fromValues) {
        // The template leaves the flag out at this value: the program must run the same without it.
        assert.deepEqual(parse([`--${flag}=${programDefault}`]), parse([]), `the template leaves out --${flag}=${programDefault}, which is not the program's default`);
        assert.equal(asFlag(chartValues[key]), programDefault, `values.yaml ${part}.${key} is not the program's default for --${flag}`);
      }
    });
  }

  it('bounds the settings in values.schema.json as both programs bound their flags', () => {
    const schema = JSON.parse(read(`${CHART}/values.schema.json`)) as {
      properties: { settings: { properties: Record<string, { minimum: number; maximum: number }> } };
    };
    const bounds = schema.properties.settings.properties;
    for (const [setting, flag, parsers] of [
      ['requestDeadlineSeconds', 'request-deadline-seconds', ['agent', 'controller']],
      ['requestTTLSeconds', 'request-ttl-seconds', ['agent', 'controller']],
      ['sidecarStartTimeoutSeconds', 'sidecar-start-timeout-seconds', ['controller']],
    ] as const) {
      for (const part of parsers) {
        assert.deepEqual(bounds[setting], { type: 'integer', ...flagBounds(part, flag) }, `settings.${setting} and the ${part}'s --${flag}`);
      }
    }
  });
});

const HELM = process.env.HELM ?? join(homedir(), '.cache/sidecar-terminator/helm-v3.21.4/helm');
const NO_HELM = existsSync(HELM) ? false : `helm is not built (bash e2e/cluster/build-helm.sh builds it into ${HELM})`;
// .ci/run runs this file again once helm is built, with ST_REQUIRE_HELM=1: there a missing helm fails.
if (process.env.ST_REQUIRE_HELM === '1' && NO_HELM) throw new Error(NO_HELM);
const VAP_API = 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy';

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  [field: string]: unknown;
}
type Labels = Record<string, string>;
interface PodTemplate { metadata: { labels: Labels }; spec: { affinity?: Record<string, unknown>; topologySpreadConstraints?: Record<string, unknown>[] } }

/** `helm template` of the chart as for a 1.30+ cluster (the policy API served), with an image, and `args`. */
function render(...args: string[]): Obj[] {
  const text = helmTemplate(...args);
  return (loadAll(text) as (Obj | null)[]).filter((o): o is Obj => o !== null);
}

function helmTemplate(...args: string[]): string {
  try {
    return execFileSync(HELM, ['template', 'st', CHART, '--namespace', 'st-ns', '--set', 'image.repository=registry.example/st', '--api-versions', VAP_API, ...args],
      { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  } catch (err) {
    throw new Error(`helm template ${args.join(' ')}: ${(err as { stderr?: string }).stderr ?? ''}`, { cause: err });
  }
}

const only = (objs: Obj[], kind: string, name: string): Obj => {
  const found = objs.filter((o) => o.kind === kind && o.metadata.name === name);
  assert.equal(found.length, 1, `one ${kind} ${name} in ${objs.map((o) => `${o.kind} ${o.metadata.name}`).join(', ')}`);
  return found[0]!;
};
const podTemplate = (workload: Obj) => (workload.spec as { template: PodTemplate }).template;
const matches = (selector: Labels, labels: Labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

interface Selector {
  /** The kind of object, and the field for those in a Pod template. */
  kind: string;
  where: string;
  matchLabels: Labels;
  /** The component whose Pods it must select (undefined: both). */
  component?: string;
}

/** Every label selector of the rendered objects. */
function selectors(objs: Obj[]): Selector[] {
  const out: Selector[] = [];
  for (const o of objs) {
    const entry = (matchLabels: Labels, field = '') => out.push({
      kind: `${o.kind}${field}`, where: `${o.kind} ${o.metadata.name}${field}`, matchLabels, component: o.metadata.labels?.['app.kubernetes.io/component'],
    });
    const spec = o.spec as { selector: Labels & { matchLabels: Labels }; podSelector: { matchLabels: Labels } };
    if (['Deployment', 'DaemonSet', 'PodDisruptionBudget', 'ServiceMonitor', 'PodMonitor'].includes(o.kind)) entry(spec.selector.matchLabels);
    if (o.kind === 'Service') entry(spec.selector);
    if (o.kind === 'NetworkPolicy') entry(spec.podSelector.matchLabels);
    if (o.kind === 'Deployment') {
      const pod = podTemplate(o).spec;
      const antiAffinity = pod.affinity?.podAntiAffinity as { preferredDuringSchedulingIgnoredDuringExecution?: { podAffinityTerm: { labelSelector: { matchLabels: Labels } } }[] } | undefined;
      for (const term of antiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? []) entry(term.podAffinityTerm.labelSelector.matchLabels, ' podAntiAffinity');
      for (const c of pod.topologySpreadConstraints ?? []) entry((c.labelSelector as { matchLabels: Labels }).matchLabels, ' topologySpreadConstraints');
    }
  }
  return out;
}

describe('the Helm chart, rendered by helm template', { skip: NO_HELM }, () => {
  const everything = ['--set', 'metrics.serviceMonitor.enabled=true', '--set', 'networkPolicy.enabled=true',
    '--set-json', 'controller.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]'];

  for (const [overrides, name] of [[[], 'sidecar-terminator'], [['--set', 'nameOverride=jobs-stopper', '--set', 'fullnameOverride=js'], 'jobs-stopper']] as const) {
    it(`every selector selects its component's Pods by the labels they carry (app.kubernetes.io/name ${name})`, () => {
      const objs = render(...overrides, ...everything);
      const pods = objs.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet').map((w) => podTemplate(w).metadata.labels);
      assert.equal(pods.length, 2);
      const found = selectors(objs);
      assert.deepEqual([...new Set(found.map((s) => s.kind))].sort(),
        ['DaemonSet', 'Deployment', 'Deployment podAntiAffinity', 'Deployment topologySpreadConstraints', 'NetworkPolicy', 'PodDisruptionBudget', 'Service', 'ServiceMonitor'],
        'the walk found every kind of selector');
      for (const s of found) {
        assert.equal(s.matchLabels['app.kubernetes.io/name'], name, `${s.where}: ${JSON.stringify(s.matchLabels)}`);
        const selected = pods.filter((labels) => matches(s.matchLabels, labels)).map((labels) => labels['app.kubernetes.io/component']);
        assert.deepEqual(selected, s.component ? [s.component] : ['agent', 'controller'], `${s.where} selects ${JSON.stringify(s.matchLabels)}`);
      }
      // The controller finds the agent Pods by a flag with the same labels (left out at the program's default).
      const controller = objs.find((o) => o.kind === 'Deployment')!;
      const args = (podTemplate(controller).spec as unknown as { containers: { args: string[] }[] }).containers[0]!.args;
      assert.equal(args.find((a) => a.startsWith('--agent-pod-selector=')),
        name === 'sidecar-terminator' ? undefined : `--agent-pod-selector=app.kubernetes.io/name=${name},app.kubernetes.io/component=agent`);
    });
  }

  it("renders the replicas' spread rule by default, merges an affinity of the user's with it, and leaves it out on request", () => {
    const antiAffinity = (...args: string[]) => podTemplate(render(...args).find((o) => o.kind === 'Deployment')!).spec.affinity;
    const spread = { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, podAffinityTerm: {
      topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { 'app.kubernetes.io/name': 'jobs-stopper', 'app.kubernetes.io/component': 'controller' } } } }] } };
    assert.deepEqual(antiAffinity('--set', 'nameOverride=jobs-stopper'), spread);
    const nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'pool', operator: 'Exists' }] }] } };
    assert.deepEqual(antiAffinity('--set', 'nameOverride=jobs-stopper', '--set-json', `controller.affinity=${JSON.stringify({ nodeAffinity })}`), { ...spread, nodeAffinity });
    const own = { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'zone', labelSelector: { matchLabels: { a: 'b' } } }] };
    assert.deepEqual(antiAffinity('--set-json', `controller.affinity=${JSON.stringify({ podAntiAffinity: own })}`), { podAntiAffinity: own });
    assert.equal(antiAffinity('--set-json', 'controller.affinity={"podAntiAffinity":null}'), undefined);
    assert.equal(antiAffinity('--set-json', 'controller.affinity={"podAntiAffinity":{}}'), undefined);
  });

  it('gives both Pod templates the instance and version labels and commonLabels, every object commonLabels, and keeps the selectors as they were', () => {
    const chart = parseYaml(read(`${CHART}/Chart.yaml`)) as { appVersion: string };
    const objs = render('--set-json', 'commonLabels={"team":"platform"}', '--set-json', 'agent.podLabels={"pool":"a"}', ...everything);
    for (const o of objs) assert.equal(o.metadata.labels?.team, 'platform', `${o.kind} ${o.metadata.name}`);
    for (const [kind, component, podLabels] of [['DaemonSet', 'agent', { pool: 'a' }], ['Deployment', 'controller', {}]] as const) {
      const workload = objs.find((o) => o.kind === kind)!;
      const selector = { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': component };
      // As the chart has always rendered it: a workload's selector cannot change on upgrade.
      assert.deepEqual((workload.spec as { selector: unknown }).selector, { matchLabels: selector });
      assert.deepEqual(podTemplate(workload).metadata.labels, {
        ...selector, 'app.kubernetes.io/instance': 'st', 'app.kubernetes.io/version': chart.appVersion, team: 'platform', ...podLabels,
      });
    }
    assert.throws(() => render('--set-json', 'commonLabels={"app.kubernetes.io/name":"x"}'), /commonLabels: app.kubernetes.io\/name is one of the chart's own labels/);
  });

  it('puts every namespaced object, subject and reference in namespaceOverride', () => {
    const objs = render('--set', 'namespaceOverride=elsewhere', ...everything, '--set', 'metrics.prometheusRule.enabled=true', '--set', 'metrics.grafanaDashboard.enabled=true');
    const clusterScoped = new Set(['CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    for (const o of objs) {
      assert.equal(o.metadata.namespace, clusterScoped.has(o.kind) ? undefined : 'elsewhere', `${o.kind} ${o.metadata.name}`);
      for (const s of (o as { subjects?: { namespace: string }[] }).subjects ?? []) assert.equal(s.namespace, 'elsewhere', `${o.kind} ${o.metadata.name} subject`);
    }
    const text = JSON.stringify(objs);
    assert.match(text, /system:serviceaccount:elsewhere:sidecar-terminator-agent/);
    assert.doesNotMatch(text, /st-ns/, 'nothing names the release namespace');
  });

  it('sets the PodDisruptionBudget from minAvailable, or maxUnavailable when that is set', () => {
    const budget = (...args: string[]) => only(render(...args), 'PodDisruptionBudget', 'sidecar-terminator-controller').spec;
    const selector = { matchLabels: { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': 'controller' } };
    assert.deepEqual(budget(), { minAvailable: 1, selector });
    assert.deepEqual(budget('--set', 'controller.podDisruptionBudget.minAvailable=50%'), { minAvailable: '50%', selector });
    assert.deepEqual(budget('--set', 'controller.podDisruptionBudget.maxUnavailable=1'), { maxUnavailable: 1, selector });
  });

  it('caps the SidecarPolicies of the namespaces it is given with a ResourceQuota each, and of none by default', () => {
    const quotas = (...args: string[]) => render(...args).filter((o) => o.kind === 'ResourceQuota' && o.metadata.name === 'sidecar-policies')
      .map((o) => `${o.metadata.namespace} ${JSON.stringify((o as unknown as { spec: unknown }).spec)}`);
    assert.deepEqual(quotas(), []);
    assert.deepEqual(quotas('--set-json', 'sidecarPolicyQuota.namespaces=["team-a","team-b"]', '--set', 'sidecarPolicyQuota.count=3'), ['team-a', 'team-b']
      .map((ns) => `${ns} {"hard":{"count/sidecarpolicies.sidecar-terminator.dev":"3"}}`));
  });

  it('scrapes with a ServiceMonitor or a PodMonitor, with the scrape options, never both', () => {
    const options = (monitor: string) => ['--set', `metrics.${monitor}.enabled=true`, '--set', `metrics.${monitor}.interval=15s`, '--set', `metrics.${monitor}.scrapeTimeout=10s`,
      '--set-json', `metrics.${monitor}.relabelings=[{"action":"labeldrop","regex":"pod"}]`,
      '--set-json', `metrics.${monitor}.metricRelabelings=[{"action":"drop","sourceLabels":["__name__"],"regex":"nodejs_.*"}]`];
    for (const [monitor, kind, endpoints, role] of [['serviceMonitor', 'ServiceMonitor', 'endpoints', 'service'], ['podMonitor', 'PodMonitor', 'podMetricsEndpoints', 'pod']] as const) {
      const objs = render(...options(monitor));
      assert.deepEqual(objs.filter((o) => o.kind.endsWith('Monitor')).map((o) => o.kind), [kind]);
      const [endpoint] = only(objs, kind, 'sidecar-terminator').spec![endpoints] as Record<string, unknown>[];
      assert.deepEqual(endpoint, {
        port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '10s',
        relabelings: [
          { sourceLabels: [`__meta_kubernetes_${role}_label_app_kubernetes_io_component`], targetLabel: 'component' },
          { sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node' },
          { action: 'labeldrop', regex: 'pod' },
        ],
        metricRelabelings: [{ action: 'drop', sourceLabels: ['__name__'], regex: 'nodejs_.*' }],
      });
    }
    assert.throws(() => render('--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.podMonitor.enabled=true'), /one of them/);
  });

  it('renders NetworkPolicies only when asked: metrics ingress, the API server, DNS, and the agent\'s hooks while it runs them', () => {
    assert.deepEqual(render().filter((o) => o.kind === 'NetworkPolicy'), []);
    const policies = (...args: string[]) => render('--set', 'networkPolicy.enabled=true', ...args).filter((o) => o.kind === 'NetworkPolicy');
    const apiServer = { to: [{ ipBlock: { cidr: '0.0.0.0/0' } }, { ipBlock: { cidr: '::/0' } }], ports: [{ protocol: 'TCP', port: 443 }, { protocol: 'TCP', port: 6443 }] };
    const dns = { ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] };
    const hooks = { to: [{ namespaceSelector: {} }] };
    const [agent, controller] = policies();
    assert.deepEqual([agent?.metadata.name, controller?.metadata.name], ['sidecar-terminator-agent', 'sidecar-terminator-controller']);
    assert.deepEqual(agent!.spec, {
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': 'agent' } },
      policyTypes: ['Ingress', 'Egress'], ingress: [{ ports: [{ protocol: 'TCP', port: 9440 }] }], egress: [apiServer, dns, hooks],
    });
    assert.deepEqual(controller!.spec!.egress, [apiServer, dns]);
    const prometheus = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
    const narrowed = policies('--set', 'agent.preStopHTTPHooks=false', '--set', 'networkPolicy.dns=false', '--set', 'agent.metricsPort=9550',
      '--set-json', 'networkPolicy.apiServer={"cidrs":["10.0.0.1/32"],"ports":[6443]}', '--set-json', `networkPolicy.metricsFrom=${JSON.stringify(prometheus)}`);
    assert.deepEqual(narrowed[0]!.spec!.ingress, [{ ports: [{ protocol: 'TCP', port: 9550 }], from: prometheus }]);
    for (const p of narrowed) assert.deepEqual(p.spec!.egress, [{ to: [{ ipBlock: { cidr: '10.0.0.1/32' } }], ports: [{ protocol: 'TCP', port: 6443 }] }]);
  });

  it('installs the admission policies where the API server serves them (auto), and as told otherwise', () => {
    const render = (...args: string[]) => execFileSync(HELM, ['template', 'st', CHART, '--set', 'image.repository=r', ...args],
      { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    assert.doesNotMatch(render(), /ValidatingAdmissionPolicy|agent-requests/, 'not served: left out, and the release notes say so');
    assert.match(render('--api-versions', 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy'), /kind: ValidatingAdmissionPolicy\n[\s\S]*agent-requests/);
    assert.match(render('--set', 'admissionPolicies.enabled=true'), /kind: ValidatingAdmissionPolicy\n/);
    assert.doesNotMatch(render('--api-versions', 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy', '--set', 'admissionPolicies.enabled=false'), /ValidatingAdmissionPolicy|agent-requests/);
  });

  it("runs the released image of the chart's version by default, as the kustomize base does; an empty repository is refused", () => {
    const pkg = JSON.parse(read('package.json')) as { version: string };
    const template = (...args: string[]) => execFileSync(HELM, ['template', 'st', CHART, '--set', 'admissionPolicies.enabled=false', ...args],
      { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const images = new Set([...template().matchAll(/^ +image: "?([^"\n]+)"?$/gm)].map((m) => m[1]));
    assert.deepEqual([...images], [`ghcr.io/sidecar-terminator/sidecar-terminator:${pkg.version}`]);
    const kustomization = parseYaml(read('manifests/base/kustomization.yaml')) as { images: { newName: string; newTag: string }[] };
    assert.equal(`${kustomization.images[0]?.newName}:${kustomization.images[0]?.newTag}`, [...images][0]);
    assert.throws(() => template('--set', 'image.repository='), (err: { stderr?: string }) => /image\.repository is empty: leave it unset for the released image/.test(err.stderr ?? ''));
  });

  it('passes helm lint --strict with every optional object on', () => {
    execFileSync(HELM, ['lint', '--strict', CHART, '--set', 'image.repository=r', '--set', 'admissionPolicies.enabled=false', ...everything,
      '--set', 'metrics.prometheusRule.enabled=true', '--set', 'metrics.grafanaDashboard.enabled=true', '--set-json', 'commonLabels={"team":"platform"}',
      '--set-json', 'sidecarPolicyQuota.namespaces=["team-a"]'],
    { cwd: new URL('..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'pipe'] });
  });
});
