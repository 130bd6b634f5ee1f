// Part 5, the soak: Jobs created and finishing continuously for a long time (two hours by default),
// the way a busy cluster churns: Jobs deleted as soon as they finish, deleted by the TTL controller,
// kept for a while (a CronJob's history), and Jobs under `OnFailure` whose main fails once and is
// restarted by kubelet. Every Pod carries hostile input (an annotation naming a container that does
// not exist, unique per Pod). Meanwhile the agent is restarted and kube-apiserver is restarted. The
// agent's and the leader's RSS and V8 heap are sampled throughout, and both take a heap snapshot
// when the measured window opens and when it closes: flat is the target, and the snapshots show
// what any growth is made of.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { clusterEnv } from '../e2e/support/cluster.ts';
import { agentPods, controllerLeader } from '../e2e/support/deploy.ts';
import { restartClusterProcess } from '../e2e/support/processes.ts';
import type { Context } from './context.ts';
import { SIDECAR_MARK, SIDECAR_SCRIPT, busybox, containerPid, createJob, createNamespace, deleteNamespace, jobBody, procStats, scrapeUrl, sleep, waitUntil } from './context.ts';
import type { HeapDiff, HeapSummary } from './heap.ts';
import { diffHeapSummaries, heapSnapshot } from './heap.ts';
import { MB, metricSum, percentile } from './stats.ts';

export interface SoakOptions {
  minutes: number;
  /** One Job is created every this many seconds. */
  everySeconds: number;
  /** Samples before this are the warm-up (caches filling, the restarts), left out of the figures. */
  warmupMinutes: number;
}

/** How the soak's Jobs end, in turn. */
export const SOAK_KINDS = ['deleted', 'ttl', 'retained', 'onFailure'] as const;
export type SoakKind = (typeof SOAK_KINDS)[number];

/** Finished Jobs of the `retained` kind stay this long (a CronJob's history), then the benchmark deletes them. */
const RETAIN_MINUTES = 10;
const TTL_SECONDS = 60;
const SAMPLE_EVERY_MS = 15_000;
const SAMPLE_LOCATE_TIMEOUT_MS = 5_000;
/** The share of the run at which the agent, then kube-apiserver, are restarted. */
const AGENT_RESTART_AT = 0.1;
const APISERVER_RESTART_AT = 0.2;
/** The flatness compares the medians of the measured window's first and last stretch of this length. */
const FLAT_STRETCH_MINUTES = 10;

export interface MemorySeries {
  /** Minutes since the start; RSS (VmRSS) and V8 heap used (its /metrics) in MiB, one of each per sample (null: not read). */
  minutes: number[];
  rssMiB: (number | null)[];
  heapUsedMiB: (number | null)[];
  /** The process sampled, and from which minute (a restart starts a new one). */
  processes: { fromMinute: number; pod: string; pid: number }[];
  startMiB: number;
  endMiB: number;
  maxMiB: number;
  /** Samples missed (the process gone or being replaced). */
  gaps: number;
  window: FlatWindow;
  heapSnapshots?: { start: HeapSummary; end: HeapSummary; diff: HeapDiff } | { error: string };
}

/** The measured window: from the warm-up's end (and the last restart's) to the end. */
export interface FlatWindow {
  fromMinute: number;
  toMinute: number;
  /**
   * Median RSS of the stretch before the window: the heap snapshot at its opening raises RSS for
   * good (the process keeps what the snapshot allocated; bench/README.md), so the window's levels are higher.
   */
  rssBeforeMiB: number;
  /** Medians of the window's first and last stretch (FLAT_STRETCH_MINUTES, or a quarter of a shorter window). */
  rssFirstMiB: number;
  rssLastMiB: number;
  rssGrowthPercent: number;
  heapFirstMiB: number;
  heapLastMiB: number;
  heapGrowthPercent: number;
  /** Least-squares slope of RSS over the window, MiB per hour. */
  rssSlopeMiBPerHour: number;
}

export interface SoakResult {
  method: string;
  minutes: number;
  jobsCreated: number;
  jobsComplete: number;
  jobsFailed: number;
  /** Jobs gone before the benchmark saw them finish (only the TTL controller deletes them, after they finish). */
  jobsUnaccounted: number;
  jobsNotFinished: number;
  byKind: Record<SoakKind, { created: number; complete: number }>;
  /** The most finished Pods kept in the API at once (retained and TTL Jobs). */
  peakFinishedPodsKept: number;
  disruptions: { minute: number; what: string; seconds: number; failed?: string }[];
  agent: MemorySeries;
  controller: MemorySeries;
}

interface SoakJob {
  kind: SoakKind;
  finishedAt?: number;
  /** gone: deleted before the benchmark saw it finish. */
  outcome?: 'Complete' | 'Failed' | 'gone';
}

interface Sampled {
  part: 'agent' | 'controller';
  /** The Pod to sample now, waiting at most `timeoutMs` for one. */
  locate: (timeoutMs: number) => Promise<{ pod: V1Pod; metricsUrl: string }>;
  current?: { pod: string; pid: number; metricsUrl: string };
  points: { minute: number; rss: number | null; heap: number | null }[];
  processes: MemorySeries['processes'];
  gaps: number;
}

export async function runSoak(ctx: Context, o: SoakOptions): Promise<SoakResult> {
  const namespace = await createNamespace(ctx, 'soak');
  const node = clusterEnv().nodeName;
  const sampled: Sampled[] = [
    { part: 'agent', locate: (timeoutMs) => locateAgent(node, timeoutMs), points: [], processes: [], gaps: 0 },
    { part: 'controller', locate: async (timeoutMs) => { const pod = await controllerLeader(timeoutMs); return { pod, metricsUrl: `http://${pod.status!.podIP}:9441/metrics` }; }, points: [], processes: [], gaps: 0 },
  ];
  const t0 = Date.now();
  const minuteNow = () => (Date.now() - t0) / 60_000;
  const sampleAll = () => Promise.all(sampled.map((s) => sample(s, minuteNow())));
  await sampleAll();
  let sampling = Promise.resolve();
  const sampler = setInterval(() => { sampling = sampling.then(async () => { await sampleAll(); }); }, SAMPLE_EVERY_MS);

  const byKind = Object.fromEntries(SOAK_KINDS.map((k) => [k, { created: 0, complete: 0 }])) as SoakResult['byKind'];
  const jobs = new Map<string, SoakJob>();
  const disruptions: SoakResult['disruptions'] = [];
  const snapshots = new Map<string, HeapSummary[]>();
  let peakKept = 0;
  let created = 0;
  const windowFrom = Math.max(o.warmupMinutes, (APISERVER_RESTART_AT * o.minutes) + o.warmupMinutes / 2);
  const endMs = t0 + o.minutes * 60_000;
  const due = [
    { at: AGENT_RESTART_AT * o.minutes, what: 'agent Pod deleted; the DaemonSet starts another', run: () => restartAgent(ctx, node) },
    { at: APISERVER_RESTART_AT * o.minutes, what: 'kube-apiserver restarted (SIGTERM, SIGKILL after 10 s, then started again)', run: () => restartApiserver(ctx) },
    { at: windowFrom, what: 'heap snapshots (the measured window opens)', run: () => snapshotAll(ctx, sampled, snapshots) },
  ];
  try {
    ctx.log(`soak: one Job every ${o.everySeconds} s for ${o.minutes} min (${SOAK_KINDS.join(', ')} in turn); memory sampled every ${SAMPLE_EVERY_MS / 1000} s; measured from minute ${windowFrom.toFixed(1)}`);
    let lastLog = t0;
    while (Date.now() < endMs) {
      const next = due[0];
      if (next && minuteNow() >= next.at) {
        due.shift();
        const start = Date.now();
        ctx.log(`soak: ${next.what}`);
        const failed = await next.run().then(() => undefined, (err: unknown) => String(err));
        if (failed) ctx.log(`soak: ${next.what}: FAILED: ${failed}`);
        disruptions.push({ minute: Math.round(((start - t0) / 60_000) * 10) / 10, what: next.what, seconds: Math.round((Date.now() - start) / 100) / 10, ...(failed ? { failed } : {}) });
        await sampling;
        await sampleAll(); // the new processes, at once
      }
      const kind = SOAK_KINDS[created % SOAK_KINDS.length]!;
      const name = `soak-${created}`;
      try {
        await createJob(ctx, namespace, soakJob(name, kind, created, node));
        jobs.set(name, { kind });
        byKind[kind].created++;
        created++;
      } catch (err) {
        ctx.log(`soak: creating ${name} failed, next turn: ${String(err)}`);
      }
      peakKept = Math.max(peakKept, await reap(ctx, namespace, jobs).catch(() => 0));
      if (Date.now() - lastLog > 10 * 60_000) {
        lastLog = Date.now();
        const last = (s: Sampled) => s.points.findLast((p) => p.rss !== null)?.rss?.toFixed(1) ?? '-';
        const finished = [...jobs.values()].filter((j) => j.outcome).length;
        ctx.log(`soak: ${created} Jobs created, ${finished} finished; RSS agent ${last(sampled[0]!)} MiB, controller ${last(sampled[1]!)} MiB`);
      }
      await sleep(o.everySeconds * 1000);
    }
    // The last Jobs finish too.
    for (let i = 0; i < 90 && [...jobs.values()].some((j) => !j.outcome); i++) {
      await reap(ctx, namespace, jobs).catch(() => 0);
      await sleep(1000);
    }
  } finally {
    clearInterval(sampler);
    await sampling;
    await sampleAll();
  }
  const endMinute = minuteNow();
  await snapshotAll(ctx, sampled, snapshots);
  await deleteNamespace(ctx, namespace);
  for (const j of jobs.values()) if (j.outcome === 'Complete') byKind[j.kind].complete++;
  const all = [...jobs.values()];
  return {
    method:
      `Jobs created one every ${o.everySeconds} s for ${o.minutes} min, in turn: deleted with their Pod once finished; deleted by the TTL controller ` +
      `(ttlSecondsAfterFinished ${TTL_SECONDS}); kept ${RETAIN_MINUTES} min after finishing, then deleted; restartPolicy OnFailure with the main failing ` +
      'its first run (kubelet restarts it, the second run succeeds). Main sleeps 2 s, one sidecar stopped by us; every Pod\'s sidecars annotation also ' +
      `names a container that does not exist, unique per Pod. At ${AGENT_RESTART_AT * 100} % of the run the agent Pod is deleted, at ` +
      `${APISERVER_RESTART_AT * 100} % kube-apiserver is restarted. RSS is VmRSS from /proc/<pid>/status and heap is nodejs_heap_size_used_bytes ` +
      `from /metrics, every ${SAMPLE_EVERY_MS / 1000} s; the window opens after the warm-up and the restarts (with a heap snapshot of each ` +
      `process) and closes at the end (another); flatness compares the medians of its first and last ${FLAT_STRETCH_MINUTES} min.`,
    minutes: o.minutes,
    jobsCreated: created,
    jobsComplete: all.filter((j) => j.outcome === 'Complete').length,
    jobsFailed: all.filter((j) => j.outcome === 'Failed').length,
    jobsUnaccounted: all.filter((j) => j.outcome === 'gone').length,
    jobsNotFinished: all.filter((j) => j.outcome === undefined).length,
    byKind,
    peakFinishedPodsKept: peakKept,
    disruptions,
    agent: series(sampled[0]!, windowFrom, endMinute, snapshots.get('agent')),
    controller: series(sampled[1]!, windowFrom, endMinute, snapshots.get('controller')),
  };
}

export function soakJob(name: string, kind: SoakKind, n: number, nodeName: string): V1Job {
  const onFailure = kind === 'onFailure';
  // The main's first run fails; kubelet restarts it in the same Pod (the emptyDir survives), and the second run succeeds.
  const main = onFailure
    ? busybox('main', 'if [ -e /marker/ran ]; then sleep 2; exit 0; fi; touch /marker/ran; sleep 1; exit 1', { volumeMounts: [{ name: 'marker', mountPath: '/marker' }] })
    : busybox('main', 'sleep 2');
  const job = jobBody(name, {
    containers: [main, busybox('proxy', SIDECAR_SCRIPT, { env: [SIDECAR_MARK] })],
    nodeName,
    restartPolicy: onFailure ? 'OnFailure' : 'Never',
    volumes: onFailure ? [{ name: 'marker', emptyDir: {} }] : undefined,
  });
  job.metadata!.labels = { 'sidecar-terminator.bench/soak-kind': kind };
  // With OnFailure, each restart of the main counts against the back-off limit.
  if (onFailure) job.spec!.backoffLimit = 2;
  if (kind === 'ttl') job.spec!.ttlSecondsAfterFinished = TTL_SECONDS;
  job.spec!.template.metadata = { annotations: { 'sidecar-terminator.dev/sidecars': `proxy,not-a-container-${n}` } };
  return job;
}

/**
 * Records the Jobs that finished and deletes those whose time came (at once, or after RETAIN_MINUTES;
 * the TTL controller deletes its own). Returns how many finished Jobs are in the API.
 */
async function reap(ctx: Context, namespace: string, jobs: Map<string, SoakJob>): Promise<number> {
  const items = (await ctx.kube.get<{ items: V1Job[] }>(`/apis/batch/v1/namespaces/${namespace}/jobs`)).items;
  const present = new Set(items.map((j) => j.metadata!.name!));
  let kept = 0;
  for (const job of items) {
    const name = job.metadata!.name!;
    const entry = jobs.get(name);
    const done = job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    if (!entry || !done) continue;
    if (!entry.outcome) {
      entry.outcome = done.type as 'Complete' | 'Failed';
      entry.finishedAt = Date.now();
    }
    kept++;
    const expired = entry.kind === 'deleted' || entry.kind === 'onFailure' || (entry.kind === 'retained' && Date.now() - entry.finishedAt! > RETAIN_MINUTES * 60_000);
    if (expired) await ctx.kube.request('DELETE', `/apis/batch/v1/namespaces/${namespace}/jobs/${name}?propagationPolicy=Background`).catch(() => {});
  }
  // Every Job is created before a list that must hold it, so one missing and never seen finished was
  // deleted unseen (by the TTL controller while the benchmark could not list, e.g. during the restart).
  for (const [name, entry] of jobs) if (!entry.outcome && !present.has(name)) entry.outcome = 'gone';
  return kept;
}

async function locateAgent(node: string, timeoutMs: number): Promise<{ pod: V1Pod; metricsUrl: string }> {
  let found: V1Pod | undefined;
  await waitUntil(async () => {
    found = (await agentPods()).find((p) => p.spec?.nodeName === node && p.status?.containerStatuses?.[0]?.state?.running && p.status.podIP);
    return found !== undefined;
  }, timeoutMs, `a running agent Pod on ${node}`, 1000);
  return { pod: found!, metricsUrl: `http://${found!.status!.podIP}:9440/metrics` };
}

/**
 * One sample of a process: its RSS from /proc, its heap from /metrics. The process is looked up at
 * every sample: a restarted agent is another process, and the lease may have moved to the other
 * replica (a restarted leader's Pod is no longer the leader).
 */
async function sample(s: Sampled, minute: number): Promise<void> {
  let rss: number | null = null;
  let heap: number | null = null;
  try {
    // The API server may be down (its restart): the process known so far is kept.
    const located = await s.locate(SAMPLE_LOCATE_TIMEOUT_MS).catch(() => undefined);
    const containerID = located?.pod.status?.containerStatuses?.[0]?.containerID;
    const pid = containerID ? containerPid(containerID) : undefined;
    if (located && pid !== undefined && pid !== s.current?.pid) {
      s.current = { pod: located.pod.metadata!.name!, pid, metricsUrl: located.metricsUrl };
      s.processes.push({ fromMinute: round1(minute), pod: s.current.pod, pid });
    }
    if (!s.current) throw new Error(`no ${s.part} process found`);
    rss = procStats(s.current.pid).rssBytes / MB;
    heap = metricSum(await scrapeUrl(s.current.metricsUrl), 'nodejs_heap_size_used_bytes') / MB;
  } catch {
    if (rss === null) s.current = undefined; // gone: the next sample looks it up again
    s.gaps++;
  }
  s.points.push({ minute, rss, heap });
}

async function snapshotAll(ctx: Context, sampled: Sampled[], into: Map<string, HeapSummary[]>): Promise<void> {
  for (const s of sampled) {
    if (!s.current) continue;
    const file = join(tmpdir(), `sidecar-terminator-soak-${s.part}-${Date.now()}.heapsnapshot`);
    try {
      const summary = await heapSnapshot(s.current.pid, file);
      into.set(s.part, [...(into.get(s.part) ?? []), summary]);
      ctx.log(`soak: heap snapshot of the ${s.part} (${s.current.pod}): ${summary.mib} MiB in ${file}`);
    } catch (err) {
      ctx.log(`soak: heap snapshot of the ${s.part} failed: ${String(err)}`);
    }
  }
}

async function restartAgent(ctx: Context, node: string): Promise<void> {
  const { pod } = await locateAgent(node, 180_000);
  await ctx.kube.request('DELETE', `/api/v1/namespaces/${pod.metadata!.namespace}/pods/${pod.metadata!.name}`);
  await waitUntil(async () => (await agentPods()).some((p) => p.metadata!.name !== pod.metadata!.name && p.spec?.nodeName === node &&
    p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')), 180_000, 'the new agent Pod ready', 1000);
}

/**
 * Restarts the cluster's kube-apiserver as the cluster's scripts stop one: SIGTERM, then SIGKILL
 * after 10 s (it stops listening at once, but its graceful termination may keep the process a
 * minute longer).
 */
async function restartApiserver(ctx: Context): Promise<void> {
  await restartClusterProcess('kube-apiserver', {
    stopTimeoutMs: 10_000,
    ready: async () => (await ctx.kube.get('/readyz'), true),
    readyTimeoutMs: 120_000,
  });
}

function series(s: Sampled, fromMinute: number, toMinute: number, heaps: HeapSummary[] | undefined): MemorySeries {
  const rss = s.points.flatMap((p) => (p.rss === null ? [] : [p.rss]));
  const [start, end] = heaps ?? [];
  return {
    minutes: s.points.map((p) => round1(p.minute)),
    rssMiB: s.points.map((p) => (p.rss === null ? null : round1(p.rss))),
    heapUsedMiB: s.points.map((p) => (p.heap === null ? null : round1(p.heap))),
    processes: s.processes,
    startMiB: round1(rss[0] ?? NaN),
    endMiB: round1(rss.at(-1) ?? NaN),
    maxMiB: round1(Math.max(...rss)),
    gaps: s.gaps,
    // The stretch before the window is the window's own process's: a restart or a Lease move before it starts another.
    window: flatWindow(s.points, fromMinute, toMinute, Math.max(0, ...s.processes.filter((p) => p.fromMinute <= fromMinute).map((p) => p.fromMinute))),
    heapSnapshots: start && end ? { start, end, diff: diffHeapSummaries(start, end) } : { error: `${heaps?.length ?? 0} of 2 heap snapshots taken (see the log)` },
  };
}

/**
 * The window's figures: medians of its first and last stretch, their growth, and the RSS slope;
 * `processFromMinute`: since when the process sampled at the window's opening was (the stretch before it starts no earlier).
 */
export function flatWindow(
  points: readonly { minute: number; rss: number | null; heap: number | null }[], fromMinute: number, toMinute: number, processFromMinute = 0,
): FlatWindow {
  const inWindow = points.filter((p) => p.minute >= fromMinute && p.minute <= toMinute);
  const stretch = Math.min(FLAT_STRETCH_MINUTES, (toMinute - fromMinute) / 4);
  const first = inWindow.filter((p) => p.minute < fromMinute + stretch);
  const last = inWindow.filter((p) => p.minute > toMinute - stretch);
  const before = points.filter((p) => p.minute < fromMinute && p.minute >= Math.max(fromMinute - stretch, processFromMinute));
  const med = (ps: typeof inWindow, key: 'rss' | 'heap') => percentile(ps.flatMap((p) => (p[key] === null ? [] : [p[key]!])), 50);
  const growth = (a: number, b: number) => Math.round(((b - a) / a) * 1000) / 10;
  const rssFirst = med(first, 'rss');
  const rssLast = med(last, 'rss');
  const heapFirst = med(first, 'heap');
  const heapLast = med(last, 'heap');
  return {
    fromMinute: round1(fromMinute),
    toMinute: round1(toMinute),
    rssBeforeMiB: round1(med(before, 'rss')),
    rssFirstMiB: round1(rssFirst),
    rssLastMiB: round1(rssLast),
    rssGrowthPercent: growth(rssFirst, rssLast),
    heapFirstMiB: round1(heapFirst),
    heapLastMiB: round1(heapLast),
    heapGrowthPercent: growth(heapFirst, heapLast),
    rssSlopeMiBPerHour: round1(slope(inWindow.flatMap((p) => (p.rss === null ? [] : [[p.minute, p.rss] as [number, number]]))) * 60),
  };
}

const round1 = (v: number) => Math.round(v * 10) / 10;

/** Least-squares slope of y over x (per minute here). */
export function slope(points: readonly [number, number][]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  const sxy = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  return sxx === 0 ? NaN : sxy / sxx;
}
