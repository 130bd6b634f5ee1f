// `npm run bench`: the benchmarks of sidecar-terminator on the local cluster (e2e/run.sh brings it
// up and tears it down). Writes bench/results.json and bench/latency.png (and .svg), prints a table.
//   1. termination latency vs native sidecars, and with ten of ours finishing together
//   2. bursts of 100 Jobs, ours and native sidecars in turns   3. the agent's footprint
//   4. the controller with 20,000 Pods   5. a soak of Jobs finishing for two hours (memory over time)
//   6. a thousand sidecar policies   kruise: the agent's memory beside OpenKruise's kruise-daemon
// Targets are reported, not asserted. BENCH_PARTS=latency,burst,scale,policies,kruise,soak selects parts (default
// all); the results of parts not run are kept from the previous results.json. On the oldest
// supported release (e2e/cluster/versions.env; bench/run.sh runs it after the newest) only part 1
// runs, ours alone (no native sidecars there), into `latencyOldest` of the same results.json. On a
// cluster of several nodes (bench/run.sh with BENCH_NODES) parts 1 and 2 run with their Jobs spread
// over the nodes, into `latencyNodes` and `burstNodes` of the same results.json, and a larger burst
// (300 Jobs: 100 a kubelet on three nodes) into `burstLargeNodes`.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import type { Context } from './context.ts';
import { closeContext, createContext } from './context.ts';
import type { AgentResult, BurstResult } from './burst.ts';
import { restepBurst, runBursts } from './burst.ts';
import type { BarPanel, LinePanel, Series } from './chart.ts';
import { renderChart, writeChart } from './chart.ts';
import type { BatchKind, Kind, LatencyFigures, LatencyResult } from './latency.ts';
import { BATCH_TITLES, VARIANTS, runLatency } from './latency.ts';
import type { ScaleResult } from './scale.ts';
import { leaderTarget, runScale } from './scale.ts';
import type { PoliciesResult } from './policies.ts';
import { runPolicies } from './policies.ts';
import type { KruiseResult } from './kruise.ts';
import { kruisePanel, kruiseTargets, runKruise } from './kruise.ts';
import type { AgentTotals } from './nodes.ts';
import { agentTotals } from './nodes.ts';
import { deploy } from './setup.ts';
import type { MemorySeries, SoakResult } from './soak.ts';
import type { Part, PartStamp } from './stamps.ts';
import { partStamps, stampsText } from './stamps.ts';
import { runSoak } from './soak.ts';
import type { CensoredSummary, HistogramBounds, Summary } from './stats.ts';
import { MB } from './stats.ts';
import type { StepBreakdown, TimelineField } from './timeline.ts';

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
  latencyOldest?: LatencyResult & { kubernetes: string; runtime?: string; generatedAt: string; commit: unknown };
  /** Older results: one run of ours (the legacy shape), with native's in burstNative. */
  burst?: BurstResult | LegacyBurst;
  burstNative?: LegacyBurst;
  agent?: AgentResult;
  /** Part 1 on a cluster of several nodes, its Jobs spread over them. */
  latencyNodes?: LatencyResult & OnNodes;
  /** Parts 2 and 3 on a cluster of several nodes: the burst's Jobs spread over them, and every node's agent. */
  burstNodes?: BurstOnNodes;
  /** A larger burst on the same nodes (BENCH_BURST_LARGE_JOBS, 300 by default), one run of each kind. */
  burstLargeNodes?: BurstOnNodes;
  controller?: ScaleResult;
  soak?: SoakResult;
  /** Part 6: a thousand sidecar policies (R54). */
  policies?: PoliciesResult;
  /** The kruise part: the agent's memory beside OpenKruise's kruise-daemon on the same node. */
  kruiseDaemon?: KruiseResult;
  /** The parts measured by this run; the others' results come from the previous results.json. */
  partsRun: string[];
  /** The commit and stack that measured each part (bench/stamps.ts); absent in older results. */
  measured?: Partial<Record<Part, PartStamp>>;
  errors: Record<string, string>;
}

type BurstOnNodes = OnNodes & { burst: BurstResult; agents: AgentResult[]; agentsTotal: AgentTotals };

/** Where a part ran on several nodes, and how long it took. */
interface OnNodes {
  nodes: number;
  nodeNames: string[];
  durationSeconds: number;
}

/** A burst result from before ours and native took turns: one run of a kind. */
interface LegacyBurst {
  jobs: number;
  mainToSidecarMs: Summary;
  samplesMs: number[];
  missed: number;
  mainFinishSpreadMs: number;
}

async function main(): Promise<void> {
  const started = Date.now();
  const parts = new Set((process.env.BENCH_PARTS ?? 'latency,burst,scale,policies,kruise,soak').split(',').map((s) => s.trim()));
  const ctx = await createContext();
  if (ctx.nodes.length > 1) return onManyNodes(ctx, parts, started);
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
  const attempt = <T>(part: string, fn: () => Promise<T>) => attemptPart(ctx, parts, results.errors, part, fn);

  // First, while both daemons are fresh (kruise-daemon starts in the part): the agent before the
  // other parts' thousands of Jobs have passed through it.
  results.kruiseDaemon = await attempt('kruise', () => runKruise(ctx, deployed.agents, {
    pods: num('BENCH_KRUISE_PODS', 100),
    windowSeconds: num('BENCH_KRUISE_WINDOW_SECONDS', 60),
    everySeconds: num('BENCH_KRUISE_EVERY_SECONDS', 2),
  }));

  results.latency = await attempt('latency', () => runLatency(ctx, deployed.agents, num('BENCH_LATENCY_JOBS', 50), num('BENCH_LATENCY_BATCH', 10), true, num('BENCH_LATENCY_VARIANT_JOBS', 20)));
  const burst = await attempt('burst', () => runBursts(ctx, deployed.agents, num('BENCH_BURST_JOBS', 100), num('BENCH_BURST_REPEATS', 2)));
  results.burst = burst?.burst;
  results.agent = burst?.agents[0];
  results.controller = await attempt('scale', () => runScale(ctx, leaderTarget(deployed.leader), {
    pods: num('BENCH_SCALE_PODS', 20_000),
    unmarked: num('BENCH_SCALE_UNMARKED', 20_000),
    nodes: num('BENCH_SCALE_NODES', 20),
    rate: num('BENCH_SCALE_RATE', 250),
    waveSeconds: num('BENCH_SCALE_SECONDS', 20),
  }));

  results.policies = await attempt('policies', () => runPolicies(ctx, deployed.agents, deployed.leader, num('BENCH_POLICIES', 1000), num('BENCH_POLICIES_JOBS', 20)));

  results.soak = await attempt('soak', () => runSoak(ctx, {
    minutes: num('BENCH_SOAK_MINUTES', 120),
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
  closeContext(ctx);
  if (Object.keys(results.errors).length > 0) process.exitCode = 1;
}

/** Runs a part if it was asked for; a failure is recorded in `errors` (and logged), not thrown: the other parts go on. */
async function attemptPart<T>(ctx: Context, parts: ReadonlySet<string>, errors: Record<string, string>, part: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (!parts.has(part)) return undefined;
  const t0 = Date.now();
  try {
    const r = await fn();
    ctx.log(`${part}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    return r;
  } catch (err) {
    errors[part] = err instanceof Error ? (err.stack ?? err.message) : String(err);
    ctx.log(`${part}: FAILED: ${errors[part]}`);
    return undefined;
  }
}

/**
 * Parts 1 and 2 on a cluster of several nodes, the same Jobs as on one spread over them, into
 * latencyNodes and burstNodes of the one-node run's results.json (the rest of it kept as it is).
 */
async function onManyNodes(ctx: Context, asked: ReadonlySet<string>, started: number): Promise<void> {
  const path = join(outDir(), 'results.json');
  const previous = readResults(path);
  const parts = new Set<string>([...asked].filter((part) => part === 'latency' || part === 'burst' || part === 'burstLarge'));
  // 100 Pods a kubelet at most: kubelet's default maxPods is 110.
  const largeJobs = num('BENCH_BURST_LARGE_JOBS', 300);
  if (parts.has('burst') && largeJobs > 0) parts.add('burstLarge');
  const notHere = [...asked].filter((part) => !parts.has(part));
  if (notHere.length > 0) ctx.log(`on ${ctx.nodes.length} nodes only latency and burst run; not ${notHere.join(', ')}`);
  const deployed = await deploy(ctx);
  const env = await environment(ctx);
  const results: Results = previous ?? {
    generatedAt: new Date(started).toISOString(), durationSeconds: 0, environment: env, deployment: {}, targets: [], partsRun: [], errors: {},
  };
  const errors: Record<string, string> = {};
  const onNodes = async <T>(fn: () => Promise<T>): Promise<OnNodes & { result: T }> => {
    const t0 = Date.now();
    const result = await fn();
    return { nodes: ctx.nodes.length, nodeNames: ctx.nodes, durationSeconds: Math.round((Date.now() - t0) / 1000), result };
  };
  ctx.log(`parts ${[...parts].join(', ')} on ${ctx.nodes.length} nodes (${ctx.nodes.join(', ')}), the Jobs spread over them`);
  const latency = await attemptPart(ctx, parts, errors, 'latency', () => onNodes(() =>
    runLatency(ctx, deployed.agents, num('BENCH_LATENCY_JOBS', 50), num('BENCH_LATENCY_BATCH', 10), true, num('BENCH_LATENCY_VARIANT_JOBS', 20))));
  const burst = await attemptPart(ctx, parts, errors, 'burst', () => onNodes(() => runBursts(ctx, deployed.agents, num('BENCH_BURST_JOBS', 100), num('BENCH_BURST_REPEATS', 2))));
  const burstLarge = await attemptPart(ctx, parts, errors, 'burstLarge', () => onNodes(() => runBursts(ctx, deployed.agents, largeJobs, 1)));
  if (latency) {
    const { result, ...where } = latency;
    results.latencyNodes = { ...where, ...result };
  }
  const burstOnNodes = ({ result, ...where }: OnNodes & { result: Awaited<ReturnType<typeof runBursts>> }): BurstOnNodes =>
    ({ ...where, burst: result.burst, agents: result.agents, agentsTotal: agentTotals(result.agents, result.burst.jobs) });
  if (burst) results.burstNodes = burstOnNodes(burst);
  if (burstLarge) results.burstLargeNodes = burstOnNodes(burstLarge);
  // This run's errors replace the earlier ones of the parts it ran.
  for (const part of parts) delete results.errors[`${part}Nodes`];
  for (const [part, err] of Object.entries(errors)) results.errors[`${part}Nodes`] = err;
  const measured = new Set([...(latency ? ['latencyNodes'] : []), ...(burst ? ['burstNodes'] : []), ...(burstLarge ? ['burstLargeNodes'] : [])]);
  const now = { commit: String(env.commit), at: new Date(started).toISOString(), kubernetes: String(env.kubernetes), runtime: String(env.runtime), nodes: ctx.nodes.length };
  results.measured = partStamps(measured, now, previous);
  results.targets = targets(results);
  mkdirSync(outDir(), { recursive: true });
  writeResults(results, path);
  chart(results, join(outDir(), 'latency.svg'), join(outDir(), 'latency.png'));
  printTable(results);
  console.log(`bench: wrote ${[...measured].join(' and ') || 'nothing'} into ${path} after ${Math.round((Date.now() - started) / 1000)} s`);
  closeContext(ctx);
  if (Object.keys(errors).length > 0) process.exitCode = 1;
}

function readResults(path: string): Results | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Results;
  } catch {
    return undefined;
  }
}

const outDir = () => process.env.BENCH_OUT_DIR ?? HERE;

function writeResults(results: Results, path: string): void {
  // Arrays of numbers, and objects of numbers only (summaries, timelines), on one line each: the file stays readable.
  const json = JSON.stringify(results, null, 2)
    .replace(/\[\s+(-?[\d.]+(?:,\s+-?[\d.]+)*)\s+\]/g, (_m, inner: string) => `[${inner.split(/,\s+/).join(', ')}]`)
    .replace(/\{\s+("\w+": (?:-?[\d.e+]+|null)(?:,\s+"\w+": (?:-?[\d.e+]+|null))*)\s+\}/g, (_m, inner: string) => `{ ${inner.split(/,\s+/).join(', ')} }`);
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
  const deployed = await deploy(ctx);
  const env = await environment(ctx);
  ctx.log(`latency on the oldest supported release (${String(env.kubernetes)}): ours alone`);
  const latency = await runLatency(ctx, deployed.agents, num('BENCH_LATENCY_JOBS', 50), num('BENCH_LATENCY_BATCH', 10), false, 0);
  results.latencyOldest = { kubernetes: String(env.kubernetes), runtime: String(env.runtime), generatedAt: new Date().toISOString(), commit: env.commit, ...latency };
  results.targets = targets(results);
  writeResults(results, path);
  // The chart draws the oldest release's figures too.
  chart(results, join(outDir(), 'latency.svg'), join(outDir(), 'latency.png'));
  printTable(results);
  console.log(`bench: wrote latencyOldest into ${path} after ${Math.round((Date.now() - started) / 1000)} s`);
  closeContext(ctx);
}

/** Parts not run this time keep their results, and each part says which commit measured it. */
function keepPreviousParts(results: Results, path: string, parts: ReadonlySet<string>): void {
  const previous: Partial<Results> | undefined = readResults(path);
  const env = results.environment;
  results.measured = partStamps(parts, { commit: String(env.commit), at: results.generatedAt, kubernetes: String(env.kubernetes), runtime: String(env.runtime) }, previous);
  if (!previous) return;
  // The oldest release's figures are always kept: that run writes them itself.
  if (previous.latencyOldest) results.latencyOldest = previous.latencyOldest;
  // The parts on several nodes are never run here: a run of their own writes them.
  const keys: Record<string, (keyof Results)[]> = {
    latency: ['latency'], burst: ['burst', 'burstNative', 'agent'], scale: ['controller'], soak: ['soak'], latencyNodes: ['latencyNodes'], burstNodes: ['burstNodes'],
    burstLargeNodes: ['burstLargeNodes'], policies: ['policies'], kruise: ['kruiseDaemon'],
  };
  for (const [part, fields] of Object.entries(keys)) {
    if (parts.has(part)) continue;
    for (const field of fields) if (previous[field] !== undefined) Object.assign(results, { [field]: previous[field] });
  }
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
    cluster: ctx.nodes.length > 1
      ? `${ctx.nodes.length} nodes, each its own kubelet and containerd (all but the first in a mount namespace of their own); etcd, kube-apiserver, kube-controller-manager, kube-scheduler and one kube-proxy; all on this machine (e2e/cluster)`
      : 'one node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, containerd on this machine (e2e/cluster)',
  };
}

// ---------------------------------------------------------------- reading results, old and new

/** Ours in the mixed batches (every batch in results from before the all-ours batches); none on the oldest release. */
const mixedOurs = (l: LatencyResult | undefined): LatencyFigures | undefined => (l?.native ? l.ours : undefined);
/** Ours in the batches of ours alone (the oldest release's `ours` in results from before the mixed/all-ours split). */
const allOurs = (l: LatencyResult | undefined): LatencyFigures | undefined => l?.allOurs ?? (l && !l.native ? l.ours : undefined);
/** Which kind of batch a sample ran in; older results did not say (every batch mixed, or ours alone on the oldest release). */
const batchOf = (l: LatencyResult, s: { batch?: BatchKind }): BatchKind => s.batch ?? (l.native ? 'mixed' : 'allOurs');

/** One kind's burst figures: over its runs, or the one run of older results. */
function burstOf(r: Results, kind: Kind): { runs: number; mainToSidecarMs: Summary; mainToSidecarWithMissedMs?: CensoredSummary; samplesMs: number[]; missed: number; steps?: StepBreakdown } | undefined {
  const b = r.burst;
  if (b && 'runs' in b) {
    const { runs, ...figures } = b[kind];
    return { runs, ...figures, samplesMs: b.runs.filter((run) => run.kind === kind).flatMap((run) => run.samplesMs) };
  }
  const legacy = kind === 'ours' ? b : r.burstNative;
  return legacy ? { runs: 1, mainToSidecarMs: legacy.mainToSidecarMs, samplesMs: legacy.samplesMs, missed: legacy.missed } : undefined;
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
const step = (steps: StepBreakdown | undefined, field: TimelineField) => steps?.stepsMs?.[field];
const measured = (v: number | null | undefined): v is number => typeof v === 'number' && Number.isFinite(v);
/** Censored percentiles: one past the limit reads "> limit". */
const censoredText = (c: CensoredSummary) => `${[c.p50, c.p90, c.p99].map((v) => (v === null ? `> ${c.aboveMs}` : `${v}`)).join(' / ')} ms (n=${c.n}, ${c.censored} missed)`;
/** A ratio's p50 with its 95 % interval where the results hold one. */
const ratioText = (r: { mainToSidecarP50: number; mainToSidecarP50Interval?: [number, number] }) =>
  `${r.mainToSidecarP50}${r.mainToSidecarP50Interval ? ` [${r.mainToSidecarP50Interval.join('–')}]` : ''}`;
const intervalNote = (r: { mainToSidecarP50Interval?: [number, number] } | undefined) =>
  (r?.mainToSidecarP50Interval ? `, 95 % interval ${r.mainToSidecarP50Interval.join('–')}` : '');

// ---------------------------------------------------------------- targets, table, chart

function targets(r: Results): Target[] {
  const t: Target[] = [];
  const add = (what: string, target: string, value: number | null | undefined, unit: string, ok: (v: number) => boolean) =>
    t.push({ what, target, value: measured(value) ? `${value}${unit}` : 'not measured', met: measured(value) ? ok(value) : null });
  const together = `${r.latency?.batchSize ?? 10} of ours finishing together`;
  add(`ours / native, main finished → sidecar finished, p50, ${r.latency?.batchSize ?? 10} together (matched batches${intervalNote(r.latency?.ratioTogether)})`, '≤ 1.0', r.latency?.ratioTogether?.mainToSidecarP50, '', (v) => v <= 1.0);
  add(`ours / native, main finished → sidecar finished, p50 (mixed batches${intervalNote(r.latency?.ratio)})`, '≤ 1.0', r.latency?.ratio?.mainToSidecarP50, '', (v) => v <= 1.0);
  const alone = step(allOurs(r.latency)?.steps, 'exitToStopSent');
  add(`main exit → SIGTERM sent, ${together}, p50`, '≤ 30 ms', alone?.p50, ' ms', (v) => v <= 30);
  add(`main exit → SIGTERM sent, ${together}, p99`, '≤ 90 ms', alone?.p99, ' ms', (v) => v <= 90);
  // OnFailure: the fast path still acts on the exit event (exit 0 settles it without kubelet's report).
  add(`main exit → SIGTERM sent, ${together}, restartPolicy OnFailure, p50`, '≤ 30 ms (as Never)', step(r.latency?.onFailure?.steps, 'exitToStopSent')?.p50, ' ms', (v) => v <= 30);
  // The same targets as ours alone: beside native sidecars' Pods, the agent's path is the same.
  const mixed = step(mixedOurs(r.latency)?.steps, 'exitToStopSent');
  t.push({
    what: 'main exit → SIGTERM sent, mixed batches (ours beside native), p50 / p99', target: '≤ 30 ms / ≤ 90 ms (as ours alone)',
    value: measured(mixed?.p50) && measured(mixed?.p99) ? `${mixed.p50} / ${mixed.p99} ms` : 'not measured',
    met: measured(mixed?.p50) && measured(mixed?.p99) ? mixed.p50 <= 30 && mixed.p99 <= 90 : null,
  });
  add('main finished → sidecar finished, mixed batches (ours), p50', '≤ 60 ms', mixedOurs(r.latency)?.mainToSidecarMs.p50, ' ms', (v) => v <= 60);
  add(`main finished → sidecar finished, ${together}, p50`, '≤ 60 ms', allOurs(r.latency)?.mainToSidecarMs.p50, ' ms', (v) => v <= 60);
  const nativeJob = r.latency?.allNative?.mainToJobDoneMs?.p50;
  add(`main exit → Job Complete, ${together}, p50 (native sidecars: ${measured(nativeJob) ? `${nativeJob} ms` : 'not measured'})`, '≤ 1.5 s',
    allOurs(r.latency)?.mainToJobDoneMs?.p50, ' ms', (v) => v <= 1500);
  // Reported without a target: no native sidecars to compare with, and no fast path before 1.30
  // (the controller acts on kubelet's report of the mains, which comes with its relist, ≤ 1 s).
  const oldestP50 = allOurs(r.latencyOldest)?.mainToSidecarMs.p50;
  t.push({ what: `${r.latencyOldest?.kubernetes ?? 'oldest release'}, ours alone: main finished → sidecar finished, p50`, target: 'none (no native sidecars; no fast path before 1.30)', value: measured(oldestP50) ? `${oldestP50} ms` : 'not measured', met: null });
  const burstOurs = burstOf(r, 'ours');
  const burstNative = burstOf(r, 'native');
  const jobs = r.burst?.jobs ?? 100;
  // The node's own cost shows in native sidecars' figure on the same node: reported beside the target.
  const nativeP99 = (k: { mainToSidecarMs: Summary } | undefined) => (measured(k?.mainToSidecarMs.p99) ? `${k.mainToSidecarMs.p99} ms` : 'not measured');
  // Honest p99: a missed sidecar ranks last, so misses push the p99 past the limit rather than out of the sample.
  const withMissed = burstOurs?.mainToSidecarWithMissedMs;
  if (withMissed) {
    t.push({
      what: `burst of ${jobs}: main → sidecar finished, p99 with the missed ranked last (${plural(burstOurs.runs, 'run')}; native sidecars: ${nativeP99(burstNative)} without their missed)`,
      target: '≤ 2 s', value: withMissed.p99 === null ? `> ${withMissed.aboveMs} ms` : `${withMissed.p99} ms`, met: withMissed.p99 !== null && withMissed.p99 <= 2000,
    });
  } else {
    add(`burst of ${jobs}: main → sidecar finished, p99 (${plural(burstOurs?.runs ?? 0, 'run')}; native sidecars: ${nativeP99(burstNative)})`,
      '≤ 2 s', burstOurs?.mainToSidecarMs.p99, ' ms', (v) => v <= 2000);
  }
  const large = r.burstLargeNodes;
  t.push({
    what: `burst of ${large?.burst.jobs ?? 300} on ${large?.nodes ?? 3} nodes: main → sidecar finished, p99, missed (native sidecars: ${nativeP99(large?.burst.native)})`,
    target: 'reported',
    value: !large ? 'not measured' : large.burst.ours.mainToSidecarWithMissedMs
      ? `p50 / p90 / p99 with the missed ranked last ${censoredText(large.burst.ours.mainToSidecarWithMissedMs)}`
      : `${large.burst.ours.mainToSidecarMs.p99} ms, ${large.burst.ours.missed} missed`,
    met: null,
  });
  // With stop first, the whole of it is the exit event's wait plus the agent's share below.
  add(`burst of ${jobs}: main exit → SIGTERM sent, p99 (${plural(burstOurs?.runs ?? 0, 'run')})`, '≤ 1.5 s', step(burstOurs?.steps, 'exitToStopSent')?.p99, ' ms', (v) => v <= 1500);
  const share = burstOurs?.steps?.agentShareMs?.p99;
  t.push({ what: `burst of ${jobs}: the agent's own share of main exit → SIGTERM sent, p99`, target: 'as low as the node allows (the rest is the API server and the runtime)', value: measured(share) ? `${share} ms` : 'not measured', met: null });
  add(`burst of ${jobs}: missed (ours, all runs)`, '0', burstOurs?.missed, '', (v) => v === 0);
  // Figures are in MiB; the targets in MB (10^6 bytes).
  const withinMB = (limit: number) => (mib: number) => mib * MB <= limit * 1e6;
  // kruise-daemon's idle RSS on the same node is 66–68 MiB.
  add(`agent RSS, ${r.agent?.podsOnNode ?? '≥100'} Pods on its node, idle`, '≤ 66 MiB (kruise-daemon\'s)', r.agent?.rssIdleMB, ' MiB', (v) => v <= 66);
  add('agent RSS, peak during the burst', '≤ 80 MiB', r.agent?.rssPeakBurstMB, ' MiB', (v) => v <= 80);
  add('agent CPU, 60 s idle', '≤ 1 millicore', r.agent?.idle.millicores, ' millicores', (v) => v <= 1);
  add(`controller RSS, ${r.controller?.podsInApi ?? 20000} Pods`, '≤ 150 MB (143.1 MiB)', r.controller?.controller.rssAt20kMB, ' MiB', withinMB(150));
  add('controller RSS, peak during the finishing wave', '≤ 150 MB (143.1 MiB)', r.controller?.controller.rssPeakMB, ' MiB', withinMB(150));
  add('controller: status update → request created, p99', '≤ 2 s where the API server keeps up', r.controller?.latencyMs.p99, ' ms', (v) => v <= 2000);
  for (const part of ['agent', 'controller'] as const) {
    const w = r.soak?.[part].window;
    const what = `soak: ${part} RSS, the window's last ${w ? `vs first stretch (minutes ${w.fromMinute}–${w.toMinute})` : 'stretch vs first'}`;
    add(what, 'within 10 % (flat)', w?.rssGrowthPercent, ' %', (v) => Math.abs(v) <= 10);
  }
  const rates = r.controller?.serviceRate;
  t.push({
    what: 'controller: service rate (requests created per second over the wave / first to last) vs arrival rate (mains finishing per second)', target: 'service ≥ arrival',
    value: rates ? `${rates.duringWave} / ${rates.firstToLast} vs ${r.controller!.achievedRate} per second` : 'not measured',
    met: rates ? rates.duringWave >= r.controller!.achievedRate : null,
  });
  t.push({ what: 'controller kept up', target: `≥ 200 Pods finishing per second`, value: r.controller ? `${r.controller.keptUp ? 'yes' : 'no'}: ${r.controller.keptUpReason}` : 'not measured', met: r.controller ? r.controller.keptUp : null });
  const policies = r.policies;
  const count = policies ? policies.clusterPolicies + policies.namespacedPolicies : 1000;
  add(`sidecar marked by a policy / by its env, main finished → sidecar finished p50, with ${count} policies`, '≤ 1.10', policies?.policyOverEnvP50, '', (v) => v <= 1.1);
  t.push({
    what: `memory with ${count} policies (RSS before → after): agent, controller leader`, target: 'reported',
    value: policies ? `${policies.agent.before.rssMB} → ${policies.agent.after.rssMB} MiB, ${policies.controller.before.rssMB} → ${policies.controller.after.rssMB} MiB` : 'not measured',
    met: null,
  });
  t.push(...kruiseTargets(r.kruiseDaemon));
  return t;
}

/** The agent's steps in the order they happen; `part`: a part of the step above. */
const STEP_ROWS: { field: TimelineField | 'agentShare'; label: string; short: string; part?: boolean }[] = [
  { field: 'exitEvent', label: 'main exit → event received', short: 'event' },
  { field: 'requestCreated', label: 'event → request created', short: 'request' },
  { field: 'apiCreate', label: 'of which the API create', short: 'API create', part: true },
  { field: 'acting', label: 'request known → acting', short: 'acting' },
  { field: 'prestopDone', label: 'acting → preStop done', short: 'preStop' },
  { field: 'stopSent', label: '→ SIGTERM sent', short: 'SIGTERM sent' },
  { field: 'runtimeCheck', label: 'of which runtime status', short: 'runtime status', part: true },
  { field: 'containerExited', label: '→ StopContainer returned', short: 'StopContainer returned' },
  { field: 'exitToStopSent', label: 'main exit → SIGTERM sent', short: 'exit → SIGTERM' },
  { field: 'agentShare', label: "of which the agent's own", short: "agent's own", part: true },
];

const stepSummary = (steps: StepBreakdown | undefined, field: TimelineField | 'agentShare') => (field === 'agentShare' ? steps?.agentShareMs : step(steps, field));

/** "event 1.2/3.4, request 14/30, ..." (p50/p99 ms of the steps measured) and how many Pods had a timeline. */
function stepsText(steps: StepBreakdown | undefined): string {
  if (!steps || steps.withTimeline === 0) return `not measured (no timelines in the agent's log${steps ? ` for ${steps.samples} Pods` : ''})`;
  const figures = STEP_ROWS.flatMap(({ field, short }) => {
    const s = stepSummary(steps, field);
    return s && s.n > 0 ? [`${short} ${s.p50}/${s.p99}`] : [];
  });
  return `${figures.join(', ')} (timelines ${steps.withTimeline}/${steps.samples}, fast path ${steps.fastPath})`;
}

/** The agent's histogram of main exit → SIGTERM sent over a part: bucket bounds, a cross-check of the timelines. */
function histogramText(h: Record<string, HistogramBounds> | undefined): string {
  const e = h?.exitToStopSent;
  return e && e.count > 0 ? `p50 ${e.p50UpperBoundMs}, p99 ${e.p99UpperBoundMs} ms (${e.count} stops)` : 'not measured';
}

function printTable(r: Results): void {
  const rows: string[][] = [['', 'value', 'target', '']];
  const percentiles = (s: Summary) => `${s.p50} / ${s.p90} / ${s.p99} ms`;
  const latencyRows = (prefix: string, l: LatencyResult) => {
    const kinds: [string, LatencyFigures | undefined][] = [
      [`ours, mixed batches`, mixedOurs(l)],
      [`native, mixed batches`, l.native],
      [`ours alone, ${l.batchSize} together`, allOurs(l)],
      [`native alone, ${l.batchSize} together`, l.allNative],
      [`ours alone under OnFailure, ${l.batchSize} together`, l.onFailure],
      ...VARIANTS.map((v): [string, LatencyFigures | undefined] => [`${BATCH_TITLES[v]}, ${l.batchSize} together`, l[v]]),
    ];
    for (const [what, f] of kinds) {
      if (!f) continue;
      const interval = f.mainToSidecarP50IntervalMs ? ` (p50 95 % interval ${f.mainToSidecarP50IntervalMs.join('–')})` : '';
      rows.push([`${prefix}${what}: main → sidecar finished p50/p90/p99`, `${percentiles(f.mainToSidecarMs)}${interval}`, '', '']);
      rows.push([`${prefix}${what}: Job created → complete p50/p90/p99`, percentiles(f.createdToCompleteMs), '', '']);
      if (f.sidecarToPodDoneMs && f.podDoneToJobDoneMs) {
        rows.push([`${prefix}${what}: sidecar finished → Pod phase → Job condition, p50 / p99`, `${f.sidecarToPodDoneMs.p50} / ${f.sidecarToPodDoneMs.p99} ms, then ${f.podDoneToJobDoneMs.p50} / ${f.podDoneToJobDoneMs.p99} ms`, '', '']);
      }
      if (f.mainToJobDoneMs) rows.push([`${prefix}${what}: main finished → Job condition p50/p90/p99`, percentiles(f.mainToJobDoneMs), '', '']);
      if (what.startsWith('ours')) rows.push([`${prefix}${what}: agent's steps p50/p99 ms`, stepsText(f.steps), '', '']);
    }
    if (l.agentHistograms) rows.push([`${prefix}agent's histogram, main exit → SIGTERM sent, all batches`, histogramText(l.agentHistograms), '', '']);
    if (l.ratioTogether) rows.push([`${prefix}ratio ours / native, ${l.batchSize} together (main → sidecar p50 [95 % interval], Job p50)`, `${ratioText(l.ratioTogether)}, ${l.ratioTogether.createdToCompleteP50}`, '', '']);
    if (l.ratio) rows.push([`${prefix}ratio ours / native, mixed batches (main → sidecar p50 [95 % interval], Job p50)`, `${ratioText(l.ratio)}, ${l.ratio.createdToCompleteP50}`, '', '']);
    if (l.agentLog && (l.agentLog.agentRestarts > 0 || l.agentLog.error)) rows.push([`${prefix}agent log`, `${l.agentLog.agentRestarts} restarts${l.agentLog.error ? `, ${l.agentLog.error}` : ''}`, '', '']);
  };
  // Per node: main → sidecar finished p50/p99 ms of each group.
  const byNodeRows = (prefix: string, byNode: Record<string, Record<string, Summary>> | undefined) => {
    for (const [node, groups] of Object.entries(byNode ?? {})) {
      rows.push([`${prefix}on ${node}: main → sidecar finished p50/p99 ms`, Object.entries(groups).map(([group, s]) => `${group} ${s.p50}/${s.p99} (n=${s.n})`).join(', '), '', '']);
    }
  };
  const burstRows = (prefix: string, b: BurstResult) => {
    for (const f of b.failedRuns ?? []) rows.push([`${prefix}burst repeat ${f.repeat}, ${f.kind}: FAILED`, f.error, '', '']);
    for (const run of b.runs) {
      rows.push([`${prefix}burst repeat ${run.repeat}, ${run.kind} (${run.order === 1 ? 'first' : 'second'}): p50 / p99, missed, spread, start, Complete`,
        `${run.mainToSidecarMs.p50} / ${run.mainToSidecarMs.p99} ms, ${run.missed}, ${run.mainFinishSpreadMs} ms, ${run.podsStartSeconds} s, ${run.jobsCompleteAtWindowEnd}/${b.jobs} at ${b.observeSeconds} s`, '', '']);
      byNodeRows(`${prefix}burst repeat ${run.repeat}, ${run.kind}, `, run.byNode);
    }
    for (const kind of ['ours', 'native'] as const) {
      const k = b[kind];
      rows.push([`${prefix}burst, ${kind}, ${plural(k.runs, 'run')}: p50 / p90 / p99, missed, Complete`, `${percentiles(k.mainToSidecarMs)}, ${k.missed}, ${k.jobsCompleteAtWindowEnd}/${k.jobs}`, '', '']);
      if (k.mainToSidecarWithMissedMs) rows.push([`${prefix}burst, ${kind}: p50 / p90 / p99 with the missed ranked last`, censoredText(k.mainToSidecarWithMissedMs), '', '']);
    }
    rows.push([`${prefix}burst, ours: agent's steps p50/p99 ms`, stepsText(b.ours.steps), '', '']);
    for (const run of b.runs) if (run.agentHistograms) rows.push([`${prefix}burst repeat ${run.repeat}, ours: agent's histogram, main exit → SIGTERM sent`, histogramText(run.agentHistograms), '', '']);
  };
  if (r.latency) latencyRows('', r.latency);
  if (r.latencyOldest) latencyRows(`${r.latencyOldest.kubernetes}: `, r.latencyOldest);
  if (r.latencyNodes) {
    const prefix = `${r.latencyNodes.nodes} nodes: `;
    latencyRows(prefix, r.latencyNodes);
    byNodeRows(prefix, r.latencyNodes.byNode);
  }
  const b = r.burst;
  if (b && 'runs' in b) {
    burstRows('', b);
  } else {
    for (const kind of ['ours', 'native'] as const) {
      const k = burstOf(r, kind);
      if (k) rows.push([`burst, ${kind}: p50 / p90 / p99, missed`, `${percentiles(k.mainToSidecarMs)}, ${k.missed}`, '', '']);
    }
  }
  if (r.agent) {
    const perStop = r.agent.burst.cpuMsPerStop === undefined ? '' : ` (${r.agent.burst.cpuMsPerStop} ms per stopped sidecar)`;
    rows.push(['agent CPU during the burst', `${r.agent.burst.cpuSeconds} s over ${r.agent.burst.windowSeconds} s${perStop}`, '', '']);
    rows.push(['agent API requests: idle 60 s / burst', `${r.agent.idle.apiRequests} / ${r.agent.burst.apiRequests} (${r.agent.burst.apiRequestsPerJob} per Job)`, '', '']);
    const api = r.agent.apiserverBurst;
    const verbs = r.agent.agentRequestsByVerbAndCode;
    const stops = r.agent.containerStops;
    if (stops) rows.push(['agent container stops during the burst: stopped / failed / resumed', `${stops.stopped} / ${stops.failed} / ${stops.resumed}`, '', '']);
    if (verbs) rows.push(['agent API requests during the burst, by verb and code (its own count)', Object.entries(verbs).map(([k, n]) => `${k}: ${n}`).join(', '), '', '']);
    if (api) rows.push(['API server during the burst: CPU, the agent\'s requests\' APF queue wait', `${api.cpuCores} cores; mean ${api.agentQueueWaitMeanMs} ms over ${api.agentRequestsQueued} requests`, '', '']);
  }
  const burstNodesRows = ({ nodes, burst, agents, agentsTotal: total }: BurstOnNodes) => {
    const prefix = `${nodes} nodes, ${burst.jobs} Jobs: `;
    burstRows(prefix, burst);
    for (const a of agents) {
      rows.push([`${prefix}agent on ${a.node ?? a.pod} (${a.podsOnNode} Pods): RSS idle / peak, CPU idle, CPU per stop`,
        `${a.rssIdleMB} / ${a.rssPeakBurstMB} MiB, ${a.idle.millicores} millicores, ${a.burst.cpuMsPerStop ?? '-'} ms`, '', '']);
      const stops = a.containerStops;
      if (stops) rows.push([`${prefix}agent on ${a.node ?? a.pod}: container stops stopped / failed / resumed`, `${stops.stopped} / ${stops.failed} / ${stops.resumed}`, '', '']);
    }
    rows.push([`${prefix}${total.agents} agents together: RSS idle / sum of peaks, CPU idle, CPU per stop`,
      `${total.rssIdleMB} / ${total.rssPeakBurstMB} MiB, ${total.idleMillicores} millicores, ${total.cpuMsPerStop} ms`, '', '']);
    const first = agents[0];
    if (first) rows.push([`${prefix}agents' API requests: idle 60 s / burst`, `${first.idle.apiRequests} / ${first.burst.apiRequests} (${first.burst.apiRequestsPerJob} per Job)`, '', '']);
  };
  if (r.burstNodes) burstNodesRows(r.burstNodes);
  if (r.burstLargeNodes) burstNodesRows(r.burstLargeNodes);
  if (r.controller) {
    const c = r.controller;
    rows.push(['controller: status → request p50 / p99 / max', `${c.latencyMs.p50} / ${c.latencyMs.p99} / ${c.latencyMs.max} ms (n=${c.latencyMs.n}, ${c.achievedRate}/s)`, '', '']);
    rows.push(['controller API requests per finished Pod', `${c.controller.apiRequestsPerFinishedPod}`, '', '']);
  }
  if (r.soak) {
    const s = r.soak;
    const { agent, controller } = s;
    rows.push([`soak ${s.minutes} min: Jobs complete / failed / created`, `${s.jobsComplete} / ${s.jobsFailed} / ${s.jobsCreated} (${s.jobsNotFinished} not finished, ${s.jobsUnaccounted} gone unseen)`, '', '']);
    rows.push(['soak: disruptions', s.disruptions.map((d) => `minute ${d.minute}: ${d.what} (${d.seconds} s)`).join('; '), '', '']);
    for (const [part, m] of [['agent', agent], ['controller', controller]] as const) {
      rows.push([`soak: ${part} RSS start / end / max`, `${m.startMiB} / ${m.endMiB} / ${m.maxMiB} MiB, ${m.processes.length} processes, ${m.gaps} gaps`, '', '']);
      rows.push([`soak: ${part} window RSS / heap first → last`, `${m.window.rssFirstMiB} → ${m.window.rssLastMiB} MiB (${m.window.rssGrowthPercent} %; ${m.window.rssBeforeMiB} MiB before the snapshot), heap ${m.window.heapFirstMiB} → ${m.window.heapLastMiB} MiB (${m.window.heapGrowthPercent} %)`, '', '']);
    }
  }
  if (r.kruiseDaemon) {
    const k = r.kruiseDaemon;
    const figures = (m: KruiseResult['agent']) => `${m.rssMiB.median} / ${m.rssMiB.max} MiB RSS, ${m.workingSetMiB.median} / ${m.workingSetMiB.max} MiB working set (kubelet's ${m.kubeletWorkingSetMiB ?? '-'}), ${m.cpuMillicores} millicores`;
    rows.push([`kruise: agent, ${k.podsOnNode} Pods on the node, ${k.windowSeconds} s idle (median / max)`, figures(k.agent), '', '']);
    rows.push([`kruise: kruise-daemon ${k.kruise.version}, the same window (median / max)`, figures(k.kruiseDaemon), '', '']);
    const d = k.kruise.duringWindow;
    rows.push(['kruise: kruise-daemon during the window', `${d.logLines} log lines; ${d.containerRecreateRequests} CRRs, ${d.nodeImages} NodeImages, ${d.nodePodProbes} NodePodProbes of Kruise; ${k.kruise.restarts} restarts`, '', '']);
    const stamp = r.measured?.kruise;
    rows.push(['kruise: measured by', stamp ? `${stamp.commit} (${stamp.kubernetes}, ${stamp.runtime})` : 'unknown', '', '']);
  }
  if (r.measured) rows.push(['measured by', stampsText(r.measured), '', '']);
  rows.push(['', '', '', '']);
  for (const t of r.targets) rows.push([t.what, t.value, t.target, t.met === null ? '-' : t.met ? 'met' : 'MISSED']);
  const widths = [0, 1, 2, 3].map((i) => Math.min(i === 1 ? 70 : 200, Math.max(...rows.map((row) => row[i]!.length))));
  for (const row of rows) console.log(row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  for (const [part, err] of Object.entries(r.errors)) console.log(`ERROR in ${part}: ${err.split('\n')[0]}`);
}

const COLORS = {
  alone: '#1f77b4', mixed: '#2ca02c', native: '#ff7f0e', nativeAlone: '#d62728', preStop: '#8c564b', oldest: '#17becf', burst: '#9467bd',
  // The same on several nodes: the one-node colour, lighter.
  aloneNodes: '#aec7e8', nativeAloneNodes: '#ff9896', burstNodes: '#c5b0d5', nativeNodes: '#ffbb78',
  burstLarge: '#637939', nativeLarge: '#bd9e39',
  kruiseDaemon: '#e377c2',
};

function chart(r: Results, svgPath: string, pngPath: string): boolean {
  const latencySeries = (pick: (s: { mainToSidecarMs: number; createdToCompleteMs: number }) => number): Series[] => {
    const out: Series[] = [];
    const l = r.latency;
    const together = `${l?.batchSize ?? 10}`;
    if (l) {
      const samples = (kind: Kind, batch: BatchKind) => l.samples.filter((s) => s.kind === kind && batchOf(l, s) === batch).map(pick);
      out.push({ label: `ours alone, ${together} together`, color: COLORS.alone, values: samples('ours', 'allOurs') });
      out.push({ label: `native alone, ${together} together`, color: COLORS.nativeAlone, values: samples('native', 'allNative') });
      out.push({ label: 'ours, mixed batches', color: COLORS.mixed, values: samples('ours', 'mixed') });
      out.push({ label: 'native sidecar, mixed batches', color: COLORS.native, values: samples('native', 'mixed') });
    }
    if (r.latencyOldest) out.push({ label: `ours alone on ${r.latencyOldest.kubernetes}`, color: COLORS.oldest, values: r.latencyOldest.samples.map(pick) });
    const n = r.latencyNodes;
    if (n) {
      const samples = (kind: Kind, batch: BatchKind) => n.samples.filter((s) => s.kind === kind && s.batch === batch).map(pick);
      out.push({ label: `ours alone, ${n.nodes} nodes`, color: COLORS.aloneNodes, values: samples('ours', 'allOurs') });
      out.push({ label: `native alone, ${n.nodes} nodes`, color: COLORS.nativeAloneNodes, values: samples('native', 'allNative') });
    }
    return out.filter((s) => s.values.length > 0);
  };
  const stepsPanel = (title: string, sources: { label: string; color: string; steps: StepBreakdown | undefined }[], targets: boolean): BarPanel => ({
    title,
    xLabel: 'ms, log scale (the agent\'s log timeline of each stop)',
    legend: sources.map(({ label, color }) => ({ label, color })),
    rows: STEP_ROWS.map(({ field, label, part }) => ({
      label,
      part,
      bars: sources.map(({ color, steps }) => ({ color, p50: stepSummary(steps, field)?.p50 ?? NaN, p99: stepSummary(steps, field)?.p99 ?? NaN })),
      ...(targets && field === 'exitToStopSent' ? { targets: [{ at: 30, label: 'p50 ≤ 30 ms' }, { at: 90, label: 'p99 ≤ 90 ms' }] } : {}),
    })),
    logX: true,
    empty: 'not measured: no timelines in the agent\'s log',
  });
  const burstOurs = burstOf(r, 'ours');
  const burstNative = burstOf(r, 'native');
  const runsOf = (k: { runs: number } | undefined) => (k && k.runs > 1 ? `, ${plural(k.runs, 'run')}` : '');
  const nodesSeries = (b: BurstOnNodes | undefined, colors: { ours: string; native: string }): Series[] => (b
    ? (['ours', 'native'] as const).map((kind) => ({
      label: `${kind}, ${b.burst.jobs} on ${b.nodes} nodes${runsOf(b.burst[kind])} (${b.burst[kind].missed} > 30 s not drawn)`,
      color: colors[kind],
      values: b.burst.runs.filter((run) => run.kind === kind).flatMap((run) => run.samplesMs),
    }))
    : []);
  const svg = renderChart(
    'sidecar-terminator benchmarks: latency (empirical CDFs), where the time goes, memory over time',
    [
      {
        title: '1. main finished → sidecar finished',
        xLabel: 'ms, log scale (containerd finishedAt of both containers)',
        series: latencySeries((s) => s.mainToSidecarMs),
        logX: true,
        targets: [{ at: 60, label: 'target p50 ≤ 60 ms' }],
      },
      {
        title: '1. Job created → Job complete',
        xLabel: 'ms (create sent → Complete condition seen on a watch)',
        series: latencySeries((s) => s.createdToCompleteMs),
      },
      stepsPanel('1. ours: the agent\'s steps, p50 and p99', [
        { label: `alone, ${r.latency?.batchSize ?? 10} together`, color: COLORS.alone, steps: allOurs(r.latency)?.steps },
        { label: 'mixed batches', color: COLORS.mixed, steps: mixedOurs(r.latency)?.steps },
        { label: `alone, exec preStop hook`, color: COLORS.preStop, steps: r.latency?.preStop?.steps },
      ], true),
      stepsPanel(`2. burst of ${r.burst?.jobs ?? 100}, ours: the agent's steps, p50 and p99`, [
        { label: `ours${runsOf(burstOurs)}`, color: COLORS.burst, steps: burstOurs?.steps },
      ], false),
      {
        title: `2. ${r.burst?.jobs ?? 100} mains at once${r.burstLargeNodes ? ` (${r.burstLargeNodes.burst.jobs} on ${r.burstLargeNodes.nodes} nodes)` : ''}: main → sidecar finished`,
        xLabel: 'ms (containerd finishedAt)',
        series: [
          { label: `sidecar-terminator${runsOf(burstOurs)} (${burstOurs?.missed ?? 0} > 30 s not drawn)`, color: COLORS.burst, values: burstOurs?.samplesMs ?? [] },
          { label: `native${runsOf(burstNative)} (${burstNative?.missed ?? 0} > 30 s not drawn)`, color: COLORS.native, values: burstNative?.samplesMs ?? [] },
          ...nodesSeries(r.burstNodes, { ours: COLORS.burstNodes, native: COLORS.nativeNodes }),
          ...nodesSeries(r.burstLargeNodes, { ours: COLORS.burstLarge, native: COLORS.nativeLarge }),
        ],
      },
      {
        title: `4. controller, ${r.controller?.podsInApi ?? 20000} Pods: status update → request created`,
        xLabel: `ms, log scale (status write sent → request's watch event), ${r.controller?.achievedRate ?? '-'} finishing/s`,
        series: [{ label: 'leader', color: '#9467bd', values: r.controller ? scaleSamples(r.controller) : [], n: r.controller?.latencyMs.n }],
        logX: true,
        targets: [{ at: 2000, label: 'target p99 ≤ 2 s' }],
      },
      ...(r.soak?.agent.window ? [soakPanel(r.soak)] : []),
      kruisePanel(r, { agent: COLORS.alone, kruiseDaemon: COLORS.kruiseDaemon }),
    ],
    `${String(r.environment.cpus)} CPUs; measured by: ${r.measured ? stampsText(r.measured) : `commit ${String(r.environment.commit)}`}`,
  );
  return writeChart(svgPath, pngPath, svg);
}

/** The soak's memory over time: RSS solid, V8 heap dashed; the disruptions marked, the measured window shaded. */
function soakPanel(s: SoakResult): LinePanel {
  const line = (label: string, color: string, m: MemorySeries, values: (number | null)[], dashed = false) =>
    ({ label, color, dashed, points: m.minutes.map((x, i): [number, number | null] => [x, values[i] ?? null]) });
  return {
    title: `5. soak, ${s.minutes} min: memory (${s.jobsComplete} of ${s.jobsCreated} Jobs complete)`,
    xLabel: 'minutes (VmRSS from /proc, heap used from /metrics, every 15 s)',
    yLabel: 'MiB',
    lines: [
      line('agent RSS', COLORS.alone, s.agent, s.agent.rssMiB),
      line('agent heap used', COLORS.alone, s.agent, s.agent.heapUsedMiB, true),
      line('controller (leader) RSS', '#9467bd', s.controller, s.controller.rssMiB),
      line('controller heap used', '#9467bd', s.controller, s.controller.heapUsedMiB, true),
    ],
    marks: s.disruptions.map((d) => ({ at: d.minute, label: d.what.split(/[;(]/)[0]!.trim() })),
    band: { from: s.agent.window.fromMinute, to: s.agent.window.toMinute, label: `measured: RSS agent ${s.agent.window.rssGrowthPercent} %, controller ${s.controller.window.rssGrowthPercent} %` },
  };
}

/** The controller's thousands of samples are kept as 1001 quantiles (p0, p0.1, ... p100): the same CDF. */
function scaleSamples(c: ScaleResult): number[] {
  return c.latencyQuantilesMs;
}

/**
 * `node bench/run.ts --chart [results.json]`: reads the targets off a run's results and draws the
 * chart again (no cluster needed): a target added or changed since the run is read off its figures,
 * and the burst's steps off the timelines it kept.
 */
function redraw(path: string): void {
  const results = JSON.parse(readFileSync(path, 'utf8')) as Results;
  for (const burst of [results.burst, results.burstNodes?.burst, results.burstLargeNodes?.burst]) if (burst && 'runs' in burst) restepBurst(burst);
  results.targets = targets(results);
  writeResults(results, path);
  const dir = dirname(path);
  console.log(chart(results, join(dir, 'latency.svg'), join(dir, 'latency.png')) ? `bench: drew ${join(dir, 'latency.png')}` : 'bench: no PNG');
}

if (process.argv[2] === '--chart') redraw(process.argv[3] ?? join(HERE, 'results.json'));
else main().catch((err: unknown) => {
  console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
