// `npm run bench`: the benchmarks of sidecar-terminator on the local cluster (e2e/run.sh brings it
// up and tears it down). Writes bench/results.json and bench/latency.png (and .svg), prints a table.
//   1. termination latency vs native sidecars   2. a burst of 100 Jobs   3. the agent's footprint
//   4. the controller with 20,000 Pods   5. a soak of Jobs finishing for 30 minutes (memory over time)
// Targets are reported, not asserted. BENCH_PARTS=latency,burst,scale,soak selects parts (default
// all); the results of parts not run are kept from the previous results.json. On the oldest
// supported release (e2e/cluster/versions.env; bench/run.sh runs it after the newest) only part 1
// runs, ours alone (no native sidecars there), into `latencyOldest` of the same results.json.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import type { Context } from './context.ts';
import { createContext } from './context.ts';
import type { AgentResult, BurstResult } from './burst.ts';
import { runBurst } from './burst.ts';
import type { NativeBurstResult } from './burst-native.ts';
import { runNativeBurst } from './burst-native.ts';
import { renderChart, writeChart } from './chart.ts';
import type { LatencyResult } from './latency.ts';
import { runLatency } from './latency.ts';
import type { ScaleResult } from './scale.ts';
import { leaderTarget, runScale } from './scale.ts';
import { deploy } from './setup.ts';
import type { SoakResult } from './soak.ts';
import { runSoak } from './soak.ts';
import { MB } from './stats.ts';

const HERE = new URL('.', import.meta.url).pathname;
const ROOT = join(HERE, '..');
const num = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt);

interface Target {
  what: string;
  target: string;
  value: string;
  met: boolean | null;
}

interface Results {
  generatedAt: string;
  durationSeconds: number;
  environment: Record<string, unknown>;
  deployment: Record<string, unknown>;
  targets: Target[];
  latency?: LatencyResult;
  /** Part 1 on the oldest supported release: ours alone. */
  latencyOldest?: LatencyResult & { kubernetes: string; generatedAt: string; commit: unknown };
  burst?: BurstResult;
  burstNative?: NativeBurstResult;
  agent?: AgentResult;
  controller?: ScaleResult;
  soak?: SoakResult;
  /** The parts measured by this run; the others' results come from the previous results.json. */
  partsRun: string[];
  errors: Record<string, string>;
}

async function main(): Promise<void> {
  const started = Date.now();
  const parts = new Set((process.env.BENCH_PARTS ?? 'latency,burst,scale,soak').split(',').map((s) => s.trim()));
  const ctx = await createContext();
  if (await onOldestRelease(ctx)) return latencyOnOldest(ctx, started);
  const deployed = await deploy(ctx);
  const results: Results = {
    generatedAt: new Date().toISOString(),
    durationSeconds: 0,
    environment: await environment(ctx),
    deployment: {
      how: 'kubectl apply -k of manifests/base through the e2e overlay (image built offline), then the flags set back to the shipped defaults',
      agentArgs: deployed.args.agent,
      controllerArgs: deployed.args.controller,
      agentPod: deployed.agent.metadata!.name,
      controllerLeader: deployed.leader.metadata!.name,
    },
    targets: [],
    partsRun: [...parts],
    errors: {},
  };
  const attempt = async <T>(part: string, fn: () => Promise<T>): Promise<T | undefined> => {
    if (!parts.has(part)) return undefined;
    const t0 = Date.now();
    try {
      const r = await fn();
      ctx.log(`${part}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      return r;
    } catch (err) {
      results.errors[part] = err instanceof Error ? (err.stack ?? err.message) : String(err);
      ctx.log(`${part}: FAILED: ${results.errors[part]}`);
      return undefined;
    }
  };

  results.latency = await attempt('latency', () => runLatency(ctx, num('BENCH_LATENCY_JOBS', 50), num('BENCH_LATENCY_BATCH', 10)));
  const burst = await attempt('burst', () => runBurst(ctx, deployed.agent, num('BENCH_BURST_JOBS', 100)));
  results.burst = burst?.burst;
  results.agent = burst?.agent;
  results.burstNative = await attempt('burst', () => runNativeBurst(ctx, num('BENCH_BURST_JOBS', 100)));
  results.controller = await attempt('scale', () => runScale(ctx, leaderTarget(deployed.leader), {
    pods: num('BENCH_SCALE_PODS', 20_000),
    nodes: num('BENCH_SCALE_NODES', 20),
    rate: num('BENCH_SCALE_RATE', 250),
    waveSeconds: num('BENCH_SCALE_SECONDS', 20),
  }));

  results.soak = await attempt('soak', () => runSoak(ctx, deployed.agent, deployed.leader, {
    minutes: num('BENCH_SOAK_MINUTES', 30),
    everySeconds: num('BENCH_SOAK_EVERY_SECONDS', 3),
    warmupMinutes: num('BENCH_SOAK_WARMUP_MINUTES', 5),
  }));

  results.durationSeconds = Math.round((Date.now() - started) / 1000);
  const out = outDir();
  mkdirSync(out, { recursive: true });
  keepPreviousParts(results, join(out, 'results.json'), parts);
  results.targets = targets(results);
  writeResults(results, join(out, 'results.json'));
  const png = chart(results, join(out, 'latency.svg'), join(out, 'latency.png'));
  printTable(results);
  console.log(`bench: wrote ${join(out, 'results.json')}${png ? ` and ${join(out, 'latency.png')}` : ''} after ${results.durationSeconds} s`);
  ctx.cri.close();
  ctx.kube.close();
  if (Object.keys(results.errors).length > 0) process.exitCode = 1;
}

const outDir = () => process.env.BENCH_OUT_DIR ?? HERE;

function writeResults(results: Results, path: string): void {
  // Arrays of numbers on one line each: the file stays readable.
  const json = JSON.stringify(results, null, 2).replace(/\[\s+(-?[\d.]+(?:,\s+-?[\d.]+)*)\s+\]/g, (_m, inner: string) => `[${inner.split(/,\s+/).join(', ')}]`);
  writeFileSync(path, `${json}\n`);
}

async function onOldestRelease(ctx: Context): Promise<boolean> {
  const releases = readFileSync(join(ROOT, 'e2e/cluster/versions.env'), 'utf8');
  const oldest = /^K8S_OLDEST=(\S+)/m.exec(releases)?.[1];
  return (await ctx.kube.get<{ gitVersion: string }>('/version')).gitVersion === oldest;
}

/** Part 1 alone, ours only, into the latencyOldest of the newest release's results.json. */
async function latencyOnOldest(ctx: Context, started: number): Promise<void> {
  const path = join(outDir(), 'results.json');
  const results = JSON.parse(readFileSync(path, 'utf8')) as Results;
  await deploy(ctx);
  const env = await environment(ctx);
  ctx.log(`latency on the oldest supported release (${String(env.kubernetes)}): ours alone`);
  const latency = await runLatency(ctx, num('BENCH_LATENCY_JOBS', 50), num('BENCH_LATENCY_BATCH', 10), false);
  results.latencyOldest = { kubernetes: String(env.kubernetes), generatedAt: new Date().toISOString(), commit: env.commit, ...latency };
  results.targets = targets(results);
  writeResults(results, path);
  printTable(results);
  console.log(`bench: wrote latencyOldest into ${path} after ${Math.round((Date.now() - started) / 1000)} s`);
  ctx.cri.close();
  ctx.kube.close();
}

/** Parts not run this time keep their results (and say when they were measured). */
function keepPreviousParts(results: Results, path: string, parts: ReadonlySet<string>): void {
  let previous: Partial<Results>;
  try {
    previous = JSON.parse(readFileSync(path, 'utf8')) as Partial<Results>;
  } catch {
    return;
  }
  // The oldest release's figures are always kept: that run writes them itself.
  if (previous.latencyOldest) results.latencyOldest = previous.latencyOldest;
  const keys: Record<string, (keyof Results)[]> = { latency: ['latency'], burst: ['burst', 'burstNative', 'agent'], scale: ['controller'], soak: ['soak'] };
  const kept: string[] = [];
  for (const [part, fields] of Object.entries(keys)) {
    if (parts.has(part)) continue;
    for (const field of fields) if (previous[field] !== undefined) Object.assign(results, { [field]: previous[field] });
    kept.push(part);
  }
  if (kept.length > 0) results.environment.previousPartsFrom = `${kept.join(', ')}: ${previous.generatedAt ?? '?'} (commit ${String(previous.environment?.commit)})`;
}

async function environment(ctx: Context): Promise<Record<string, unknown>> {
  const version = await ctx.kube.get<{ gitVersion: string }>('/version');
  const runtime = await ctx.cri.version();
  const git = (args: string[]) => { try { return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim(); } catch { return undefined; } };
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    kubernetes: version.gitVersion,
    runtime: `${runtime.runtimeName} ${runtime.runtimeVersion}`,
    node: process.version,
    commit: git(['rev-parse', '--short', 'HEAD']),
    uncommittedChanges: Boolean(git(['status', '--porcelain', '--', 'agent', 'crr', 'common', 'manifests'])),
    cluster: 'one node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, containerd on this machine (e2e/cluster)',
  };
}

function targets(r: Results): Target[] {
  const t: Target[] = [];
  const add = (what: string, target: string, value: number | undefined, unit: string, ok: (v: number) => boolean) =>
    t.push({ what, target, value: value === undefined || Number.isNaN(value) ? 'not measured' : `${value}${unit}`, met: value === undefined || Number.isNaN(value) ? null : ok(value) });
  add('ours / native, main finished → sidecar finished, p50', '≤ 1.0', r.latency?.ratio?.mainToSidecarP50, '', (v) => v <= 1.0);
  // Reported without a target: no native sidecars to compare with, and no fast path before 1.30
  // (the controller acts on kubelet's report of the mains, which comes with its relist, ≤ 1 s).
  const oldestP50 = r.latencyOldest?.ours.mainToSidecarMs.p50;
  t.push({ what: `${r.latencyOldest?.kubernetes ?? 'oldest release'}, ours alone: main finished → sidecar finished, p50`, target: 'none (no native sidecars; no fast path before 1.30)', value: oldestP50 === undefined ? 'not measured' : `${oldestP50} ms`, met: null });
  add('burst of 100: main → sidecar finished, p99', '< 2000 ms', r.burst?.mainToSidecarMs.p99, ' ms', (v) => v < 2000);
  add('burst of 100: missed', '0', r.burst?.missed, '', (v) => v === 0);
  // Figures are in MiB; the targets in MB (10^6 bytes).
  const withinMB = (limit: number) => (mib: number) => mib * MB <= limit * 1e6;
  add(`agent RSS, ${r.agent?.podsOnNode ?? '≥100'} Pods on its node, idle`, '≤ 60 MB (57.2 MiB)', r.agent?.rssIdleMB, ' MiB', withinMB(60));
  add('agent RSS, peak during the burst', '≤ 60 MB (57.2 MiB)', r.agent?.rssPeakBurstMB, ' MiB', withinMB(60));
  add('agent CPU, 60 s idle', '≤ 1 millicore', r.agent?.idle.millicores, ' millicores', (v) => v <= 1);
  add(`controller RSS, ${r.controller?.podsInApi ?? 20000} Pods`, '≤ 150 MB (143.1 MiB)', r.controller?.controller.rssAt20kMB, ' MiB', withinMB(150));
  add('controller RSS, peak during the finishing wave', '≤ 150 MB (143.1 MiB)', r.controller?.controller.rssPeakMB, ' MiB', withinMB(150));
  add('controller: status update → request created, p99', '≤ 50 ms', r.controller?.latencyMs.p99, ' ms', (v) => v <= 50);
  add('soak: agent RSS slope after warm-up', '≤ 2 MiB/hour (flat)', r.soak?.agent.slopeMiBPerHour, ' MiB/h', (v) => v <= 2);
  add('soak: controller RSS slope after warm-up', '≤ 2 MiB/hour (flat)', r.soak?.controller.slopeMiBPerHour, ' MiB/h', (v) => v <= 2);
  t.push({ what: 'controller kept up', target: `≥ 200 Pods finishing per second`, value: r.controller ? `${r.controller.keptUp ? 'yes' : 'no'}: ${r.controller.keptUpReason}` : 'not measured', met: r.controller ? r.controller.keptUp : null });
  return t;
}

function printTable(r: Results): void {
  const rows: string[][] = [['', 'value', 'target', '']];
  const percentiles = (s: { p50: number; p90: number; p99: number }) => `${s.p50} / ${s.p90} / ${s.p99} ms`;
  if (r.latency) {
    const { ours, native, ratio } = r.latency;
    rows.push(['main → sidecar finished, ours p50/p90/p99', percentiles(ours.mainToSidecarMs), '', '']);
    if (native) rows.push(['main → sidecar finished, native p50/p90/p99', percentiles(native.mainToSidecarMs), '', '']);
    rows.push(['Job created → complete, ours p50/p90/p99', percentiles(ours.createdToCompleteMs), '', '']);
    if (native) rows.push(['Job created → complete, native p50/p90/p99', percentiles(native.createdToCompleteMs), '', '']);
    if (ratio) rows.push(['ratio ours / native (main → sidecar p50, Job p50)', `${ratio.mainToSidecarP50}, ${ratio.createdToCompleteP50}`, '', '']);
  }
  if (r.latencyOldest) {
    const { kubernetes, ours } = r.latencyOldest;
    rows.push([`${kubernetes}: main → sidecar finished, ours p50/p90/p99`, percentiles(ours.mainToSidecarMs), '', '']);
    rows.push([`${kubernetes}: Job created → complete, ours p50/p90/p99`, percentiles(ours.createdToCompleteMs), '', '']);
  }
  if (r.burst) rows.push(['burst, ours: p50 / p99, missed, main spread', `${r.burst.mainToSidecarMs.p50} / ${r.burst.mainToSidecarMs.p99} ms, ${r.burst.missed}, ${r.burst.mainFinishSpreadMs} ms`, '', '']);
  if (r.burst) rows.push(['burst, ours: main → reported → request → sidecar p50', `${r.burst.breakdown.mainToReportedMs.p50} + ${r.burst.breakdown.reportedToRequestMs.p50} + ${r.burst.breakdown.requestToSidecarFinishedMs.p50} ms`, '', '']);
  if (r.burstNative) rows.push(['burst, native sidecars: p50 / p99, missed', `${r.burstNative.mainToSidecarMs.p50} / ${r.burstNative.mainToSidecarMs.p99} ms, ${r.burstNative.missed}`, '', '']);
  if (r.agent) {
    rows.push(['agent CPU during the burst', `${r.agent.burst.cpuSeconds} s over ${r.agent.burst.windowSeconds} s`, '', '']);
    rows.push(['agent API requests: idle 60 s / burst', `${r.agent.idle.apiRequests} / ${r.agent.burst.apiRequests} (${r.agent.burst.apiRequestsPerJob} per Job)`, '', '']);
  }
  if (r.controller) {
    const c = r.controller;
    rows.push(['controller: status → request p50 / p99 / max', `${c.latencyMs.p50} / ${c.latencyMs.p99} / ${c.latencyMs.max} ms (n=${c.latencyMs.n}, ${c.achievedRate}/s)`, '', '']);
    rows.push(['controller API requests per finished Pod', `${c.controller.apiRequestsPerFinishedPod}`, '', '']);
  }
  if (r.soak) {
    const { agent, controller } = r.soak;
    rows.push([`soak ${r.soak.minutes} min: Jobs complete / created`, `${r.soak.jobsComplete} / ${r.soak.jobsCreated}`, '', '']);
    rows.push(['soak: agent RSS start / end / max', `${agent.startMiB} / ${agent.endMiB} / ${agent.maxMiB} MiB, ${agent.restarts} gaps`, '', '']);
    rows.push(['soak: controller RSS start / end / max', `${controller.startMiB} / ${controller.endMiB} / ${controller.maxMiB} MiB, ${controller.restarts} gaps`, '', '']);
  }
  rows.push(['', '', '', '']);
  for (const t of r.targets) rows.push([t.what, t.value, t.target, t.met === null ? '-' : t.met ? 'met' : 'MISSED']);
  const widths = [0, 1, 2, 3].map((i) => Math.min(i === 1 ? 70 : 200, Math.max(...rows.map((row) => row[i]!.length))));
  for (const row of rows) console.log(row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  for (const [part, err] of Object.entries(r.errors)) console.log(`ERROR in ${part}: ${err.split('\n')[0]}`);
}

function chart(r: Results, svgPath: string, pngPath: string): boolean {
  const ours = r.latency?.samples.filter((s) => s.kind === 'ours') ?? [];
  const native = r.latency?.samples.filter((s) => s.kind === 'native') ?? [];
  const oldest = r.latencyOldest?.samples ?? [];
  const oldestSeries = (pick: (s: { mainToSidecarMs: number; createdToCompleteMs: number }) => number) =>
    oldest.length > 0 ? [{ label: `sidecar-terminator on ${r.latencyOldest!.kubernetes}`, color: '#17becf', values: oldest.map(pick) }] : [];
  const svg = renderChart(
    'sidecar-terminator benchmarks: latency distributions (empirical CDFs)',
    [
      {
        title: '1. main finished → sidecar finished (50 Jobs each)',
        xLabel: 'ms (containerd finishedAt of both containers)',
        series: [{ label: 'sidecar-terminator', color: '#1f77b4', values: ours.map((s) => s.mainToSidecarMs) }, { label: 'native sidecar', color: '#ff7f0e', values: native.map((s) => s.mainToSidecarMs) }, ...oldestSeries((s) => s.mainToSidecarMs)],
      },
      {
        title: '1. Job created → Job complete',
        xLabel: 'ms (create sent → Complete condition seen on a watch)',
        series: [{ label: 'sidecar-terminator', color: '#1f77b4', values: ours.map((s) => s.createdToCompleteMs) }, { label: 'native sidecar', color: '#ff7f0e', values: native.map((s) => s.createdToCompleteMs) }, ...oldestSeries((s) => s.createdToCompleteMs)],
      },
      {
        title: `2. burst: ${r.burst?.jobs ?? 100} mains finishing at once, main → sidecar finished`,
        xLabel: 'ms (containerd finishedAt)',
        series: [
          { label: `sidecar-terminator (${r.burst?.missed ?? 0} > 30 s not drawn)`, color: '#2ca02c', values: r.burst?.samplesMs ?? [] },
          { label: `native (${r.burstNative?.missed ?? 0} > 30 s not drawn)`, color: '#ff7f0e', values: r.burstNative?.samplesMs ?? [] },
        ],
        target: { at: 2000, label: 'target p99 < 2 s' },
      },
      {
        title: `4. controller, ${r.controller?.podsInApi ?? 20000} Pods: status update → request created`,
        xLabel: `ms, log scale (status write sent → request's watch event), ${r.controller?.achievedRate ?? '-'} finishing/s`,
        series: [{ label: 'leader', color: '#9467bd', values: r.controller ? scaleSamples(r.controller) : [], n: r.controller?.latencyMs.n }],
        logX: true,
        target: { at: 50, label: 'target p99 ≤ 50 ms' },
      },
    ],
    `${r.generatedAt}, ${String(r.environment.cpus)} CPUs, ${String(r.environment.kubernetes)}, ${String(r.environment.runtime)}, commit ${String(r.environment.commit)}`,
  );
  return writeChart(svgPath, pngPath, svg);
}

/** The controller's thousands of samples are kept as 1001 quantiles (p0, p0.1, ... p100): the same CDF. */
function scaleSamples(c: ScaleResult): number[] {
  return c.latencyQuantilesMs;
}

/** `node bench/run.ts --chart [results.json]`: draws the chart again from a run's results (no cluster needed). */
function redraw(path: string): void {
  const results = JSON.parse(readFileSync(path, 'utf8')) as Results;
  const dir = dirname(path);
  console.log(chart(results, join(dir, 'latency.svg'), join(dir, 'latency.png')) ? `bench: drew ${join(dir, 'latency.png')}` : 'bench: no PNG');
}

if (process.argv[2] === '--chart') redraw(process.argv[3] ?? join(HERE, 'results.json'));
else main().catch((err: unknown) => {
  console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
