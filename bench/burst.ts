// Parts 2 and 3: a burst of 100 Jobs whose mains finish at the same instant on the one node, and
// the agent's footprint with those 100 Pods on its node, idle for 60 s and during the burst.
//
// The mains block opening a FIFO (a hostPath file shared by all of them); the benchmark opens it
// for writing and closes it, and every main reads end-of-file and exits 0 at once, so all 100 mains
// finish within milliseconds of each other (the spread is measured from the runtime's timestamps).
// The sidecars are the interruptible loop of part 1. No polling in the containers, so the idle
// window is quiet apart from the sidecars' `sleep 1` loops.
import { closeSync, constants, existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { clusterEnv } from '../e2e/support/cluster.ts';
import type { Context } from './context.ts';
import {
  SIDECAR_MARK, SIDECAR_SCRIPT, apiserverMetrics, busybox, containerPid, createJob, createNamespace, deleteNamespace, jobBody, listPods,
  nsToMs, procStats, runtimeContainer, sampleRss, scrape, sleep, statusOf,
} from './context.ts';
import { pool } from './kube.ts';
import { AGENT_FLOW } from './setup.ts';
import type { HistogramBounds, Sample, Summary } from './stats.ts';
import { MB, histogramBounds, metricSum, summarize } from './stats.ts';

export interface BurstResult {
  method: string;
  jobs: number;
  podsOnNodeDuringIdle: number;
  podsStartSeconds: number;
  mainFinishSpreadMs: number;
  mainToSidecarMs: Summary;
  samplesMs: number[];
  missed: number;
  missedDetail: string[];
  jobsComplete: number;
  /** Fire → every sidecar finished (runtime time of the last one). */
  allSidecarsFinishedMs: number;
  agentStopSeconds?: { count: number; sum: number };
  /** Main finished (runtime) → kubelet's report seen in the API → request seen → sidecar finished (runtime). */
  breakdown: { mainToReportedMs: Summary; reportedToRequestMs: Summary; requestToSidecarFinishedMs: Summary };
}

export interface AgentResult {
  method: string;
  pod: string;
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
  burst: { windowSeconds: number; cpuSeconds: number; millicores: number; procCpuSeconds: number; apiRequests: number; apiRequestsPerJob: number };
  apiMethod: string;
}

const FIFO_DIR = () => join(clusterEnv().clusterDir, 'bench-burst');
const MISSED_AFTER_MS = 30_000;

export async function runBurst(ctx: Context, agent: V1Pod, jobs = 100): Promise<{ burst: BurstResult; agent: AgentResult }> {
  const dir = FIFO_DIR();
  mkdirSync(dir, { recursive: true });
  const fifo = join(dir, 'go');
  if (existsSync(fifo)) rmSync(fifo);
  execFileSync('mkfifo', ['-m', '0644', fifo]);

  const namespace = await createNamespace(ctx, 'bench-burst');
  const names = Array.from({ length: jobs }, (_, i) => `burst-${String(i).padStart(3, '0')}`);
  try {
    const t0 = Date.now();
    await pool(names, 10, async (name) => {
      await createJob(ctx, namespace, jobBody(name, {
        containers: [
          busybox('main', 'cat /go/go >/dev/null', { volumeMounts: [{ name: 'go', mountPath: '/go', readOnly: true }] }),
          busybox('proxy', SIDECAR_SCRIPT, { env: [SIDECAR_MARK] }),
        ],
        volumes: [{ name: 'go', hostPath: { path: dir, type: 'Directory' } }],
      }));
    });
    let pods: V1Pod[] = [];
    const running = (p: V1Pod) => ['main', 'proxy'].every((c) => statusOf(p, c)?.state?.running);
    for (let i = 0; ; i++) {
      pods = await listPods(ctx, namespace);
      const n = pods.filter(running).length;
      if (n === jobs) break;
      if (i % 10 === 0) ctx.log(`burst: ${n}/${jobs} Pods running`);
      if (Date.now() - t0 > 420_000) throw new Error(`only ${n}/${jobs} burst Pods running after 420 s`);
      await sleep(2000);
    }
    const podsStartSeconds = (Date.now() - t0) / 1000;
    ctx.log(`burst: all ${jobs} Pods running after ${podsStartSeconds.toFixed(0)} s; letting the node settle for 15 s`);
    await sleep(15_000);

    // ---- idle window: 60 s with >= 100 Pods on the node and nothing to do.
    const agentIP = agent.status!.podIP!;
    const agentPid = containerPid(agent.status!.containerStatuses![0]!.containerID!);
    const onNode = (await ctx.kube.get<{ items: V1Pod[] }>(`/api/v1/pods?fieldSelector=spec.nodeName=${ctx.nodeName},status.phase=Running`)).items.length;
    const idleStartMs = Date.now();
    const a0 = await scrape(agentIP, 9440);
    const p0 = procStats(agentPid);
    const s0 = await apiserverMetrics(ctx);
    ctx.log(`agent idle window: 60 s, ${onNode} Running Pods on node ${ctx.nodeName}`);
    await sleep(60_000);
    const a1 = await scrape(agentIP, 9440);
    const p1 = procStats(agentPid);
    const idleEndMs = Date.now();
    const s1 = await apiserverMetrics(ctx);

    // ---- burst: every main exits now. Watches time kubelet's reports and the requests' arrival.
    const mainReported = new Map<string, number>();
    const requestSeen = new Map<string, number>();
    const podWatch = await ctx.kube.watch<V1Pod>(`/api/v1/namespaces/${namespace}/pods?watch=1`, (e, at) => {
      const name = e.object.metadata?.name;
      if (name && !mainReported.has(name) && statusOf(e.object, 'main')?.state?.terminated) mainReported.set(name, at);
    });
    const requestWatch = await ctx.kube.watch<ContainerRecreateRequest>(`/apis/sidecar-terminator.dev/v1alpha1/namespaces/${namespace}/containerrecreaterequests?watch=1`, (e, at) => {
      const pod = e.object.spec?.podName;
      if (e.type === 'ADDED' && pod && !requestSeen.has(pod)) requestSeen.set(pod, at);
    });
    const rss = sampleRss(agentPid, 200);
    const fireMs = Date.now();
    const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    closeSync(fd);
    ctx.log('burst: fired');
    const sidecarDone = (p: V1Pod) => Boolean(statusOf(p, 'proxy')?.state?.terminated);
    for (;;) {
      await sleep(500);
      pods = await listPods(ctx, namespace);
      if (pods.filter(sidecarDone).length === jobs || Date.now() - fireMs > MISSED_AFTER_MS + 5_000) break;
    }
    // The agent's last status writes and events follow the stops: include them in the window.
    await sleep(5_000);
    const burstEndMs = Date.now();
    const a2 = await scrape(agentIP, 9440);
    const p2 = procStats(agentPid);
    const s2 = await apiserverMetrics(ctx);
    const rssSamples = rss.stop();
    podWatch.stop();
    requestWatch.stop();
    pods = await listPods(ctx, namespace);

    // ---- per Pod: runtime timestamps.
    const latencies: number[] = [];
    const mainEnds: number[] = [];
    const sidecarEnds: number[] = [];
    const missedDetail: string[] = [];
    const steps = { mainToReported: [] as number[], reportedToRequest: [] as number[], requestToSidecar: [] as number[] };
    for (const pod of pods) {
      const name = pod.metadata!.name!;
      const main = await runtimeContainer(ctx, pod, 'main');
      const proxy = await runtimeContainer(ctx, pod, 'proxy');
      if (!main?.finishedAtNs) { missedDetail.push(`${name}: main did not finish`); continue; }
      const mainMs = nsToMs(main.finishedAtNs);
      mainEnds.push(mainMs);
      if (!proxy?.finishedAtNs || nsToMs(proxy.finishedAtNs) - mainMs > MISSED_AFTER_MS) {
        missedDetail.push(`${name}: sidecar ${proxy?.finishedAtNs ? `finished ${Math.round(nsToMs(proxy.finishedAtNs) - mainMs)} ms after its main` : 'still running'}`);
        continue;
      }
      sidecarEnds.push(nsToMs(proxy.finishedAtNs));
      const reported = mainReported.get(name);
      const request = requestSeen.get(name);
      if (reported !== undefined && request !== undefined) {
        steps.mainToReported.push(reported - mainMs);
        steps.reportedToRequest.push(request - reported);
        steps.requestToSidecar.push(nsToMs(proxy.finishedAtNs) - request);
      }
      latencies.push(Math.round((nsToMs(proxy.finishedAtNs) - mainMs) * 10) / 10);
    }
    const jobList = (await ctx.kube.get<{ items: { status?: { conditions?: { type: string; status: string }[] } }[] }>(`/apis/batch/v1/namespaces/${namespace}/jobs`)).items;
    const jobsComplete = jobList.filter((j) => j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')).length;

    const cpu = (a: Sample[]) => metricSum(a, 'process_cpu_seconds_total');
    const flow = (s: Sample[]) => metricSum(s, 'apiserver_flowcontrol_dispatched_requests_total', { flow_schema: AGENT_FLOW });
    const idleSeconds = (idleEndMs - idleStartMs) / 1000;
    const burstSeconds = (burstEndMs - idleEndMs) / 1000;
    const burstRequests = flow(s2) - flow(s1);
    const stopCount = metricSum(a2, 'sidecar_terminator_agent_stop_seconds_count') - metricSum(a1, 'sidecar_terminator_agent_stop_seconds_count');
    const stopSum = metricSum(a2, 'sidecar_terminator_agent_stop_seconds_sum') - metricSum(a1, 'sidecar_terminator_agent_stop_seconds_sum');
    const minMain = Math.min(...mainEnds);

    return {
      burst: {
        method: `${jobs} Jobs on the node, main \`cat /go/go\` blocking on a FIFO in a shared hostPath directory, sidecar as in part 1. When all ${jobs} ` +
          'Pods ran (and after the 60 s idle window of part 3), the benchmark opened the FIFO for writing and closed it: every main read EOF and ' +
          `exited 0. main→sidecar: containerd's finishedAt of both (CRI). Missed: a sidecar not finished ${MISSED_AFTER_MS / 1000} s after its main.`,
        jobs,
        podsOnNodeDuringIdle: onNode,
        podsStartSeconds: Math.round(podsStartSeconds),
        mainFinishSpreadMs: Math.round(Math.max(...mainEnds) - minMain),
        mainToSidecarMs: summarize(latencies),
        samplesMs: latencies,
        missed: missedDetail.length,
        missedDetail,
        jobsComplete,
        allSidecarsFinishedMs: Math.round(Math.max(...sidecarEnds) - minMain),
        breakdown: {
          mainToReportedMs: summarize(steps.mainToReported),
          reportedToRequestMs: summarize(steps.reportedToRequest),
          requestToSidecarFinishedMs: summarize(steps.requestToSidecar),
        },
        agentStopSeconds: { count: stopCount, sum: Math.round(stopSum * 1000) / 1000 },
      },
      agent: {
        method: 'RSS: process_resident_memory_bytes from the agent\'s /metrics (podIP:9440) at the end of the idle window; peak during the burst ' +
          'from /proc/<pid>/status VmRSS of the agent\'s process sampled every 200 ms on the host (no extra scrapes). CPU: process_cpu_seconds_total ' +
          'deltas between scrapes at the start and end of each window (the end scrape is the only other work in the window); cross-checked with ' +
          'utime+stime from /proc/<pid>/stat.',
        pod: agent.metadata!.name!,
        podsOnNode: onNode,
        rssIdleMB: round(metricSum(a1, 'process_resident_memory_bytes') / MB),
        rssPeakBurstMB: round(Math.max(...rssSamples.map((s) => s.rssBytes)) / MB),
        heapUsedIdleMB: round(metricSum(a1, 'nodejs_heap_size_used_bytes') / MB),
        /** VmRSS at the end of the idle window split: anonymous memory vs file pages (the node binary's code). */
        rssIdleAnonMB: round(p1.rssAnonBytes / MB),
        rssIdleFileMB: round(p1.rssFileBytes / MB),
        exitEventDelay: histogramBounds(a1, a2, 'sidecar_terminator_agent_exit_event_delay_seconds'),
        exitToRequest: histogramBounds(a1, a2, 'sidecar_terminator_agent_exit_to_request_seconds'),
        idle: {
          windowSeconds: round(idleSeconds),
          cpuSeconds: round3(cpu(a1) - cpu(a0)),
          millicores: round3(((cpu(a1) - cpu(a0)) / idleSeconds) * 1000),
          procCpuSeconds: round3(p1.cpuSeconds - p0.cpuSeconds),
          apiRequests: flow(s1) - flow(s0),
        },
        burst: {
          windowSeconds: round(burstSeconds),
          cpuSeconds: round3(cpu(a2) - cpu(a1)),
          millicores: round3(((cpu(a2) - cpu(a1)) / burstSeconds) * 1000),
          procCpuSeconds: round3(p2.cpuSeconds - p1.cpuSeconds),
          apiRequests: burstRequests,
          apiRequestsPerJob: round(burstRequests / jobs),
        },
        apiMethod: `kube-apiserver's API Priority and Fairness: a FlowSchema (${AGENT_FLOW}) matching only the agent's ServiceAccount, on the ` +
          'priority level it gets anyway (workload-low); apiserver_flowcontrol_dispatched_requests_total{flow_schema} deltas over each window ' +
          '(read from kube-apiserver /metrics). Counts every request the agent sent, watches when they are opened.',
      },
    };
  } finally {
    await deleteNamespace(ctx, namespace);
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x: number) => Math.round(x * 10) / 10;
const round3 = (x: number) => Math.round(x * 1000) / 1000;
