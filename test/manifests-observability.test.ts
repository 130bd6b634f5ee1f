// The optional Grafana dashboard and PrometheusRule (manifests/optional) ask only for series that
// exist: the metrics the agent and the controller register (agent/metrics.ts, crr/metrics.ts, with
// prom-client's process_* and nodejs_* defaults), histograms through their _bucket/_sum/_count
// series, and an explicit list of kube-state-metrics and Prometheus series. The alerts and the
// dashboard use no label that only some scrape configs add, each alert has a runbook page, ratio
// alerts have a volume guard, the Helm chart's thresholds replace the kustomize rule's defaults
// one for one, and every series the programs export is on the dashboard.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { load as parseYaml } from 'js-yaml';
import { createAgentMetrics } from '../agent/metrics.ts';
import { reportClusterInfo } from '../common/kube/cluster-info.ts';
import type { Logger } from '../common/log.ts';
import { createControllerMetrics } from '../crr/metrics.ts';
import type { Registry } from 'prom-client';

const read = (path: string) => readFileSync(new URL(`../manifests/optional/${path}`, import.meta.url), 'utf8');

/** Series from outside the project: Prometheus' own `up`, and kube-state-metrics' DaemonSet status. */
const EXTERNAL_SERIES = new Set([
  'up',
  'kube_daemonset_status_desired_number_scheduled',
  'kube_daemonset_status_number_available',
]);
const HISTOGRAM_SERIES = ['_bucket', '_sum', '_count'];

/** The registries of the two processes, with what each adds once it has read the cluster (kubernetes_info). */
async function programRegistries(): Promise<Registry[]> {
  const registries = [createAgentMetrics().registry, createControllerMetrics().registry];
  const cluster = { get: async <T>(path: string) => (path === '/version' ? { gitVersion: 'v1.37.2' } : { resources: [] }) as T };
  const quiet = { info: () => {}, warn: () => {} } as unknown as Logger;
  for (const registry of registries) await reportClusterInfo(cluster, registry, quiet);
  return registries;
}

/** metric name → type, as the two processes register them. */
async function registeredMetrics(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const registry of await programRegistries()) {
    for (const metric of await registry.getMetricsAsJSON()) out.set(metric.name, String(metric.type));
  }
  return out;
}

const NOT_METRICS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/** The metric names a PromQL expression (or a Grafana label_values() query) selects. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/label_values\(\s*([^,()]+?)\s*,\s*[a-zA-Z_]\w*\s*\)/g, '$1') // Grafana: label_values(metric, label)
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""') // strings (label values, regexes)
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges, $__rate_interval
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // label lists
    .replace(/\$\{?\w+\}?/g, ' '); // Grafana variables
  const names: string[] = [];
  for (const match of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const before = bare[match.index - 1] ?? '';
    if (/[0-9.]/.test(before)) continue; // a number's exponent or a duration's unit
    if (/^\s*\(/.test(bare.slice(match.index + match[0].length))) continue; // a function or an aggregation
    if (NOT_METRICS.has(match[0].toLowerCase())) continue;
    names.push(match[0]);
  }
  return names;
}

/** Why `name` is not a series the project's Prometheus can have, or undefined when it is. */
function unknownSeries(name: string, registered: Map<string, string>): string | undefined {
  if (EXTERNAL_SERIES.has(name)) return undefined;
  const type = registered.get(name);
  if (type === 'histogram') return `${name} is a histogram: use ${HISTOGRAM_SERIES.map((s) => name + s).join(', ')}`;
  if (type) return undefined;
  const suffix = HISTOGRAM_SERIES.find((s) => name.endsWith(s));
  if (suffix && registered.get(name.slice(0, -suffix.length)) === 'histogram') return undefined;
  return `${name} is not registered by the agent or the controller`;
}

interface Target { expr: string; refId: string; legendFormat?: string; datasource?: unknown }
interface Panel { id: number; type: string; title: string; targets?: Target[]; panels?: Panel[] }
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: string | { query: string }; definition?: string }[] };
}

const dashboard = JSON.parse(read('grafana-dashboard.json')) as Dashboard;
const allPanels = (panels: Panel[]): Panel[] => panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);

/** [where, expression] for every query of the dashboard: panel targets and templating queries. */
function dashboardExpressions(): [string, string][] {
  const out: [string, string][] = [];
  for (const panel of allPanels(dashboard.panels)) {
    for (const target of panel.targets ?? []) out.push([`panel "${panel.title}" ${target.refId}`, target.expr]);
  }
  for (const variable of dashboard.templating.list) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    if (query) out.push([`variable ${variable.name}`, query]);
  }
  return out;
}

interface Rule { alert?: string; record?: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
const rule = parseYaml(read('prometheusrule.yaml')) as { kind: string; metadata: { name: string; namespace: string }; spec: { groups: { name: string; rules: Rule[] }[] } };
const rules = rule.spec.groups.flatMap((g) => g.rules);

describe('metricNames', () => {
  it('finds the metrics of an expression and nothing else', () => {
    assert.deepEqual(
      metricNames('histogram_quantile(0.99, sum by (le, action) (rate(a_seconds_bucket{node=~"$node", x="y{z}"}[$__rate_interval])))'),
      ['a_seconds_bucket'],
    );
    assert.deepEqual(metricNames('(max(b{namespace="n"}) or vector(0)) < 1e3'), ['b']);
    assert.deepEqual(metricNames('c - on (pod) group_left (node) d offset 5m > 0.05'), ['c', 'd']);
    assert.deepEqual(metricNames('label_values(e, node)'), ['e']);
  });
});

describe('manifests/optional', () => {
  it('the dashboard queries only series that exist', async () => {
    const registered = await registeredMetrics();
    const expressions = dashboardExpressions();
    const used = new Set(expressions.flatMap(([, expr]) => metricNames(expr)));
    // Guards the extraction itself: what the dashboard is for is found in it.
    for (const name of ['sidecar_terminator_agent_stop_seconds_bucket', 'sidecar_terminator_controller_action_latency_seconds_bucket',
      'sidecar_terminator_agent_requests_completed_total', 'sidecar_terminator_controller_retries_total', 'sidecar_terminator_agent_requests_refused_total',
      'up', 'sidecar_terminator_agent_workqueue_depth', 'sidecar_terminator_agent_runtime_errors_total', 'sidecar_terminator_agent_watch_restarts_total',
      'sidecar_terminator_controller_is_leader', 'sidecar_terminator_agent_build_info', 'sidecar_terminator_controller_build_info']) {
      assert.ok(used.has(name), `the dashboard does not use ${name}`);
    }
    const problems = expressions.flatMap(([where, expr]) => {
      const names = metricNames(expr);
      if (names.length === 0) return [`${where}: no metric in ${expr}`];
      return names.flatMap((name) => unknownSeries(name, registered) ?? []).map((why) => `${where}: ${why}`);
    });
    assert.deepEqual(problems, []);
  });

  it('every series the agent and the controller export is on the dashboard (histograms through their buckets)', async () => {
    const used = new Set(dashboardExpressions().flatMap(([, expr]) => metricNames(expr)));
    const missing = [...await registeredMetrics()]
      .filter(([name]) => name.startsWith('sidecar_terminator_'))
      .filter(([name, type]) => !used.has(type === 'histogram' ? `${name}_bucket` : name))
      .map(([name]) => name);
    assert.deepEqual(missing, []);
  });

  it('the dashboard is importable: a uid, unique panel ids, each query with a refId and the data source variable', () => {
    assert.equal(dashboard.uid, 'sidecar-terminator');
    const panels = allPanels(dashboard.panels);
    assert.equal(new Set(panels.map((p) => p.id)).size, panels.length, 'panel ids are unique');
    assert.ok(dashboard.templating.list.some((v) => v.name === 'datasource' && v.type === 'datasource'));
    for (const panel of panels.filter((p) => p.type !== 'row')) {
      assert.ok(panel.targets?.length, `panel "${panel.title}" has no query`);
      assert.equal(new Set(panel.targets.map((t) => t.refId)).size, panel.targets.length, `panel "${panel.title}": refIds are unique`);
      for (const t of panel.targets) assert.deepEqual(t.datasource, { type: 'prometheus', uid: '${datasource}' });
    }
  });

  it('R51: the alerts query only series that exist, and each says what it is', async () => {
    const registered = await registeredMetrics();
    assert.equal(rule.kind, 'PrometheusRule');
    assert.equal(rule.metadata.namespace, 'sidecar-terminator');
    const alerts = rules.map((r) => r.alert);
    assert.deepEqual(alerts, ['SidecarTerminatorAgentDown', 'SidecarTerminatorDaemonSetNotAvailable', 'SidecarTerminatorAgentNotConfined',
      'SidecarTerminatorRequestsFailing', 'SidecarTerminatorSlowTerminations', 'SidecarTerminatorNoLeader', 'SidecarTerminatorAPIThrottled',
      'SidecarTerminatorAPIErrors', 'SidecarTerminatorRuntimeErrors', 'SidecarTerminatorPodsHeldByUnmarkedSidecars', 'SidecarTerminatorNamespacePolicies',
      'SidecarTerminatorInvalidPolicies']);
    const problems: string[] = [];
    for (const r of rules) {
      const names = metricNames(r.expr);
      if (names.length === 0) problems.push(`${r.alert}: no metric in ${r.expr}`);
      for (const name of names) {
        const why = unknownSeries(name, registered);
        if (why) problems.push(`${r.alert}: ${why}`);
      }
      assert.match(r.for ?? '', /^\d+m$/, `${r.alert}: for`);
      // Critical only where sidecar-terminator stops for the whole cluster (docs/runbooks/README.md).
      assert.equal(r.labels?.severity, r.alert === 'SidecarTerminatorNoLeader' ? 'critical' : 'warning', `${r.alert}: severity`);
      assert.ok(r.annotations?.summary && r.annotations.description, `${r.alert}: summary and description`);
    }
    assert.deepEqual(problems, []);
    const slow = rules.find((r) => r.alert === 'SidecarTerminatorSlowTerminations')!;
    assert.match(slow.expr, /histogram_quantile\(0\.\d+, sum by \(le\) \(rate\(sidecar_terminator_agent_stop_seconds_bucket\[10m\]\)\)\)\s*>\s*30/);
    assert.equal(slow.for, '10m');
  });

  it('the component ships the rule and the dashboard, as a ConfigMap Grafana\'s sidecar picks up', () => {
    const kustomization = parseYaml(read('kustomization.yaml')) as {
      kind: string;
      resources: string[];
      configMapGenerator: { name: string; namespace?: string; files: string[]; options?: { labels?: Record<string, string>; disableNameSuffixHash?: boolean } }[];
    };
    assert.equal(kustomization.kind, 'Component');
    assert.deepEqual(kustomization.resources, ['servicemonitor.yaml', 'prometheusrule.yaml']);
    const generated = kustomization.configMapGenerator.find((g) => g.files.some((f) => f.endsWith('=grafana-dashboard.json')));
    assert.ok(generated, 'no ConfigMap for grafana-dashboard.json');
    assert.equal(generated.namespace, 'sidecar-terminator');
    assert.equal(generated.options?.labels?.grafana_dashboard, '1');
    assert.equal(generated.options?.disableNameSuffixHash, true);
  });
});

/** Labels every scrape has, whatever its service discovery and relabelling: Prometheus' own. */
const SCRAPE_LABELS = ['job', 'instance'];
/** kube-state-metrics' own labels of its DaemonSet series (not target labels). */
const EXTERNAL_LABELS: Record<string, string[]> = {
  up: [],
  kube_daemonset_status_desired_number_scheduled: ['namespace', 'daemonset'],
  kube_daemonset_status_number_available: ['namespace', 'daemonset'],
};

/** The labels a series may carry wherever Prometheus scrapes it: its own, and job and instance. */
function seriesLabels(name: string, registries: Registry[]): string[] {
  if (EXTERNAL_LABELS[name]) return [...EXTERNAL_LABELS[name], ...SCRAPE_LABELS];
  const suffix = HISTOGRAM_SERIES.find((s) => name.endsWith(s));
  for (const base of suffix ? [name.slice(0, -suffix.length), name] : [name]) {
    for (const registry of registries) {
      const metric = registry.getSingleMetric(base) as unknown as { labelNames?: string[] } | undefined;
      if (metric) return [...(metric.labelNames ?? []), ...(suffix === '_bucket' ? ['le'] : []), ...SCRAPE_LABELS];
    }
  }
  throw new Error(`unknown series ${name}`);
}

/** [metric, label names of its matchers] for each selector, and the labels of by/on/without/ignoring clauses. */
function labelsUsed(expr: string): { selectors: [string, string[]][]; grouping: string[] } {
  const text = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const selectors: [string, string[]][] = [];
  for (const m of text.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}/g)) {
    selectors.push([m[1]!, [...m[2]!.matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1]!)]);
  }
  const grouping = [...text.matchAll(/\b(?:by|on|without|ignoring)\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((l) => l.trim()).filter(Boolean));
  return { selectors, grouping };
}

/** Labels `expr` (and `legend`'s {{label}}s) names that its series may lack wherever Prometheus scrapes. */
function unavailableLabels(expr: string, registries: Registry[], legend = ''): string[] {
  const { selectors, grouping } = labelsUsed(expr);
  const available = new Set(metricNames(expr).flatMap((name) => seriesLabels(name, registries)));
  const problems: string[] = [];
  for (const [name, labels] of selectors) {
    const own = new Set(seriesLabels(name, registries));
    for (const label of labels) if (!own.has(label)) problems.push(`${name}{${label}}`);
  }
  for (const label of grouping) if (!available.has(label)) problems.push(`by/on (${label})`);
  for (const [, label] of legend.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) if (!available.has(label!)) problems.push(`{{${label}}} in the legend`);
  return problems;
}

const RUNBOOK_BASE = 'https://github.com/sidecar-terminator/sidecar-terminator/blob/main/docs/runbooks/';

describe('the alerts and the dashboard work wherever Prometheus scrapes', () => {
  it('labelsUsed finds matchers and grouping labels', () => {
    assert.deepEqual(labelsUsed('max by (job, instance) (a{state="x", b=~"y|z"}) and on (job) c{d!="{e}"}'), {
      selectors: [['a', ['state', 'b']], ['c', ['d']]],
      grouping: ['job', 'instance', 'job'],
    });
  });

  it('no alert names a label only some relabelling adds (node, component, pod, namespace of a target)', async () => {
    const registries = await programRegistries();
    const problems: string[] = [];
    for (const r of rules) {
      problems.push(...unavailableLabels(r.expr, registries).map((p) => `${r.alert}: ${p}`));
      const available = new Set(metricNames(r.expr).flatMap((name) => seriesLabels(name, registries)));
      for (const [, label] of JSON.stringify(r.annotations).matchAll(/\$labels\.(\w+)/g)) {
        if (!available.has(label!)) problems.push(`${r.alert}: $labels.${label} in an annotation`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('nor does the dashboard, in its queries, legends and variables: it works with or without the ServiceMonitor', async () => {
    const registries = await programRegistries();
    const problems: string[] = [];
    for (const panel of allPanels(dashboard.panels)) {
      for (const t of panel.targets ?? []) {
        problems.push(...unavailableLabels(t.expr, registries, t.legendFormat).map((p) => `panel "${panel.title}" ${t.refId}: ${p}`));
      }
    }
    for (const [where, query] of dashboardExpressions().filter(([w]) => w.startsWith('variable '))) {
      for (const [, metric, label] of query.matchAll(/label_values\(\s*(\w+)\s*,\s*(\w+)\s*\)/g)) {
        if (!seriesLabels(metric!, registries).includes(label!)) problems.push(`${where}: ${metric} has no label ${label}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('every alert has a runbook_url to its page in docs/runbooks, which says what it means, how to look and what to do', () => {
    for (const r of rules) {
      const url = r.annotations?.runbook_url ?? '';
      assert.equal(url, `${RUNBOOK_BASE}${r.alert}.md`, `${r.alert}: runbook_url`);
      const page = new URL(`../docs/runbooks/${url.slice(RUNBOOK_BASE.length)}`, import.meta.url);
      assert.ok(existsSync(page), `${r.alert}: ${page.pathname} is missing`);
      const text = readFileSync(page, 'utf8');
      assert.match(text, new RegExp(`^# ${r.alert}\\n`), `${r.alert}: the page's title`);
      for (const section of ['What it means', 'How to look', 'What to do']) assert.match(text, new RegExp(`^## ${section}$`, 'm'), `${r.alert}: ${section}`);
      assert.ok(readFileSync(new URL('../docs/runbooks/README.md', import.meta.url), 'utf8').includes(`(${r.alert}.md)`), `${r.alert}: not in docs/runbooks/README.md`);
    }
  });

  it('ratio and percentile alerts fire only with enough volume (never from 1 failure of 1)', () => {
    const guard = /\n\s*and sum(?: by \([\w, ]+\) )?\(increase\(sidecar_terminator_\w+\[\d+m\]\)(?: or increase\(sidecar_terminator_\w+\[\d+m\]\))*\) >= \d+\s*$/;
    for (const r of rules.filter((x) => /\/|histogram_quantile/.test(x.expr))) assert.match(r.expr, guard, `${r.alert}: a volume guard`);
    assert.equal(rules.filter((x) => /and sum(?: by \([\w, ]+\) )?\(increase/.test(x.expr)).length, 4);
  });

  it('an agent not confined to its node alerts, from the state the agent exports', async () => {
    const notConfined = rules.find((r) => r.alert === 'SidecarTerminatorAgentNotConfined')!;
    assert.match(notConfined.expr, /sidecar_terminator_agent_fast_path\{state="not-confined"\}/);
    const metrics = createAgentMetrics();
    metrics.fastPath.set({ state: 'not-confined' }, 1);
    assert.match(await metrics.registry.metrics(), /^sidecar_terminator_agent_fast_path\{state="not-confined"\} 1$/m);
  });
});

describe('the Helm chart\'s PrometheusRule', () => {
  const CHART = '../manifests/helm/sidecar-terminator';
  const template = readFileSync(new URL(`${CHART}/templates/prometheusrule.yaml`, import.meta.url), 'utf8');
  const chartValues = (parseYaml(readFileSync(new URL(`${CHART}/values.yaml`, import.meta.url), 'utf8')) as { metrics: { prometheusRule: Record<string, unknown> } }).metrics.prometheusRule;
  const goString = (literal: string) => (literal.startsWith('`') ? literal.slice(1, -1) : (JSON.parse(literal) as string));
  /** The template's (list FROM (printf TO-FORMAT $values.KEY)) replacements. */
  const replacements = [...template.matchAll(/\(list ("(?:[^"\\]|\\.)*"|`[^`]*`) (?:\(printf ("(?:[^"\\]|\\.)*"|`[^`]*`) (?:\(int64 )?\$values\.(\w+)\)?\)|\$values\.(\w+))\)/g)]
    .map((m) => ({ from: goString(m[1]!), format: m[2] ? goString(m[2]) : '%v', key: (m[3] ?? m[4])! }));

  it('replaces each threshold where the kustomize rule states its default (once), and the runbook address', () => {
    const file = readFileSync(new URL(`${CHART}/files/prometheusrule.yaml`, import.meta.url), 'utf8');
    assert.deepEqual(replacements.map((r) => r.key).sort(),
      ['namespacePolicies', 'requestsFailingMinRequests', 'requestsFailingRatio', 'runbookBaseURL', 'slowStopSeconds', 'slowStopsMinStops']);
    for (const { from, format, key } of replacements) {
      // A threshold once; the runbook address once per alert.
      const times = key === 'runbookBaseURL' ? rules.length : 1;
      assert.equal(file.split(from).length - 1, times, `${JSON.stringify(from)} (${key}) is not in files/prometheusrule.yaml ${times} time(s)`);
      // With the default value, the replacement leaves the text as it is: the chart renders the kustomize rule.
      assert.equal(format.replace('%v', String(chartValues[key])), from, `metrics.prometheusRule.${key}: its default is not the kustomize rule's`);
    }
  });
});
