// Part 5, the soak: Jobs created and finishing continuously for a long time (30 minutes by default),
// each Pod carrying hostile input (an annotation naming containers that do not exist, unique per
// Pod), with the Jobs deleted after they finish. The agent's and the leader's RSS are sampled from
// /proc throughout; flat is the target: per-Pod state must go when the Pod goes, and nothing kept
// may grow with user input.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { Context } from './context.ts';
import { SIDECAR_MARK, SIDECAR_SCRIPT, busybox, containerPid, createJob, createNamespace, deleteNamespace, jobBody, procStats, sleep } from './context.ts';
import { MB } from './stats.ts';

export interface SoakOptions {
  minutes: number;
  /** One Job is created every this many seconds. */
  everySeconds: number;
  /** Samples before this are the warm-up (caches filling), left out of the slope. */
  warmupMinutes: number;
}

export interface RssSeries {
  /** Minutes since the start and RSS in MiB, one pair per sample. */
  minutes: number[];
  rssMiB: number[];
  startMiB: number;
  endMiB: number;
  maxMiB: number;
  /** Least-squares slope after the warm-up, MiB per hour. */
  slopeMiBPerHour: number;
  restarts: number;
}

export interface SoakResult {
  method: string;
  minutes: number;
  jobsCreated: number;
  jobsComplete: number;
  jobsNotComplete: number;
  agent: RssSeries;
  controller: RssSeries;
}

const SAMPLE_EVERY_MS = 15_000;

export async function runSoak(ctx: Context, agent: V1Pod, leader: V1Pod, o: SoakOptions): Promise<SoakResult> {
  const namespace = await createNamespace(ctx, 'soak');
  const pids = { agent: containerPid(agent.status!.containerStatuses![0]!.containerID!), controller: containerPid(leader.status!.containerStatuses![0]!.containerID!) };
  const samples = { agent: [] as [number, number][], controller: [] as [number, number][] };
  const gaps = { agent: 0, controller: 0 };
  const t0 = Date.now();
  const sample = () => {
    for (const part of ['agent', 'controller'] as const) {
      try {
        samples[part].push([(Date.now() - t0) / 60_000, procStats(pids[part]).rssBytes / MB]);
      } catch {
        gaps[part]++; // the process is gone: a restart, reported
      }
    }
  };
  sample();
  const sampler = setInterval(sample, SAMPLE_EVERY_MS);
  let created = 0;
  let complete = 0;
  const finished = new Set<string>();
  try {
    ctx.log(`soak: one Job every ${o.everySeconds} s for ${o.minutes} min; RSS sampled every ${SAMPLE_EVERY_MS / 1000} s`);
    const endMs = t0 + o.minutes * 60_000;
    let lastLog = t0;
    while (Date.now() < endMs) {
      const name = `soak-${created}`;
      await createJob(ctx, namespace, soakJob(name, created));
      created++;
      complete += await reapFinished(ctx, namespace, finished);
      if (Date.now() - lastLog > 5 * 60_000) {
        lastLog = Date.now();
        const last = (s: [number, number][]) => s.at(-1)?.[1].toFixed(1) ?? '-';
        ctx.log(`soak: ${created} Jobs created, ${complete} complete; RSS agent ${last(samples.agent)} MiB, controller ${last(samples.controller)} MiB`);
      }
      await sleep(o.everySeconds * 1000);
    }
    // The last Jobs finish too.
    for (let i = 0; i < 60 && finished.size < created; i++) {
      complete += await reapFinished(ctx, namespace, finished);
      await sleep(1000);
    }
  } finally {
    clearInterval(sampler);
    sample();
    await deleteNamespace(ctx, namespace);
  }
  return {
    method:
      `Jobs created one every ${o.everySeconds} s for ${o.minutes} min (main sleeps 2 s, one sidecar stopped by us; every Pod's ` +
      'sidecars annotation also names a container that does not exist, unique per Pod), each Job deleted with its Pod once finished. ' +
      `RSS is VmRSS from /proc/<pid>/status every ${SAMPLE_EVERY_MS / 1000} s; the slope is a least-squares fit after a ${o.warmupMinutes} min warm-up.`,
    minutes: o.minutes,
    jobsCreated: created,
    jobsComplete: complete,
    jobsNotComplete: created - complete,
    agent: series(samples.agent, gaps.agent, o.warmupMinutes),
    controller: series(samples.controller, gaps.controller, o.warmupMinutes),
  };
}

function soakJob(name: string, n: number): V1Job {
  const job = jobBody(name, { containers: [busybox('main', 'sleep 2'), busybox('proxy', SIDECAR_SCRIPT, { env: [SIDECAR_MARK] })] });
  job.spec!.template.metadata = { annotations: { 'sidecar-terminator.dev/sidecars': `proxy,not-a-container-${n}` } };
  return job;
}

/** Deletes the Jobs that finished (with their Pods); returns how many of them completed. */
async function reapFinished(ctx: Context, namespace: string, finished: Set<string>): Promise<number> {
  const jobs = (await ctx.kube.get<{ items: V1Job[] }>(`/apis/batch/v1/namespaces/${namespace}/jobs`)).items;
  let complete = 0;
  for (const job of jobs) {
    const name = job.metadata!.name!;
    const done = job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    if (!done || finished.has(name)) continue;
    finished.add(name);
    if (done.type === 'Complete') complete++;
    await ctx.kube.request('DELETE', `/apis/batch/v1/namespaces/${namespace}/jobs/${name}?propagationPolicy=Background`);
  }
  return complete;
}

function series(points: [number, number][], restarts: number, warmupMinutes: number): RssSeries {
  const round = (v: number) => Math.round(v * 10) / 10;
  const after = points.filter(([m]) => m >= warmupMinutes);
  return {
    minutes: points.map(([m]) => round(m)),
    rssMiB: points.map(([, r]) => round(r)),
    startMiB: round(points[0]?.[1] ?? NaN),
    endMiB: round(points.at(-1)?.[1] ?? NaN),
    maxMiB: round(Math.max(...points.map(([, r]) => r))),
    slopeMiBPerHour: round(slope(after) * 60),
    restarts,
  };
}

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
