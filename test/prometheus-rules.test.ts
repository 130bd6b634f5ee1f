// The alerts of manifests/optional/prometheusrule.yaml run by Prometheus' own rule engine:
// `promtool check rules` (expressions and annotation templates parse) and `promtool test rules`
// (each alert fires on the series that mean trouble, and not on the ones that do not: 1 failure of
// 1, a target that is not an agent, a leader present). promtool is built from its Go module by
// e2e/cluster/build-promtool.sh and cached; without it these tests say so and do not run (CI
// requires it).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump as toYaml, load as parseYaml } from 'js-yaml';

const PROMTOOL = process.env.PROMTOOL ?? join(homedir(), '.cache/sidecar-terminator/promtool-v0.316.0/promtool');
const NO_PROMTOOL = existsSync(PROMTOOL) ? false : `promtool is not built (bash e2e/cluster/build-promtool.sh builds it into ${PROMTOOL})`;
const HELM = process.env.HELM ?? join(homedir(), '.cache/sidecar-terminator/helm-v3.21.4/helm');
const NO_HELM = NO_PROMTOOL || (existsSync(HELM) ? false : `helm is not built (bash e2e/cluster/build-helm.sh builds it into ${HELM})`);
// .ci/run builds both and sets ST_REQUIRE_PROMTOOL=1: there a missing tool fails the run instead of skipping.
if (process.env.ST_REQUIRE_PROMTOOL === '1' && NO_HELM) throw new Error(NO_HELM);

interface Rule { alert: string; expr: string; for: string; labels: Record<string, string>; annotations: Record<string, string> }
const rule = parseYaml(readFileSync(new URL('../manifests/optional/prometheusrule.yaml', import.meta.url), 'utf8')) as { spec: { groups: { name: string; rules: Rule[] }[] } };

/** The agent's and the controller's labels as any scrape gives them: job and instance only. */
const AGENT = 'job="agents", instance="10.0.0.1:9440"';
const BUILD = 'version="0.1.0", commit="", node_version="v24.0.0"';
const warning = (labels: Record<string, string> = {}) => ({ exp_labels: { severity: 'warning', ...labels } });
const critical = (labels: Record<string, string> = {}) => ({ exp_labels: { severity: 'critical', ...labels } });
const CONTROLLER = 'job="controllers", instance="10.0.1.1:9441"';

interface AlertTest { eval_time: string; alertname: string; exp_alerts: { exp_labels: Record<string, string> }[] }
const test = (input: [string, string][], alerts: AlertTest[]) => ({
  interval: '1m',
  input_series: input.map(([series, values]) => ({ series, values })),
  alert_rule_test: alerts,
});
const at = (evalTime: string, alertname: string, ...expAlerts: { exp_labels: Record<string, string> }[]): AlertTest => ({ eval_time: evalTime, alertname, exp_alerts: expAlerts });

const TESTS = [
  // An agent stops answering its scrapes; another target that is down was never an agent.
  test([
    [`up{${AGENT}}`, '1x10 0x30'],
    [`sidecar_terminator_agent_build_info{${AGENT}, ${BUILD}}`, '1x10 stale'],
    ['up{job="other", instance="10.0.0.9:80"}', '0x40'],
  ], [
    at('14m', 'SidecarTerminatorAgentDown'),
    at('17m', 'SidecarTerminatorAgentDown', warning({ job: 'agents', instance: '10.0.0.1:9440' })),
  ]),
  // kube-state-metrics: one node of three without an available agent.
  test([
    ['kube_daemonset_status_desired_number_scheduled{job="ksm", instance="ksm:8080", namespace="sidecar-terminator", daemonset="sidecar-terminator-agent"}', '3x30'],
    ['kube_daemonset_status_number_available{job="ksm", instance="ksm:8080", namespace="sidecar-terminator", daemonset="sidecar-terminator-agent"}', '2x30'],
  ], [
    at('14m', 'SidecarTerminatorDaemonSetNotAvailable'),
    at('16m', 'SidecarTerminatorDaemonSetNotAvailable', warning({ job: 'ksm', instance: 'ksm:8080', namespace: 'sidecar-terminator', daemonset: 'sidecar-terminator-agent' })),
  ]),
  // One agent not confined to its node, another enabled.
  test([
    [`sidecar_terminator_agent_fast_path{${AGENT}, state="not-confined"}`, '1x30'],
    [`sidecar_terminator_agent_fast_path{${AGENT}, state="enabled"}`, '0x30'],
    ['sidecar_terminator_agent_fast_path{job="agents", instance="10.0.0.2:9440", state="enabled"}', '1x30'],
    ['sidecar_terminator_agent_fast_path{job="agents", instance="10.0.0.2:9440", state="not-confined"}', '0x30'],
  ], [
    at('14m', 'SidecarTerminatorAgentNotConfined'),
    at('16m', 'SidecarTerminatorAgentNotConfined', warning({ job: 'agents', instance: '10.0.0.1:9440' })),
  ]),
  // A request every 10 minutes, each one failing: 100% failed, but 1 or 2 in 15 minutes is no trend.
  test([[`sidecar_terminator_agent_requests_completed_total{${AGENT}, outcome="failed"}`, '0+0.1x60']], [
    at('20m', 'SidecarTerminatorRequestsFailing'),
    at('40m', 'SidecarTerminatorRequestsFailing'),
  ]),
  // 2 of every 12 requests fail, 12 a minute.
  test([
    [`sidecar_terminator_agent_requests_completed_total{${AGENT}, outcome="succeeded"}`, '0+10x60'],
    [`sidecar_terminator_agent_requests_completed_total{${AGENT}, outcome="failed"}`, '0+2x60'],
  ], [
    at('10m', 'SidecarTerminatorRequestsFailing'),
    at('30m', 'SidecarTerminatorRequestsFailing', warning()),
  ]),
  // Few stops, all slow: no percentile to speak of.
  test([
    [`sidecar_terminator_agent_stop_seconds_bucket{${AGENT}, le="30"}`, '0x40'],
    [`sidecar_terminator_agent_stop_seconds_bucket{${AGENT}, le="60"}`, '0+0.2x40'],
    [`sidecar_terminator_agent_stop_seconds_bucket{${AGENT}, le="+Inf"}`, '0+0.2x40'],
    [`sidecar_terminator_agent_stop_seconds_count{${AGENT}}`, '0+0.2x40'],
  ], [
    at('30m', 'SidecarTerminatorSlowTerminations'),
  ]),
  // Two stops a minute, all between 30 and 60 s.
  test([
    [`sidecar_terminator_agent_stop_seconds_bucket{${AGENT}, le="30"}`, '0x40'],
    [`sidecar_terminator_agent_stop_seconds_bucket{${AGENT}, le="60"}`, '0+2x40'],
    [`sidecar_terminator_agent_stop_seconds_bucket{${AGENT}, le="+Inf"}`, '0+2x40'],
    [`sidecar_terminator_agent_stop_seconds_count{${AGENT}}`, '0+2x40'],
  ], [
    at('8m', 'SidecarTerminatorSlowTerminations'),
    at('30m', 'SidecarTerminatorSlowTerminations', warning()),
  ]),
  // No controller scraped at all, then one that leads.
  test([['sidecar_terminator_controller_is_leader{job="controllers", instance="10.0.1.1:9441"}', '_x10 0 1x30']], [
    at('7m', 'SidecarTerminatorNoLeader', critical()),
    at('30m', 'SidecarTerminatorNoLeader'),
  ]),
  // Two replicas, neither leading.
  test([
    ['sidecar_terminator_controller_is_leader{job="controllers", instance="10.0.1.1:9441"}', '0x30'],
    ['sidecar_terminator_controller_is_leader{job="controllers", instance="10.0.1.2:9441"}', '0x30'],
  ], [
    at('4m', 'SidecarTerminatorNoLeader'),
    at('6m', 'SidecarTerminatorNoLeader', critical()),
  ]),
  // The controller: 20 requests a minute, 5 of them 429 (a quarter); the agents: 60 a minute, 1 a 429.
  test([
    [`sidecar_terminator_controller_api_requests_total{${CONTROLLER}, verb="create", resource="containerrecreaterequests", code="201"}`, '0+15x40'],
    [`sidecar_terminator_controller_api_requests_total{${CONTROLLER}, verb="create", resource="containerrecreaterequests", code="429"}`, '0+5x40'],
    [`sidecar_terminator_agent_api_requests_total{${AGENT}, verb="patch", resource="containerrecreaterequests/status", code="200"}`, '0+59x40'],
    [`sidecar_terminator_agent_api_requests_total{${AGENT}, verb="patch", resource="containerrecreaterequests/status", code="429"}`, '0+1x40'],
  ], [
    at('8m', 'SidecarTerminatorAPIThrottled'),
    at('25m', 'SidecarTerminatorAPIThrottled', warning({ job: 'controllers' })),
  ]),
  // Throttled by half, but 5 requests in 10 minutes: no trend.
  test([
    [`sidecar_terminator_controller_api_requests_total{${CONTROLLER}, verb="get", resource="leases", code="200"}`, '0+0.25x40'],
    [`sidecar_terminator_controller_api_requests_total{${CONTROLLER}, verb="get", resource="leases", code="429"}`, '0+0.25x40'],
  ], [
    at('30m', 'SidecarTerminatorAPIThrottled'),
  ]),
  // The agents: 10 requests a minute, 1 of them a 503 and 1 without an answer.
  test([
    [`sidecar_terminator_agent_api_requests_total{${AGENT}, verb="list", resource="pods", code="200"}`, '0+8x40'],
    [`sidecar_terminator_agent_api_requests_total{${AGENT}, verb="list", resource="pods", code="503"}`, '0+1x40'],
    [`sidecar_terminator_agent_api_requests_total{${AGENT}, verb="create", resource="events", code="error"}`, '0+1x40'],
    [`sidecar_terminator_agent_api_requests_total{${AGENT}, verb="create", resource="events", code="409"}`, '0+0x40'],
  ], [
    at('8m', 'SidecarTerminatorAPIErrors'),
    at('25m', 'SidecarTerminatorAPIErrors', warning({ job: 'agents' })),
  ]),
  // One runtime error a minute on one agent; another agent's single error is no trouble.
  test([
    [`sidecar_terminator_agent_runtime_errors_total{${AGENT}, method="StopContainer"}`, '0+1x40'],
    ['sidecar_terminator_agent_runtime_errors_total{job="agents", instance="10.0.0.2:9440", method="ContainerStatus"}', '0 1x40'],
  ], [
    at('8m', 'SidecarTerminatorRuntimeErrors'),
    at('25m', 'SidecarTerminatorRuntimeErrors', warning({ job: 'agents', instance: '10.0.0.1:9440' })),
  ]),
  // Two Pods held by an unmarked Istio proxy for 40 minutes, one by Dapr's for 10 (released): the
  // standby replica exports no series.
  test([
    [`sidecar_terminator_controller_pods_held_by_unmarked_sidecars{${CONTROLLER}, sidecar="istio"}`, '2x40'],
    [`sidecar_terminator_controller_pods_held_by_unmarked_sidecars{${CONTROLLER}, sidecar="dapr"}`, '1x10 0x30'],
  ], [
    at('20m', 'SidecarTerminatorPodsHeldByUnmarkedSidecars'),
    at('35m', 'SidecarTerminatorPodsHeldByUnmarkedSidecars', warning({ sidecar: 'istio' })),
  ]),
  // One namespace with 60 SidecarPolicies from minute 10 on; 50 (the threshold) is no trouble.
  test([
    [`sidecar_terminator_controller_namespace_policies_max{${CONTROLLER}}`, '50x10 60x30'],
  ], [
    at('20m', 'SidecarTerminatorNamespacePolicies'),
    at('30m', 'SidecarTerminatorNamespacePolicies', warning()),
  ]),
  // An invalid SidecarPolicy for 30 minutes; an invalid cluster policy fixed after 10.
  test([
    [`sidecar_terminator_controller_invalid_policies{${CONTROLLER}, kind="SidecarPolicy"}`, '1x30'],
    [`sidecar_terminator_controller_invalid_policies{${CONTROLLER}, kind="ClusterSidecarPolicy"}`, '1x10 0x20'],
  ], [
    at('10m', 'SidecarTerminatorInvalidPolicies'),
    at('20m', 'SidecarTerminatorInvalidPolicies', warning({ kind: 'SidecarPolicy' })),
  ]),
];

function promtool(...args: string[]): string {
  try {
    return execFileSync(PROMTOOL, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`promtool ${args.join(' ')}:\n${e.stdout ?? ''}${e.stderr ?? e.message}`, { cause: err });
  }
}

describe('the alerts in Prometheus\' rule engine (promtool)', { skip: NO_PROMTOOL }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'st-rules-'));

  it('promtool check rules: every expression and annotation template is valid', () => {
    writeFileSync(join(dir, 'rules.yaml'), toYaml({ groups: rule.spec.groups }));
    assert.match(promtool('check', 'rules', join(dir, 'rules.yaml')), /SUCCESS: 12 rules found/);
  });

  it('the chart renders the same rules with its defaults, and valid rules with its thresholds set', { skip: NO_HELM }, () => {
    const chart = (...sets: string[]) => {
      const out = execFileSync(HELM, ['template', 'st', new URL('../manifests/helm/sidecar-terminator', import.meta.url).pathname, '-n', 'sidecar-terminator',
        '--set', 'image.repository=registry.example/st', '--set', 'admissionPolicies.enabled=false', '--set', 'metrics.prometheusRule.enabled=true', ...sets.flatMap((x) => ['--set', x]),
        '-s', 'templates/prometheusrule.yaml'], { encoding: 'utf8' });
      return (parseYaml(out) as { spec: { groups: unknown[] } }).spec;
    };
    assert.deepEqual(chart(), rule.spec);
    const set = chart('metrics.prometheusRule.requestsFailingRatio=0.2', 'metrics.prometheusRule.requestsFailingMinRequests=50',
      'metrics.prometheusRule.slowStopSeconds=45.5', 'metrics.prometheusRule.slowStopsMinStops=7');
    const exprs = JSON.stringify(set);
    for (const part of ['> 0.2\\n', '[15m])) >= 50', '> 45.5\\n', '[10m])) >= 7']) assert.ok(exprs.includes(part), part);
    writeFileSync(join(dir, 'chart.yaml'), toYaml(set));
    assert.match(promtool('check', 'rules', join(dir, 'chart.yaml')), /SUCCESS: 12 rules found/);
    // One Prometheus for several clusters: every aggregation and match keeps them apart.
    const byCluster = chart('metrics.prometheusRule.clusterLabel=cluster') as { groups: { rules: { alert: string; expr: string }[] }[] };
    for (const r of byCluster.groups[0]!.rules) {
      assert.doesNotMatch(r.expr, /\b(?:sum|max)\(/, `${r.alert}: an aggregation over every cluster`);
      for (const [clause] of r.expr.matchAll(/\b(?:by|on) \([^)]*\)/g)) assert.match(clause, /\(cluster[,)]/, `${r.alert}: ${clause}`);
    }
    writeFileSync(join(dir, 'clusters.yaml'), toYaml(byCluster));
    assert.match(promtool('check', 'rules', join(dir, 'clusters.yaml')), /SUCCESS: 12 rules found/);
  });

  it('promtool test rules: each alert fires on trouble, and not from too little of it', () => {
    // The logic, without the annotations (promtool would compare their rendered text too).
    const groups = rule.spec.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }) => r) }));
    writeFileSync(join(dir, 'logic.yaml'), toYaml({ groups }));
    const covered = new Set(TESTS.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    assert.deepEqual([...covered].sort(), rule.spec.groups.flatMap((g) => g.rules.map((r) => r.alert)).sort(), 'every alert is seen firing');
    writeFileSync(join(dir, 'tests.yaml'), toYaml({ rule_files: ['logic.yaml'], evaluation_interval: '1m', tests: TESTS }));
    assert.match(promtool('test', 'rules', join(dir, 'tests.yaml')), /SUCCESS/);
  });
});
