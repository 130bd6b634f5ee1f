// Parts 2 and 3: bursts of 100 Jobs whose mains finish at the same instant on the one node, ours
// and the same sidecar as a native sidecar (kubelet alone stops it: what the node itself costs),
// and the agent's footprint with 100 of our Pods on its node, idle for 60 s and during the burst.
// On a cluster of several nodes the same Jobs are spread over them round-robin (bench/nodes.ts),
// and every node's agent is measured alike, at the same instants.
//
// The mains block opening a FIFO (a hostPath file shared by all of them); the benchmark opens it
// for writing and closes it, and every main reads end-of-file and exits 0 at once, so all 100 mains
// finish within milliseconds of each other (the spread is measured from the runtime's timestamps).
// The sidecars are the interruptible loop of part 1. No polling in the containers, so the idle
// window is quiet apart from the sidecars' `sleep 1` loops.
//
// Fair to both kinds: they take turns going first (repeat 1 ours then native, repeat 2 native then
// ours, ...), every run fires the same time after its Pods all ran (the agent's idle window of part 3
// lies inside that wait on the first run of ours), and every run is read the same time after firing.
import { closeSync, constants, existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { clusterEnv } from '../e2e/support/cluster.ts';
import type { AgentLogNote, Context } from './context.ts';
import {
  SIDECAR_MARK, SIDECAR_SCRIPT, apiserverMetrics, busybox, containerPid, createJob, createNamespace, deleteNamespace, followAgentLogs, jobBody, listPods,
  logNote, nsToMs, procStats, runtimeContainer, sampleRss, scrape, scrapeAllOrNothing, sleep, statusOf,
} from './context.ts';
import { pool } from './kube.ts';
import type { Kind } from './latency.ts';
import { roundRobin, summaryByNode } from './nodes.ts';
import { burstOrder } from './order.ts';
import { AGENT_FLOW } from './setup.ts';
import type { CensoredSummary, HistogramBounds, Sample, Summary } from './stats.ts';
import { MB, censoredSummary, histogramBounds, metricSum, summarize } from './stats.ts';
import type { StepBreakdown, Timeline } from './timeline.ts';
import { stepHistograms, summarizeSteps } from './timeline.ts';

export interface BurstRun {
  kind: Kind;
  repeat: number;
  /** 1: this kind went first in its repeat; 2: second. */
  order: number;
  podsStartSeconds: number;
  /** Running Pods on the node once all ran (on several nodes: on all of them, each in podsByNode). */
  podsOnNode: number;
  podsByNode?: Record<string, number>;
  /** All Pods seen running → fired: the same for every run. */
  settledSeconds: number;
  mainFinishSpreadMs: number;
  mainToSidecarMs: Summary;
  /** The same with the missed sidecars ranked last: a percentile among them is null (absent in older results). */
  mainToSidecarWithMissedMs?: CensoredSummary;
  samplesMs: number[];
  /** Ours: each sample's steps from the agent's log, in samplesMs' order (null where its log had none; absent in older results). */
  sampleTimelines?: (Timeline | null)[];
  /** On several nodes: mainToSidecarMs per node (under the run's kind). */
  byNode?: Record<string, Record<string, Summary>>;
  missed: number;
  missedDetail: string[];
  /** Jobs with Complete=True when read, observeSeconds after firing. */
  jobsCompleteAtWindowEnd: number;
  /** First main finished → last sidecar finished (runtime timestamps). */
  allSidecarsFinishedMs: number;
  /** Ours: the agent's per-step timing, its log and its histograms over the run. */
  steps?: StepBreakdown;
  agentLog?: AgentLogNote;
  agentHistograms?: Record<string, HistogramBounds>;
}

export interface BurstKindSummary {
  runs: number;
  /** Over all runs of the kind together. */
  mainToSidecarMs: Summary;
  /** The same with the missed sidecars ranked last (absent in older results). */
  mainToSidecarWithMissedMs?: CensoredSummary;
  missed: number;
  jobsCompleteAtWindowEnd: number;
  jobs: number;
  steps?: StepBreakdown;
}

export interface BurstResult {
  method: string;
  /** Jobs per run. */
  jobs: number;
  repeats: number;
  settleSeconds: number;
  observeSeconds: number;
  runs: BurstRun[];
  ours: BurstKindSummary;
  native: BurstKindSummary;
  /** Runs that failed, and why (absent when none did). */
  failedRuns?: FailedBurstRun[];
}

/**
 * Ours' steps again from the timelines each run kept, for `--chart` after a step's definition
 * changed; results whose runs kept none stay as measured.
 */
export function restepBurst(b: BurstResult): void {
  const ours = b.runs.filter((r) => r.kind === 'ours');
  if (ours.length === 0 || ours.some((r) => !r.sampleTimelines)) return;
  const kept = ours.map((r) => (r.sampleTimelines ?? []).map((t) => t ?? undefined));
  ours.forEach((run, i) => { run.steps = summarizeSteps(kept[i] ?? []); });
  b.ours.steps = summarizeSteps(kept.flat());
}

export interface AgentResult {
  method: string;
  pod: string;
  /** Its node, on a cluster of several nodes. */
  node?: string;
  podsOnNode: number;
  rssIdleMB: number;
  rssPeakBurstMB: number;
  heapUsedIdleMB: number;
  rssIdleAnonMB: number;
  rssIdleFileMB: number;
  /** The agent's own histograms over the burst: main's exit → its event received, and → request created. */
  exitEventDelay: HistogramBounds;
  exitToRequest: HistogramBounds;
  idle: { windowSeconds: number; cpuSeconds: number; millicores: number; procCpuSeconds: number; apiRequests: number };
  /** cpuMsPerStop: the burst's CPU over its Jobs, one sidecar stopped each (absent in older results). */
  burst: { windowSeconds: number; cpuSeconds: number; millicores: number; procCpuSeconds: number; cpuMsPerStop?: number; apiRequests: number; apiRequestsPerJob: number };
  /**
   * The API server over the burst window: its CPU in cores, and how long the agent's requests
   * waited in API Priority and Fairness' queues before they ran (absent in older results).
   */
  apiserverBurst?: { cpuCores: number; agentQueueWaitMeanMs: number; agentRequestsQueued: number };
  /** The agent's own count of its API requests over the burst window, by "verb code" (absent in older results). */
  agentRequestsByVerbAndCode?: Record<string, number>;
  /**
   * The agent's container stops over the burst window, by result, and how many of them resumed a
   * stop it did not see return (a restarted agent's, or another's): more stops than sidecars means
   * a container stopped again (absent in older results).
   */
  containerStops?: { stopped: number; failed: number; resumed: number };
  apiMethod: string;
}

/** A run that failed (its Pods never all started, say), and why; the other runs' figures stand. */
export interface FailedBurstRun { repeat: number; kind: Kind; error: string }

const MISSED_AFTER_MS = 30_000;
/** All Pods running → fire, on every run. */
const SETTLE_MS = 80_000;
/** The agent's idle window (first run of ours) ends 2 s before firing: time for its scrapes. */
const IDLE_MS = 60_000;
const IDLE_FROM_MS = SETTLE_MS - IDLE_MS - 2_000;
/** Fire → the Jobs and Pods are read. Room for the missed limit and the footprint's 5 s tail. */
const OBSERVE_MS = 45_000;

/** `agents`: every node's agent, in the nodes' order; the footprint returned is theirs, in that order. */
export async function runBursts(ctx: Context, agents: readonly V1Pod[], jobs = 100, repeats = 2): Promise<{ burst: BurstResult; agents: AgentResult[] }> {
  const runs: BurstRun[] = [];
  const timelines: (Timeline | undefined)[] = [];
  let footprint: AgentResult[] | undefined;
  const failedRuns: FailedBurstRun[] = [];
  for (const plan of burstOrder(Math.max(1, repeats))) {
    ctx.log(`burst: repeat ${plan.repeat}, ${plan.kind} (${plan.order === 1 ? 'first' : 'second'})`);
    const measureFootprint = plan.kind === 'ours' && !footprint;
    try {
      const r = await burstRun(ctx, agents, plan, jobs, measureFootprint);
      runs.push(r.run);
      timelines.push(...r.timelines);
      footprint ??= r.footprint;
    } catch (err) {
      // One run the machine could not carry (300 Pods that never all start) leaves the others' figures standing.
      failedRuns.push({ repeat: plan.repeat, kind: plan.kind, error: err instanceof Error ? err.message : String(err) });
    }
  }
  if (runs.length === 0) throw new Error(`every burst run failed: ${failedRuns.map((f) => `${f.kind} ${f.repeat}: ${f.error}`).join('; ')}`);
  const kindSummary = (kind: Kind): BurstKindSummary => {
    const of = runs.filter((r) => r.kind === kind);
    return {
      runs: of.length,
      mainToSidecarMs: summarize(of.flatMap((r) => r.samplesMs)),
      mainToSidecarWithMissedMs: censoredSummary(of.flatMap((r) => r.samplesMs), of.reduce((n, r) => n + (r.mainToSidecarWithMissedMs?.censored ?? 0), 0), MISSED_AFTER_MS),
      missed: of.reduce((n, r) => n + r.missed, 0),
      jobsCompleteAtWindowEnd: of.reduce((n, r) => n + r.jobsCompleteAtWindowEnd, 0),
      jobs: of.length * jobs,
      ...(kind === 'ours' ? { steps: summarizeSteps(timelines) } : {}),
    };
  };
  return {
    burst: {
      method: `${jobs} Jobs ${ctx.nodes.length > 1 ? `spread over the ${ctx.nodes.length} nodes (the i-th on node i mod ${ctx.nodes.length})` : 'on the node'}, main \`cat /go/go\` blocking on a FIFO in a shared hostPath directory, sidecar as in part 1 (ours: marked; native: ` +
        `an init container with restartPolicy Always). ${repeats} repeats, ours and native alternately first. When all ${jobs} Pods of a run ran, ` +
        `${SETTLE_MS / 1000} s of settling on every run (the 60 s idle window of part 3 inside it on the first run of ours), then the benchmark opened the ` +
        'FIFO for writing and closed it: every main read EOF and exited 0. main→sidecar: containerd\'s finishedAt of both (CRI). Missed: a sidecar not ' +
        `finished ${MISSED_AFTER_MS / 1000} s after its main. Jobs Complete: read ${OBSERVE_MS / 1000} s after firing. Ours' steps: the agent's ` +
        '"container stopped" log timelines; agentHistograms: its /metrics histograms over the run (bucket bounds), a cross-check.',
      jobs,
      repeats,
      settleSeconds: SETTLE_MS / 1000,
      observeSeconds: OBSERVE_MS / 1000,
      runs,
      ours: kindSummary('ours'),
      native: kindSummary('native'),
      ...(failedRuns.length > 0 ? { failedRuns } : {}),
    },
    agents: footprint ?? [],
  };
}

const sleepUntil = (atMs: number) => sleep(Math.max(0, atMs - Date.now()));

async function burstRun(
  ctx: Context, agents: readonly V1Pod[], plan: { kind: Kind; repeat: number; order: number }, jobs: number, measureFootprint: boolean,
): Promise<{ run: BurstRun; timelines: (Timeline | undefined)[]; footprint?: AgentResult[] }> {
  const { kind } = plan;
  const dir = join(clusterEnv().clusterDir, `bench-burst-${kind}`);
  mkdirSync(dir, { recursive: true });
  const fifo = join(dir, 'go');
  if (existsSync(fifo)) rmSync(fifo);
  execFileSync('mkfifo', ['-m', '0644', fifo]);
  const namespace = await createNamespace(ctx, `bench-burst-${kind}`);
  const names = Array.from({ length: jobs }, (_, i) => `${kind}-burst-${String(i).padStart(3, '0')}`);
  const nodeOf = new Map(names.map((name, i) => [name, roundRobin(i, ctx.nodes)]));
  const manyNodes = ctx.nodes.length > 1;
  const main = busybox('main', 'cat /go/go >/dev/null', { volumeMounts: [{ name: 'go', mountPath: '/go', readOnly: true }] });
  const volumes = [{ name: 'go', hostPath: { path: dir, type: 'Directory' } }];
  let rss: ReturnType<typeof sampleRss>[] | undefined;
  try {
    const t0 = Date.now();
    await pool(names, 10, async (name) => {
      const nodeName = nodeOf.get(name)!;
      await createJob(ctx, namespace, jobBody(name, kind === 'ours'
        ? { containers: [main, busybox('proxy', SIDECAR_SCRIPT, { env: [SIDECAR_MARK] })], volumes, nodeName }
        : { initContainers: [busybox('proxy', SIDECAR_SCRIPT, { restartPolicy: 'Always' })], containers: [main], volumes, nodeName }));
    });
    let pods: V1Pod[] = [];
    // 300 Pods on three kubelets sharing two cores took 325-420 s to start.
    const startLimitMs = Math.max(420_000, jobs * 2_000);
    const running = (p: V1Pod) => ['main', 'proxy'].every((c) => statusOf(p, c)?.state?.running);
    for (let i = 0; ; i++) {
      pods = await listPods(ctx, namespace);
      const n = pods.filter(running).length;
      if (n === jobs) break;
      if (i % 10 === 0) ctx.log(`burst (${kind}): ${n}/${jobs} Pods running`);
      if (Date.now() - t0 > startLimitMs) throw new Error(`only ${n}/${jobs} ${kind} burst Pods running after ${startLimitMs / 1000} s`);
      await sleep(2000);
    }
    const allRunningMs = Date.now();
    const podsStartSeconds = (allRunningMs - t0) / 1000;
    ctx.log(`burst (${kind}): all ${jobs} Pods running after ${podsStartSeconds.toFixed(0)} s; firing after ${SETTLE_MS / 1000} s`);
    const runningOn = async (node: string) => (await ctx.kube.get<{ items: V1Pod[] }>(`/api/v1/pods?fieldSelector=spec.nodeName=${node},status.phase=Running`)).items.length;
    const podsByNode = Object.fromEntries(await Promise.all(ctx.nodes.map(async (node) => [node, await runningOn(node)] as const)));
    const onNode = Object.values(podsByNode).reduce((a, b) => a + b, 0);
    const readAgentLog = kind === 'ours' ? await followAgentLogs(ctx, agents) : undefined;

    // ---- settling; on the first run of ours, the idle window: 60 s with >= 100 Pods on the node(s) and nothing to do.
    await sleepUntil(allRunningMs + IDLE_FROM_MS);
    const idle = measureFootprint ? await idleWindow(ctx, agents, podsByNode) : undefined;
    const metricsBefore = kind === 'ours' ? idle?.end.agents.flatMap((a) => a.metrics) ?? await scrapeAllOrNothing(agents) : [];
    await sleepUntil(allRunningMs + SETTLE_MS);

    // ---- burst: every main exits now.
    rss = idle?.pids.map((pid) => sampleRss(pid, 200));
    const fireMs = Date.now();
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    ctx.log(`burst (${kind}): fired`);
    const sidecarDone = (p: V1Pod) => Boolean(statusOf(p, 'proxy')?.state?.terminated);
    for (;;) {
      await sleep(500);
      // A list the loaded API server does not answer in time is asked again: the deadline below ends the loop.
      pods = await listPods(ctx, namespace).catch(() => pods);
      if (pods.filter(sidecarDone).length === jobs || Date.now() - fireMs > MISSED_AFTER_MS + 5_000) break;
    }
    // The agent's last status writes and events follow the stops: include them in the footprint's window.
    let burstEnd: Snapshot | undefined;
    if (idle) {
      await sleep(5_000);
      burstEnd = await snapshot(ctx, agents, idle.pids);
    }
    const rssSamples = rss?.map((r) => r.stop()) ?? [];

    // ---- the end of the observation window, the same time after firing for every run.
    await sleepUntil(fireMs + OBSERVE_MS);
    const jobList = (await ctx.kube.get<{ items: { status?: { conditions?: { type: string; status: string }[] } }[] }>(`/apis/batch/v1/namespaces/${namespace}/jobs`)).items;
    const jobsCompleteAtWindowEnd = jobList.filter((j) => j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')).length;
    pods = await listPods(ctx, namespace);
    const agentLog = await readAgentLog?.();
    const metricsAfter = kind === 'ours' ? await scrapeAllOrNothing(agents) : [];

    // ---- per Pod: runtime timestamps.
    const latencies: number[] = [];
    const mainEnds: number[] = [];
    const sidecarEnds: number[] = [];
    const missedDetail: string[] = [];
    let sidecarsMissed = 0;
    const timelines: (Timeline | undefined)[] = [];
    const onNodes: { node?: string; mainToSidecarMs: number }[] = [];
    for (const pod of pods) {
      const name = pod.metadata!.name!;
      const mainStatus = await runtimeContainer(ctx, pod, 'main');
      const proxy = await runtimeContainer(ctx, pod, 'proxy');
      if (!mainStatus?.finishedAtNs) { missedDetail.push(`${name}: main did not finish`); continue; }
      const mainMs = nsToMs(mainStatus.finishedAtNs);
      mainEnds.push(mainMs);
      if (!proxy?.finishedAtNs || nsToMs(proxy.finishedAtNs) - mainMs > MISSED_AFTER_MS) {
        missedDetail.push(`${name}: sidecar ${proxy?.finishedAtNs ? `finished ${Math.round(nsToMs(proxy.finishedAtNs) - mainMs)} ms after its main` : 'still running'}`);
        sidecarsMissed++;
        continue;
      }
      sidecarEnds.push(nsToMs(proxy.finishedAtNs));
      latencies.push(round(nsToMs(proxy.finishedAtNs) - mainMs));
      onNodes.push({ node: pod.spec?.nodeName, mainToSidecarMs: latencies.at(-1)! });
      if (agentLog) timelines.push(agentLog.timelines.get(`${namespace}/${name}`));
    }
    const firstMain = Math.min(...mainEnds);
    const run: BurstRun = {
      ...plan,
      podsStartSeconds: Math.round(podsStartSeconds),
      podsOnNode: onNode,
      ...(manyNodes ? { podsByNode } : {}),
      settledSeconds: round((fireMs - allRunningMs) / 1000),
      mainFinishSpreadMs: Math.round(Math.max(...mainEnds) - firstMain),
      mainToSidecarMs: summarize(latencies),
      mainToSidecarWithMissedMs: censoredSummary(latencies, sidecarsMissed, MISSED_AFTER_MS),
      samplesMs: latencies,
      ...(manyNodes ? { byNode: summaryByNode(onNodes, ctx.nodes, () => kind) } : {}),
      missed: missedDetail.length,
      missedDetail,
      jobsCompleteAtWindowEnd,
      allSidecarsFinishedMs: Math.round(Math.max(...sidecarEnds) - firstMain),
      ...(agentLog ? { sampleTimelines: timelines.map((t) => t ?? null), steps: summarizeSteps(timelines), agentLog: logNote(agentLog), agentHistograms: stepHistograms(metricsBefore, metricsAfter) } : {}),
    };
    ctx.log(`burst (${kind}): p50 ${run.mainToSidecarMs.p50} ms, p99 ${run.mainToSidecarMs.p99} ms, missed ${run.missed}, ${jobsCompleteAtWindowEnd}/${jobs} Jobs Complete after ${OBSERVE_MS / 1000} s`);
    const footprint = idle && burstEnd
      ? agents.map((agent, i) => {
        const node = agent.spec!.nodeName!;
        const jobsOnNode = names.filter((name) => nodeOf.get(name) === node).length;
        return footprintResult(agent, i, { onNode: podsByNode[node]!, jobsOnNode, jobs, manyNodes }, idle, burstEnd, rssSamples[i]!);
      })
      : undefined;
    return { run, timelines, ...(footprint ? { footprint } : {}) };
  } catch (err) {
    // Said before the cleanup, whose own failure (300 Pods take minutes to go) would hide it.
    ctx.log(`burst (${kind}): FAILED before its cleanup: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    throw err;
  } finally {
    rss?.forEach((r) => r.stop()); // left running, its timer would keep the benchmark from exiting
    await deleteNamespace(ctx, namespace, Math.max(180_000, jobs * 2_000));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every agent's /metrics and /proc figures (in the agents' order), and the API server's, at one instant. */
interface Snapshot { atMs: number; agents: { metrics: Sample[]; proc: ReturnType<typeof procStats> }[]; apiserver: Sample[] }

async function snapshot(ctx: Context, agents: readonly V1Pod[], pids: readonly number[]): Promise<Snapshot> {
  const atMs = Date.now();
  const metrics = await Promise.all(agents.map((agent) => scrape(agent.status!.podIP!, 9440)));
  const procs = pids.map(procStats);
  return { atMs, agents: metrics.map((m, i) => ({ metrics: m, proc: procs[i]! })), apiserver: await apiserverMetrics(ctx) };
}

async function idleWindow(ctx: Context, agents: readonly V1Pod[], podsByNode: Record<string, number>): Promise<{ pids: number[]; start: Snapshot; end: Snapshot }> {
  const pids = agents.map((agent) => containerPid(agent.status!.containerStatuses![0]!.containerID!, agent.spec!.nodeName!));
  ctx.log(`agent idle window: ${IDLE_MS / 1000} s, ${Object.entries(podsByNode).map(([node, n]) => `${n} Running Pods on node ${node}`).join(', ')}`);
  const start = await snapshot(ctx, agents, pids);
  await sleep(IDLE_MS);
  return { pids, start, end: await snapshot(ctx, agents, pids) };
}

/** Deltas of the agent's sidecar_terminator_agent_api_requests_total between two scrapes, by "verb code", those that moved. */
export function byVerbAndCode(before: readonly Sample[], after: readonly Sample[]): Record<string, number> {
  const counts = (samples: readonly Sample[]) => new Map(samples
    .filter((s) => s.name === 'sidecar_terminator_agent_api_requests_total')
    .map((s) => [`${s.labels.verb} ${s.labels.code}`, s.value]));
  const start = counts(before);
  const moved = [...counts(after)].map(([key, value]) => [key, value - (start.get(key) ?? 0)] as const).filter(([, n]) => n > 0);
  return Object.fromEntries(moved.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** One agent's part of a Snapshot. */
interface Own { atMs: number; agent: Sample[]; proc: ReturnType<typeof procStats>; apiserver: Sample[] }

/**
 * The footprint of the `index`-th agent, on a node with `onNode` Running Pods and `jobsOnNode` of the
 * burst's `jobs`. Its CPU per stop is over its own node's Jobs; the API server's figures are of every
 * agent together (one ServiceAccount, one FlowSchema), per Job over all Jobs.
 */
function footprintResult(
  agent: V1Pod, index: number, { onNode, jobsOnNode, jobs, manyNodes }: { onNode: number; jobsOnNode: number; jobs: number; manyNodes: boolean },
  idle: { start: Snapshot; end: Snapshot }, burstEnd: Snapshot, rssSamples: { rssBytes: number }[],
): AgentResult {
  const [a, b, c] = [idle.start, idle.end, burstEnd].map((s) => ({ atMs: s.atMs, agent: s.agents[index]!.metrics, proc: s.agents[index]!.proc, apiserver: s.apiserver })) as [Own, Own, Own];
  const cpu = (s: Sample[]) => metricSum(s, 'process_cpu_seconds_total');
  const flow = (s: Sample[]) => metricSum(s, 'apiserver_flowcontrol_dispatched_requests_total', { flow_schema: AGENT_FLOW });
  const stops = (s: Sample[], result: string) => metricSum(s, 'sidecar_terminator_agent_container_stops_total', { result });
  const idleSeconds = (b.atMs - a.atMs) / 1000;
  const burstSeconds = (c.atMs - b.atMs) / 1000;
  const burstRequests = flow(c.apiserver) - flow(b.apiserver);
  const wait = (s: Sample[], part: 'sum' | 'count') => metricSum(s, `apiserver_flowcontrol_request_wait_duration_seconds_${part}`, { flow_schema: AGENT_FLOW });
  const waitCount = wait(c.apiserver, 'count') - wait(b.apiserver, 'count');
  return {
    method: 'RSS: process_resident_memory_bytes from the agent\'s /metrics (podIP:9440) at the end of the idle window; peak during the burst ' +
      'from /proc/<pid>/status VmRSS of the agent\'s process sampled every 200 ms on the host (no extra scrapes). CPU: process_cpu_seconds_total ' +
      'deltas between scrapes at the start and end of each window (the end scrape is the only other work in the window; the burst window runs ' +
      'from the idle window\'s end, 2 s before firing, to 5 s after the last sidecar finished); cross-checked with utime+stime from ' +
      '/proc/<pid>/stat. Measured on the first burst run of ours.' +
      (manyNodes ? ' Every node\'s agent at the same instants; cpuMsPerStop over the Jobs on its node; the API requests and apiserverBurst are of all agents together (one ServiceAccount), per Job over all Jobs.' : ''),
    pod: agent.metadata!.name!,
    ...(manyNodes ? { node: agent.spec!.nodeName! } : {}),
    podsOnNode: onNode,
    rssIdleMB: round(metricSum(b.agent, 'process_resident_memory_bytes') / MB),
    rssPeakBurstMB: round(Math.max(...rssSamples.map((s) => s.rssBytes)) / MB),
    heapUsedIdleMB: round(metricSum(b.agent, 'nodejs_heap_size_used_bytes') / MB),
    /** VmRSS at the end of the idle window split: anonymous memory vs file pages (the node binary's code). */
    rssIdleAnonMB: round(b.proc.rssAnonBytes / MB),
    rssIdleFileMB: round(b.proc.rssFileBytes / MB),
    exitEventDelay: histogramBounds(b.agent, c.agent, 'sidecar_terminator_agent_exit_event_delay_seconds'),
    exitToRequest: histogramBounds(b.agent, c.agent, 'sidecar_terminator_agent_exit_to_request_seconds'),
    idle: {
      windowSeconds: round(idleSeconds),
      cpuSeconds: round3(cpu(b.agent) - cpu(a.agent)),
      millicores: round3(((cpu(b.agent) - cpu(a.agent)) / idleSeconds) * 1000),
      procCpuSeconds: round3(b.proc.cpuSeconds - a.proc.cpuSeconds),
      apiRequests: flow(b.apiserver) - flow(a.apiserver),
    },
    burst: {
      windowSeconds: round(burstSeconds),
      cpuSeconds: round3(cpu(c.agent) - cpu(b.agent)),
      millicores: round3(((cpu(c.agent) - cpu(b.agent)) / burstSeconds) * 1000),
      procCpuSeconds: round3(c.proc.cpuSeconds - b.proc.cpuSeconds),
      cpuMsPerStop: round(((cpu(c.agent) - cpu(b.agent)) * 1000) / jobsOnNode),
      apiRequests: burstRequests,
      apiRequestsPerJob: round(burstRequests / jobs),
    },
    agentRequestsByVerbAndCode: byVerbAndCode(b.agent, c.agent),
    containerStops: {
      stopped: stops(c.agent, 'stopped') - stops(b.agent, 'stopped'),
      failed: stops(c.agent, 'failed') - stops(b.agent, 'failed'),
      resumed: metricSum(c.agent, 'sidecar_terminator_agent_stops_resumed_total') - metricSum(b.agent, 'sidecar_terminator_agent_stops_resumed_total'),
    },
    apiserverBurst: {
      cpuCores: round3((cpu(c.apiserver) - cpu(b.apiserver)) / burstSeconds),
      agentQueueWaitMeanMs: waitCount > 0 ? round(((wait(c.apiserver, 'sum') - wait(b.apiserver, 'sum')) * 1000) / waitCount) : 0,
      agentRequestsQueued: waitCount,
    },
    apiMethod: `kube-apiserver's API Priority and Fairness: a FlowSchema (${AGENT_FLOW}) matching only the agent's ServiceAccount, on the ` +
      'priority level it gets anyway (workload-low); apiserver_flowcontrol_dispatched_requests_total{flow_schema} deltas over each window ' +
      '(read from kube-apiserver /metrics). Counts every request the agent sent, watches when they are opened. apiserverBurst: the API server\'s ' +
      'process_cpu_seconds_total over the burst window, and apiserver_flowcontrol_request_wait_duration_seconds (sum / count) of that FlowSchema: ' +
      'how long the agent\'s requests waited for a seat.',
  };
}

const round = (x: number) => Math.round(x * 10) / 10;
const round3 = (x: number) => Math.round(x * 1000) / 1000;
