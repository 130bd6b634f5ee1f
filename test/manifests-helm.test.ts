// The Helm chart (manifests/helm/sidecar-terminator) against its sources, without helm: the files it
// carries are the kustomize manifests' own, its values' defaults are the programs' own defaults and
// the settings ConfigMap's, every flag of both parts is a value (or named here as deliberately not),
// and its schema bounds the settings as the programs do. That the chart renders the kustomize objects is
// checked with a real helm by e2e/helm.test.ts (it needs helm built from Go and kubectl's kustomize).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load as parseYaml } from 'js-yaml';
import { parseAgentConfig } from '../agent/config.ts';
import { CONTROLLER_USAGE, parseControllerConfig } from '../crr/config.ts';

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

/**
 * The flags a workload template passes: `(list "name" .Values.<part>.<key> default)` items, each
 * with its value's key and the default the template leaves out, and the literal `- --name=` args.
 */
function templateFlags(template: string): { values: Map<string, { key: string; programDefault: string }>; literal: Set<string> } {
  const text = read(`${CHART}/templates/${template}`);
  const fromValues = new Map<string, { key: string; programDefault: string }>();
  for (const m of text.matchAll(/\(list "([a-z-]+)" \.Values\.(?:agent|controller)\.(\w+) ("[^"]*"|[^)\s]+)\)/g)) {
    fromValues.set(m[1]!, { key: m[2]!, programDefault: m[3]!.replace(/^"|"$/g, '') });
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

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

describe(`the Helm chart (${CHART})`, () => {
  it("carries the kustomize manifests' CRD, alerts and dashboard byte for byte", () => {
    for (const [copy, source] of [
      ['files/crd.yaml', 'manifests/base/crd.yaml'],
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
      const notValues = new Set(['node-name', 'kubeconfig', 'help', 'version', 'agent-pod-selector']);
      const missing = [...flagsOf(usage)].filter((f) => !fromValues.has(f) && !literal.has(f) && !notValues.has(f));
      assert.deepEqual(missing, [], `flags of the ${part} the chart cannot set`);
      assert.ok(fromValues.size >= 3, `the walk found the ${part}'s flags: ${[...fromValues.keys()].join(', ')}`);

      const program = (part === 'agent' ? parseAgentConfig(['--node-name', 'n'], {}) : parseControllerConfig([], {})) as unknown as Record<string, unknown>;
      const chartValues = values[part];
      for (const [flag, { key, programDefault }] of fromValues) {
        // "" in the chart: not passed (runtime socket: look for one; lease namespace: the Pod's own).
        const expected = flag === 'lease-namespace' ? undefined : program[camel(flag)];
        const asChart = expected === undefined ? '' : String(expected);
        assert.equal(programDefault, asChart, `the template leaves out --${flag}=${programDefault}, the program's default is ${asChart}`);
        assert.equal(String(chartValues[key]), asChart, `values.yaml ${part}.${key} is not the program's default for --${flag}`);
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
