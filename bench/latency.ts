// Part 1: termination latency, sidecar-terminator vs the same sidecar as a native sidecar, in one run
// (ours alone on releases without native sidecars, before 1.29).
// Every Job: a main that sleeps 2 s and a sidecar that exits 0 on SIGTERM at once. Kinds of
// batches, taking turns: mixed (ours beside native, half and half, created together, so both see the
// same load), ours alone and native alone (a whole batch created together: that many Pods finishing
// together; the matched pair the headline ratio compares), ours alone under OnFailure, and three
// variants of ours alone: a sidecar with an exec preStop hook, an ignore-exit-code sidecar that
// exits 143 on SIGTERM, and three sidecars per Pod. On a cluster of several nodes the Jobs of every
// kind are spread over them round-robin (bench/nodes.ts), each read from its own node. Times:
//  - main finished → sidecar finished: the runtime's own nanosecond finishedAt of both containers
//    (CRI ContainerStatus on the Pod's node's containerd);
//  - Job created → Job complete: the benchmark's clock, from just before the create request is
//    sent to the arrival of the Job watch event carrying the Complete condition;
//  - for ours, where the time goes: the agent's own timing of each stop (its "container stopped"
//    log line), per step.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { AgentLogNote, Context, JobOptions } from './context.ts';
import { ENV_IGNORE_EXIT_CODE } from '../api/names.ts';
import { SIDECAR_MARK, SIDECAR_SCRIPT, busybox, createJob, createNamespace, deleteNamespace, followAgentLogs, jobBody, listPods, logNote, nsToMs, runtimeContainer, scrapeAllOrNothing, sleep } from './context.ts';
import { roundRobin, summaryByNode } from './nodes.ts';
import { interleave } from './order.ts';
import type { HistogramBounds, Summary } from './stats.ts';
import { bootstrapInterval, ratioInterval, summarize } from './stats.ts';
import type { StepBreakdown, Timeline } from './timeline.ts';
import { stepHistograms, summarizeSteps } from './timeline.ts';

export type Kind = 'ours' | 'native';
/**
 * mixed: ours beside native, half and half; allOurs: ours alone, the whole batch finishing together;
 * allNative: the same with native sidecars; onFailure: as allOurs, the Pods' restartPolicy OnFailure
 * (the fast path decides from the exit code); preStop, exit143, threeSidecars: as allOurs, with an
 * exec preStop hook on the sidecar, with an ignore-exit-code sidecar exiting 143 on SIGTERM, and with
 * three sidecars per Pod (main → sidecar: to the last of them).
 */
export type BatchKind = 'mixed' | 'allOurs' | 'allNative' | 'onFailure' | 'preStop' | 'exit143' | 'threeSidecars' | 'policyMarked';

/** The variants of ours alone, each with `variantJobs` Jobs. */
export const VARIANTS = ['preStop', 'exit143', 'threeSidecars', 'policyMarked'] as const satisfies readonly BatchKind[];

/** The policyMarked variant's sidecar: no marker of its own; the cluster policy POLICY_MARKED_POLICY names it. */
export const POLICY_MARKED_SIDECAR = 'policy-proxy';
const POLICY_MARKED_POLICY = 'bench-policy-marked';

export interface JobSample {
  kind: Kind;
  /** Absent in results from before the all-ours batches. */
  batch?: BatchKind;
  job: string;
  /** The node it ran on; only on a cluster of several nodes. */
  node?: string;
  mainToSidecarMs: number;
  createdToCompleteMs: number;
  /** The last sidecar finished (containerd) → the Pod's Succeeded or Failed phase seen on a watch (absent in older results). */
  sidecarToPodDoneMs?: number;
  /** That phase seen → the Job's Complete (or Failed) condition seen (absent in older results). */
  podDoneToJobDoneMs?: number;
  sidecarExitCode?: number;
  /** Ours: the agent's timing of the stop (absent when its log has none: an agent without the timing, or restarted). */
  timeline?: Timeline;
}

export interface LatencyFigures {
  mainToSidecarMs: Summary;
  /** The 95 % bootstrap interval of mainToSidecarMs.p50 (absent in older results). */
  mainToSidecarP50IntervalMs?: [number, number];
  createdToCompleteMs: Summary;
  /** After the sidecars: main exit → sidecar finished → Pod phase → Job condition, the last two here (absent in older results). */
  sidecarToPodDoneMs?: Summary;
  podDoneToJobDoneMs?: Summary;
  /** The whole of it: main finished → the Job's condition seen, one clock (absent in older results). */
  mainToJobDoneMs?: Summary;
  /** Ours: the agent's per-step timing. */
  steps?: StepBreakdown;
}

export interface LatencyResult {
  method: string;
  jobsPerKind: number;
  batchSize: number;
  samples: JobSample[];
  /** Ours in the mixed batches; in results from before the all-ours batches, ours of every batch. */
  ours?: LatencyFigures;
  /** Native sidecars in the mixed batches; absent where the release has none. */
  native?: LatencyFigures;
  /** mainToSidecarP50Interval: its 95 % bootstrap interval, each group resampled on its own (absent in older results). */
  ratio?: { mainToSidecarP50: number; mainToSidecarP50Interval?: [number, number]; mainToSidecarP90: number; mainToSidecarP99: number; createdToCompleteP50: number };
  /** Ours in the batches of ours alone. */
  allOurs?: LatencyFigures;
  /** Native sidecars in batches of their own, as many together as allOurs (absent in older results and where the release has none). */
  allNative?: LatencyFigures;
  /** allOurs against allNative: the matched batches. */
  ratioTogether?: LatencyResult['ratio'];
  /** Ours alone under restartPolicy OnFailure (absent in results from before those batches). */
  onFailure?: LatencyFigures;
  /** Ours alone: the variants (absent in older results). */
  preStop?: LatencyFigures;
  exit143?: LatencyFigures;
  threeSidecars?: LatencyFigures;
  /** A sidecar marked by a ClusterSidecarPolicy alone (absent in older results). */
  policyMarked?: LatencyFigures;
  agentLog?: AgentLogNote;
  /** The agent's step histograms over the whole part (both kinds of batches): a cross-check of the timelines. */
  agentHistograms?: Record<string, HistogramBounds>;
  /** On a cluster of several nodes: main → sidecar finished per node and kind of batch (`groupOf`). */
  byNode?: Record<string, Record<string, Summary>>;
  failures: string[];
}

const MAIN_SCRIPT = 'sleep 2';
/** The variant exit143's sidecar: exits 143 on SIGTERM (as a process killed by it), marked ignore-exit-code. */
const EXIT_143_SCRIPT = SIDECAR_SCRIPT.replace("'exit 0'", "'exit 143'");
const PRESTOP_HOOK = { exec: { command: ['sh', '-c', 'echo draining'] } };

/** The sidecars of a batch's Pods, by container name. */
export function sidecarNames(batch: BatchKind): string[] {
  if (batch === 'policyMarked') return [POLICY_MARKED_SIDECAR];
  return batch === 'threeSidecars' ? ['proxy', 'proxy-2', 'proxy-3'] : ['proxy'];
}

/** The Pod of one of our Jobs in a batch of this kind. */
export function ourJobOptions(batch: BatchKind): JobOptions {
  const restartPolicy = batch === 'onFailure' ? 'OnFailure' : 'Never';
  const sidecars = sidecarNames(batch).map((sidecar) => {
    if (batch === 'exit143') return busybox(sidecar, EXIT_143_SCRIPT, { env: [SIDECAR_MARK, { name: ENV_IGNORE_EXIT_CODE, value: 'true' }] });
    if (batch === 'policyMarked') return busybox(sidecar, SIDECAR_SCRIPT);
    return busybox(sidecar, SIDECAR_SCRIPT, { env: [SIDECAR_MARK], ...(batch === 'preStop' ? { lifecycle: { preStop: PRESTOP_HOOK } } : {}) });
  });
  return { restartPolicy, containers: [busybox('main', MAIN_SCRIPT), ...sidecars] };
}

function nativeJob(name: string, nodeName: string): V1Job {
  return jobBody(name, {
    initContainers: [busybox('proxy', SIDECAR_SCRIPT, { restartPolicy: 'Always' })],
    containers: [busybox('main', MAIN_SCRIPT)],
    nodeName,
  });
}

export const BATCH_TITLES: Record<BatchKind, string> = {
  mixed: 'mixed', allOurs: 'ours alone', allNative: 'native alone', onFailure: 'ours alone, OnFailure',
  preStop: 'ours alone, exec preStop hook', exit143: 'ours alone, ignore-exit-code sidecar exiting 143', threeSidecars: 'ours alone, three sidecars a Pod',
  policyMarked: 'ours alone, sidecar marked by a cluster policy',
};

/** A sample's group in `byNode`: its kind of batch, and in the mixed ones its kind. */
const groupOf = (s: JobSample) => (s.batch === 'mixed' ? `mixed, ${s.kind}` : BATCH_TITLES[s.batch ?? 'allOurs']);

const complete = (job: V1Job, type: string) => job.status?.conditions?.some((c) => c.type === type && c.status === 'True');

export interface Plan {
  jobsPerKind: number;
  batchSize: number;
  withNative: boolean;
  /** Jobs of each of VARIANTS (0: none, as on the oldest release). */
  variantJobs: number;
  /** Only these kinds of batches, taking turns (a comparison of two kinds, each batch beside the other). */
  only?: readonly BatchKind[];
}

export interface PlannedJob { kind: Kind; batch: BatchKind; name: string; node: string }

/**
 * The batches in the order they run: the kinds of batches take turns, so drift over the run (caches,
 * the API server's state) touches all alike. Each kind's i-th Job goes to node i mod N (in the mixed
 * batches ours and native of the same i share a node).
 */
export function planBatches({ jobsPerKind, batchSize, withNative, variantJobs, only }: Plan, nodes: readonly string[]): PlannedJob[][] {
  const batchesOf = (jobs: PlannedJob[]) => Array.from({ length: Math.ceil(jobs.length / batchSize) }, (_, i) => jobs.slice(i * batchSize, (i + 1) * batchSize));
  const index = (i: number) => String(i).padStart(3, '0');
  const mixed: PlannedJob[] = withNative
    ? Array.from({ length: jobsPerKind }, (_, i) => [
      { kind: 'ours' as const, batch: 'mixed' as const, name: `mixed-ours-${index(i)}`, node: roundRobin(i, nodes) },
      { kind: 'native' as const, batch: 'mixed' as const, name: `mixed-native-${index(i)}`, node: roundRobin(i, nodes) },
    ]).flat()
    : [];
  const planned = (kind: Kind, batch: BatchKind, count: number, prefix: string): PlannedJob[] =>
    Array.from({ length: count }, (_, i) => ({ kind, batch, name: `${prefix}-${index(i)}`, node: roundRobin(i, nodes) }));
  const kept = (jobs: PlannedJob[]) => (only ? jobs.filter((j) => only.includes(j.batch)) : jobs);
  const batches = [
    planned('ours', 'allOurs', jobsPerKind, 'alone-ours'),
    planned('native', 'allNative', withNative ? jobsPerKind : 0, 'alone-native'),
    planned('ours', 'onFailure', jobsPerKind, 'onfailure-ours'),
    ...VARIANTS.map((v) => planned('ours', v, variantJobs, `${v.toLowerCase()}-ours`)),
  ].map(kept).reduce((all, jobs) => interleave(all, batchesOf(jobs)), batchesOf(kept(mixed)));
  return only?.length === 2 ? firstInTurn(batches) : batches;
}

/** Two kinds taking turns, A B A B …, as A B B A A B …: each kind as often first of a pair as second. */
function firstInTurn(batches: PlannedJob[][]): PlannedJob[][] {
  return batches.map((_, i) => {
    const pair = Math.floor(i / 2);
    const swapped = pair % 2 === 1 ? (i % 2 === 0 ? i + 1 : i - 1) : i;
    return batches[swapped] ?? batches[i]!;
  });
}

/** `agents`: every node's agent (their logs and metrics are read together). */
export async function runLatency(
  ctx: Context, agents: readonly V1Pod[], jobsPerKind = 50, batchSize = 10, withNative = true, variantJobs = 20, only?: readonly BatchKind[],
): Promise<LatencyResult> {
  const namespace = await createNamespace(ctx, 'bench-latency');
  const created = new Map<string, number>();
  const finished = new Map<string, { at: number; type: string }>();
  const jobWatch = await ctx.kube.watch<V1Job>(`/apis/batch/v1/namespaces/${namespace}/jobs?watch=1`, (e, at) => {
    const name = e.object.metadata?.name;
    if (!name || finished.has(name)) return;
    if (complete(e.object, 'Complete')) finished.set(name, { at, type: 'Complete' });
    else if (complete(e.object, 'Failed')) finished.set(name, { at, type: 'Failed' });
  });
  // When each Job's Pod was first seen Succeeded or Failed, by Job name.
  const podDone = new Map<string, number>();
  const podWatch = await ctx.kube.watch<V1Pod>(`/api/v1/namespaces/${namespace}/pods?watch=1`, (e, at) => {
    const job = e.object.metadata?.labels?.['batch.kubernetes.io/job-name'];
    const phase = e.object.status?.phase;
    if (job && !podDone.has(job) && (phase === 'Succeeded' || phase === 'Failed')) podDone.set(job, at);
  });

  const plan: Plan = { jobsPerKind, batchSize, withNative, variantJobs, ...(only ? { only } : {}) };
  const batches = planBatches(plan, ctx.nodes);
  if (variantJobs > 0) await ctx.kube.request('POST', '/apis/sidecar-terminator.dev/v1alpha1/clustersidecarpolicies', policyMarkedPolicy(namespace));
  const readAgentLog = await followAgentLogs(ctx, agents);
  const metricsBefore = await scrapeAllOrNothing(agents);
  const failures: string[] = [];
  const samples: JobSample[] = [];
  try {
    for (const [i, batch] of batches.entries()) {
      await Promise.all(batch.map(async ({ kind, batch: batchKind, name, node }) => {
        created.set(name, Date.now());
        await createJob(ctx, namespace, kind === 'ours' ? jobBody(name, { ...ourJobOptions(batchKind), nodeName: node }) : nativeJob(name, node));
      }));
      const deadline = Date.now() + 120_000;
      while (batch.some(({ name }) => !finished.has(name)) && Date.now() < deadline) await sleep(200);
      ctx.log(`latency: batch ${i + 1}/${batches.length} (${BATCH_TITLES[batch[0]!.batch]}) done`);
    }
    // Let the last status updates land before reading the Pods.
    await sleep(2000);
    const agentLog = await readAgentLog();
    const pods = await listPods(ctx, namespace);
    const manyNodes = ctx.nodes.length > 1;
    for (const { kind, batch, name, node } of batches.flat()) {
      const pod = pods.find((p) => p.metadata?.labels?.['batch.kubernetes.io/job-name'] === name);
      const end = finished.get(name);
      if (!pod || !end) { failures.push(`${name}: ${pod ? 'did not finish within 120 s' : 'no Pod'}`); continue; }
      if (end.type !== 'Complete') failures.push(`${name}: Job ${end.type}`);
      const main = await runtimeContainer(ctx, pod, 'main');
      const sidecars = await Promise.all(sidecarNames(batch).map((sidecar) => runtimeContainer(ctx, pod, sidecar)));
      const proxy = sidecars[0];
      if (!main?.finishedAtNs || !proxy || sidecars.some((c) => !c?.finishedAtNs)) { failures.push(`${name}: a container has not finished in the runtime`); continue; }
      const lastSidecarNs = sidecars.reduce((last, c) => (c!.finishedAtNs! > last ? c!.finishedAtNs! : last), 0n);
      const timeline = kind === 'ours' ? agentLog.timelines.get(`${namespace}/${pod.metadata!.name!}`) : undefined;
      const podDoneAt = podDone.get(name);
      samples.push({
        kind, batch, job: name,
        ...(manyNodes ? { node } : {}),
        mainToSidecarMs: round(nsToMs(lastSidecarNs) - nsToMs(main.finishedAtNs)),
        createdToCompleteMs: end.at - created.get(name)!,
        ...(podDoneAt === undefined ? {} : { sidecarToPodDoneMs: round(podDoneAt - nsToMs(lastSidecarNs)), podDoneToJobDoneMs: end.at - podDoneAt }),
        sidecarExitCode: proxy.exitCode,
        ...(timeline ? { timeline } : {}),
      });
    }
    const metricsAfter = await scrapeAllOrNothing(agents);
    return summary(samples, failures, plan, ctx.nodes, logNote(agentLog), stepHistograms(metricsBefore, metricsAfter));
  } finally {
    jobWatch.stop();
    podWatch.stop();
    if (variantJobs > 0) await ctx.kube.request('DELETE', `/apis/sidecar-terminator.dev/v1alpha1/clustersidecarpolicies/${POLICY_MARKED_POLICY}`).catch(() => {});
    await deleteNamespace(ctx, namespace);
  }
}

/** The cluster policy that marks the policyMarked variant's sidecar, in this part's namespace only. */
function policyMarkedPolicy(namespace: string): object {
  return {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ClusterSidecarPolicy', metadata: { name: POLICY_MARKED_POLICY },
    spec: { mode: 'Enforce', namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } }, containers: [{ name: POLICY_MARKED_SIDECAR }] },
  };
}

/** Main finished → the Job's condition seen: the three steps end to end (containerd's and the benchmark's clocks are the node's). */
function mainToJobDone(s: JobSample): number[] {
  return s.sidecarToPodDoneMs === undefined || s.podDoneToJobDoneMs === undefined ? [] : [round(s.mainToSidecarMs + s.sidecarToPodDoneMs + s.podDoneToJobDoneMs)];
}

function summary(
  samples: JobSample[], failures: string[], { jobsPerKind, batchSize, withNative, variantJobs }: Plan, nodes: readonly string[],
  agentLog: AgentLogNote, agentHistograms: Record<string, HistogramBounds>,
): LatencyResult {
  const manyNodes = nodes.length > 1;
  const figures = (kind: Kind, batch: BatchKind): LatencyFigures => {
    const of = samples.filter((s) => s.kind === kind && s.batch === batch);
    const measuredOf = (field: 'sidecarToPodDoneMs' | 'podDoneToJobDoneMs') => summarize(of.flatMap((s) => (s[field] === undefined ? [] : [s[field]])));
    return {
      mainToSidecarMs: summarize(of.map((s) => s.mainToSidecarMs)),
      mainToSidecarP50IntervalMs: bootstrapInterval(of.map((s) => s.mainToSidecarMs), 50),
      createdToCompleteMs: summarize(of.map((s) => s.createdToCompleteMs)),
      sidecarToPodDoneMs: measuredOf('sidecarToPodDoneMs'),
      podDoneToJobDoneMs: measuredOf('podDoneToJobDoneMs'),
      mainToJobDoneMs: summarize(of.flatMap(mainToJobDone)),
      ...(kind === 'ours' ? { steps: summarizeSteps(of.map((s) => s.timeline)) } : {}),
    };
  };
  const mainToSidecar = (kind: Kind, batch: BatchKind) => samples.filter((s) => s.kind === kind && s.batch === batch).map((s) => s.mainToSidecarMs);
  const withInterval = (r: NonNullable<LatencyResult['ratio']>, batches: [BatchKind, BatchKind]) =>
    ({ ...r, mainToSidecarP50Interval: ratioInterval(mainToSidecar('ours', batches[0]), mainToSidecar('native', batches[1]), 50) });
  const ours = withNative ? figures('ours', 'mixed') : undefined;
  const native = withNative ? figures('native', 'mixed') : undefined;
  const allOurs = figures('ours', 'allOurs');
  const allNative = withNative ? figures('native', 'allNative') : undefined;
  const variants = variantJobs > 0 ? Object.fromEntries(VARIANTS.map((v) => [v, figures('ours', v)])) : {};
  return {
    method: (manyNodes ? `Jobs spread over the ${nodes.length} nodes (${nodes.join(', ')}), each kind's i-th Job pinned to node i mod ${nodes.length}` : 'Jobs pinned to the node') + ', main `sleep 2`, sidecar `' + SIDECAR_SCRIPT + '` (exits 0 on SIGTERM at once); ours: a regular container marked ' +
      `${SIDECAR_MARK.name}=true; ${withNative ? 'native: the same container as an init container with restartPolicy Always' : 'no native sidecars on this release'}. ${batchSize} Jobs at a time ` +
      `(created together), next batch when all have finished; ${withNative ? `mixed batches (half ours, half native, ${jobsPerKind} Jobs of each kind) take turns with batches of ours alone and of native alone (${jobsPerKind} Jobs each)` : `ours alone (${jobsPerKind} Jobs)`}, ` +
      `with batches of ours alone under restartPolicy OnFailure (${jobsPerKind} Jobs; the others run under Never)` +
      (variantJobs > 0 ? `, and ${variantJobs} Jobs of ours alone for each variant: an exec preStop hook on the sidecar (\`${PRESTOP_HOOK.exec.command.join(' ')}\`), an ignore-exit-code sidecar exiting 143 on SIGTERM, three sidecars a Pod (main → sidecar to the last), a sidecar marked by a ClusterSidecarPolicy alone` : '') + '. ' +
      'main→sidecar: containerd\'s finishedAt (ns) of both containers via CRI ContainerStatus' + (manyNodes ? ' on the Pod\'s node' : '') + '. created→complete: benchmark clock, create request sent → Job ' +
      'watch event with Complete=True received. After the sidecar: its finishedAt → the Pod\'s Succeeded/Failed phase on a Pod watch → the Job\'s condition on the Job watch (one clock: the benchmark runs on the node). Steps: the `timeline` of the agent\'s "container stopped" log line for the Pod (GET pods/log of the agent); ' +
      'agentHistograms: the agent\'s /metrics histograms over the part (bucket bounds), a cross-check' +
      (manyNodes ? '; the logs and histograms of every node\'s agent together. byNode: main→sidecar per node and kind of batch.' : '.'),
    jobsPerKind, batchSize, samples,
    ...(ours && native ? { ours, native, ratio: withInterval(ratios(ours, native), ['mixed', 'mixed']) } : {}),
    allOurs,
    ...(allNative ? { allNative, ratioTogether: withInterval(ratios(allOurs, allNative), ['allOurs', 'allNative']) } : {}),
    onFailure: figures('ours', 'onFailure'),
    ...variants,
    agentLog,
    agentHistograms,
    ...(manyNodes ? { byNode: summaryByNode(samples, nodes, groupOf) } : {}),
    failures,
  };
}

/** Ours against native: main → sidecar p50, p90, p99 and Job created → complete p50. */
export function ratios(ours: LatencyFigures, native: LatencyFigures): NonNullable<LatencyResult['ratio']> {
  return {
    mainToSidecarP50: ratio(ours.mainToSidecarMs.p50, native.mainToSidecarMs.p50),
    mainToSidecarP90: ratio(ours.mainToSidecarMs.p90, native.mainToSidecarMs.p90),
    mainToSidecarP99: ratio(ours.mainToSidecarMs.p99, native.mainToSidecarMs.p99),
    createdToCompleteP50: ratio(ours.createdToCompleteMs.p50, native.createdToCompleteMs.p50),
  };
}

const round = (x: number) => Math.round(x * 10) / 10;
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
