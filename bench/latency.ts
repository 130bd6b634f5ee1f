// Part 1: termination latency, sidecar-terminator vs the same sidecar as a native sidecar, in one run
// (ours alone on releases without native sidecars, before 1.29).
// Every Job: a main that sleeps 2 s and a sidecar that exits 0 on SIGTERM at once. Both kinds run
// side by side in each batch, so they see the same load. Times:
//  - main finished → sidecar finished: the runtime's own nanosecond finishedAt of both containers
//    (CRI ContainerStatus on the node's containerd);
//  - Job created → Job complete: the benchmark's clock, from just before the create request is
//    sent to the arrival of the Job watch event carrying the Complete condition.
// For our Jobs, watches on the Pods and requests also time where the latency goes: when kube-apiserver
// first showed the main terminated (kubelet's report) and when the request arrived.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import type { Context } from './context.ts';
import { SIDECAR_MARK, SIDECAR_SCRIPT, busybox, createJob, createNamespace, deleteNamespace, jobBody, listPods, nsToMs, runtimeContainer, sleep } from './context.ts';
import type { Summary } from './stats.ts';
import { summarize } from './stats.ts';

export type Kind = 'ours' | 'native';

export interface JobSample {
  kind: Kind;
  job: string;
  mainToSidecarMs: number;
  createdToCompleteMs: number;
  /** Ours only, from the watches (ms after the main finished). */
  mainReportedMs?: number;
  requestSeenMs?: number;
  sidecarExitCode?: number;
}

export interface LatencyResult {
  method: string;
  jobsPerKind: number;
  batchSize: number;
  samples: JobSample[];
  ours: { mainToSidecarMs: Summary; createdToCompleteMs: Summary };
  /** Absent where the release has no native sidecars. */
  native?: { mainToSidecarMs: Summary; createdToCompleteMs: Summary };
  ratio?: { mainToSidecarP50: number; mainToSidecarP90: number; mainToSidecarP99: number; createdToCompleteP50: number };
  /** Ours: main finished → kubelet's report in the API → request seen → sidecar finished (p50/p99 of each step). */
  oursBreakdown: { mainToReportedMs: Summary; reportedToRequestMs: Summary; requestToSidecarFinishedMs: Summary };
  failures: string[];
}

const MAIN_SCRIPT = 'sleep 2';

function ourJob(name: string): V1Job {
  return jobBody(name, { containers: [busybox('main', MAIN_SCRIPT), busybox('proxy', SIDECAR_SCRIPT, { env: [SIDECAR_MARK] })] });
}

function nativeJob(name: string): V1Job {
  return jobBody(name, {
    initContainers: [busybox('proxy', SIDECAR_SCRIPT, { restartPolicy: 'Always' })],
    containers: [busybox('main', MAIN_SCRIPT)],
  });
}

const complete = (job: V1Job, type: string) => job.status?.conditions?.some((c) => c.type === type && c.status === 'True');

export async function runLatency(ctx: Context, jobsPerKind = 50, batchSize = 10, withNative = true): Promise<LatencyResult> {
  const namespace = await createNamespace(ctx, 'bench-latency');
  const created = new Map<string, number>();
  const finished = new Map<string, { at: number; type: string }>();
  const mainReported = new Map<string, number>(); // by job name
  const requestSeen = new Map<string, number>(); // by pod name
  const jobWatch = await ctx.kube.watch<V1Job>(`/apis/batch/v1/namespaces/${namespace}/jobs?watch=1`, (e, at) => {
    const name = e.object.metadata?.name;
    if (!name || finished.has(name)) return;
    if (complete(e.object, 'Complete')) finished.set(name, { at, type: 'Complete' });
    else if (complete(e.object, 'Failed')) finished.set(name, { at, type: 'Failed' });
  });
  const podWatch = await ctx.kube.watch<V1Pod>(`/api/v1/namespaces/${namespace}/pods?watch=1`, (e, at) => {
    const job = e.object.metadata?.labels?.['batch.kubernetes.io/job-name'];
    if (!job || mainReported.has(job)) return;
    if (e.object.status?.containerStatuses?.find((s) => s.name === 'main')?.state?.terminated) mainReported.set(job, at);
  });
  const requestWatch = await ctx.kube.watch<ContainerRecreateRequest>(`/apis/sidecar-terminator.dev/v1alpha1/namespaces/${namespace}/containerrecreaterequests?watch=1`, (e, at) => {
    const pod = e.object.spec?.podName;
    if (e.type === 'ADDED' && pod && !requestSeen.has(pod)) requestSeen.set(pod, at);
  });

  const names: { kind: Kind; name: string }[] = [];
  for (let i = 0; i < jobsPerKind; i++) {
    names.push({ kind: 'ours', name: `ours-${String(i).padStart(3, '0')}` });
    if (withNative) names.push({ kind: 'native', name: `native-${String(i).padStart(3, '0')}` });
  }
  const failures: string[] = [];
  const samples: JobSample[] = [];
  try {
    for (let b = 0; b < names.length; b += batchSize) {
      const batch = names.slice(b, b + batchSize);
      await Promise.all(batch.map(async ({ kind, name }) => {
        created.set(name, Date.now());
        await createJob(ctx, namespace, kind === 'ours' ? ourJob(name) : nativeJob(name));
      }));
      const deadline = Date.now() + 120_000;
      while (batch.some(({ name }) => !finished.has(name)) && Date.now() < deadline) await sleep(200);
      ctx.log(`latency: batch ${b / batchSize + 1}/${Math.ceil(names.length / batchSize)} done`);
    }
    // Let the last status updates land before reading the Pods.
    await sleep(2000);
    const pods = await listPods(ctx, namespace);
    for (const { kind, name } of names) {
      const pod = pods.find((p) => p.metadata?.labels?.['batch.kubernetes.io/job-name'] === name);
      const end = finished.get(name);
      if (!pod || !end) { failures.push(`${name}: ${pod ? 'did not finish within 120 s' : 'no Pod'}`); continue; }
      if (end.type !== 'Complete') failures.push(`${name}: Job ${end.type}`);
      const main = await runtimeContainer(ctx, pod, 'main');
      const proxy = await runtimeContainer(ctx, pod, 'proxy');
      if (!main?.finishedAtNs || !proxy?.finishedAtNs) { failures.push(`${name}: a container has not finished in the runtime`); continue; }
      const mainMs = nsToMs(main.finishedAtNs);
      const sample: JobSample = {
        kind, job: name,
        mainToSidecarMs: round(nsToMs(proxy.finishedAtNs) - mainMs),
        createdToCompleteMs: end.at - created.get(name)!,
        sidecarExitCode: proxy.exitCode,
      };
      if (kind === 'ours') {
        const reported = mainReported.get(name);
        const request = requestSeen.get(pod.metadata!.name!);
        if (reported !== undefined) sample.mainReportedMs = round(reported - mainMs);
        if (request !== undefined) sample.requestSeenMs = round(request - mainMs);
      }
      samples.push(sample);
    }
  } finally {
    jobWatch.stop();
    podWatch.stop();
    requestWatch.stop();
    await deleteNamespace(ctx, namespace);
  }

  const of = (kind: Kind) => samples.filter((s) => s.kind === kind);
  const sum = (kind: Kind) => ({
    mainToSidecarMs: summarize(of(kind).map((s) => s.mainToSidecarMs)),
    createdToCompleteMs: summarize(of(kind).map((s) => s.createdToCompleteMs)),
  });
  const ours = sum('ours');
  const native = withNative ? sum('native') : undefined;
  const withSteps = of('ours').filter((s) => s.mainReportedMs !== undefined && s.requestSeenMs !== undefined);
  return {
    method: 'Jobs pinned to the node, main `sleep 2`, sidecar `' + SIDECAR_SCRIPT + '` (exits 0 on SIGTERM at once); ours: a regular container marked ' +
      `${SIDECAR_MARK.name}=true; ${withNative ? 'native: the same container as an init container with restartPolicy Always' : 'no native sidecars on this release'}. ${batchSize} Jobs at a time ` +
      `(${withNative ? 'half ours, half native, ' : ''}created together), next batch when all have finished. main→sidecar: containerd's finishedAt (ns) of both ` +
      'containers via CRI ContainerStatus. created→complete: benchmark clock, create request sent → Job watch event with Complete=True received.',
    jobsPerKind, batchSize, samples,
    ours,
    ...(native ? {
      native,
      ratio: {
        mainToSidecarP50: ratio(ours.mainToSidecarMs.p50, native.mainToSidecarMs.p50),
        mainToSidecarP90: ratio(ours.mainToSidecarMs.p90, native.mainToSidecarMs.p90),
        mainToSidecarP99: ratio(ours.mainToSidecarMs.p99, native.mainToSidecarMs.p99),
        createdToCompleteP50: ratio(ours.createdToCompleteMs.p50, native.createdToCompleteMs.p50),
      },
    } : {}),
    oursBreakdown: {
      mainToReportedMs: summarize(withSteps.map((s) => s.mainReportedMs!)),
      reportedToRequestMs: summarize(withSteps.map((s) => s.requestSeenMs! - s.mainReportedMs!)),
      requestToSidecarFinishedMs: summarize(withSteps.map((s) => s.mainToSidecarMs - s.requestSeenMs!)),
    },
    failures,
  };
}

const round = (x: number) => Math.round(x * 10) / 10;
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
