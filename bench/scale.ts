// Part 4: the controller at scale. 20,000 Pods in the API, bound to Nodes that have no kubelet (Node
// objects the benchmark creates and keeps alive through their Leases, tainted NoSchedule so nothing
// else lands there, each with an agent Pod the benchmark reports running). The benchmark plays
// kubelet for them: it writes their status through the pods/status subresource, first Running
// (main and sidecar running), then, at a fixed rate, main
// terminated with exit code 0. The controller's leader must then create a ContainerRecreateRequest
// for each; a watch on the requests times their arrival. Nothing carries those requests out (no
// agent on those nodes): the controller would complete them after its 60 s agent pickup timeout
// and retry, so the finishing wave is kept shorter than that. Beside them are Pods without the sidecar
// mark, as a real cluster has (Job Pods without sidecars and long-running Pods): they must cost little
// and never get a request. After the wave comes the recovery: the wave's Pods finish (Succeeded, as
// kubelet would report once their sidecars stopped), the controller completes their requests, and
// its memory settles; a heap snapshot then shows what it is made of.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { GROUP, LABEL_POD_UID, PLURAL, VERSION } from '../api/container-recreate-request.ts';
import { DEFAULT_AGENT_POD_SELECTOR } from '../crr/config.ts';
import { NAMESPACE } from '../e2e/support/deploy.ts';
import { BUSYBOX } from '../e2e/support/jobs.ts';
import type { Context } from './context.ts';
import { SIDECAR_MARK, apiserverMetrics, containerPid, createNamespace, deleteNamespace, procStats, sampleRss, scrapeUrl, sleep } from './context.ts';
import { ApiError, Kube, pool, retrying } from './kube.ts';
import { CONTROLLER_FLOW } from './setup.ts';
import type { HistogramBounds, Sample, Summary } from './stats.ts';
import { MB, histogramBounds, metricSum, percentile, serviceRate, summarize } from './stats.ts';
import type { HeapSummary } from './heap.ts';
import { heapSnapshot } from './heap.ts';

export interface ScaleOptions {
  pods: number;
  /** Pods without the sidecar mark beside them. */
  unmarked: number;
  nodes: number;
  /** Target finishing rate (Pods per second) and how long the wave lasts. */
  rate: number;
  waveSeconds: number;
}

export interface ScaleResult {
  method: string;
  options: ScaleOptions;
  podsInApi: number;
  unmarkedPodsInApi: number;
  /** Requests for unmarked Pods (must be 0). */
  requestsForUnmarked: number;
  /** The kubelet-less Nodes still Ready at the end of the drain (their Pods were never evicted). */
  nodesReadyAtEnd: number;
  createSeconds: number;
  createRate: number;
  runningSeconds: number;
  finished: number;
  achievedRate: number;
  /**
   * Requests seen created per second (the controller's service rate, beside achievedRate, the
   * arrival rate): over the wave, and from the first request seen to the last (its pace while a
   * backlog lasts). Absent in older results.
   */
  serviceRate?: { duringWave: number; firstToLast: number };
  requestsSeen: number;
  missing: number;
  /** Last status write → last request seen. */
  drainSeconds: number;
  /** Status update sent → request's ADDED event received (benchmark clock). */
  latencyMs: Summary;
  /** The latency's quantiles p0, p0.1, ..., p100 (ms), for the chart. */
  latencyQuantilesMs: number[];
  /** Status update's response received → request's ADDED event received. */
  latencyFromResponseMs: Summary;
  /** The status writes themselves: request sent → response. */
  statusWriteMs: Summary;
  /** Controller's own histogram (watch event received → request created), from its /metrics. */
  /** Upper bounds of the histogram buckets holding p50 and p99 ("> 10000" when past the last bound). */
  controllerActionLatency: HistogramBounds;
  timeline: { second: number; finished: number; requests: number; p50Ms: number; p99Ms: number }[];
  /** The leader at the end of the drain, if another replica had taken over (its figures would then be a restart's). */
  leaderChangedTo?: string;
  keptUp: boolean;
  keptUpReason: string;
  /** How often the benchmark's own watch of the requests was resumed (the API server ended it). */
  benchWatchRestarts: number;
  controller: {
    pod: string;
    rssBaselineMB: number;
    heapUsedBaselineMB: number;
    rssAt20kMB: number;
    heapUsedAt20kMB: number;
    rssPeakMB: number;
    rssEndMB: number;
    heapUsedEndMB: number;
    apiRequestsDuringWave: number;
    apiRequestsPerFinishedPod: number;
    decisionsDuringWave: number;
    /** CPU seconds the leader used from the start of the wave to the end of the drain, and over how long. */
    cpuSecondsDuringWave: number;
    waveAndDrainSeconds: number;
    rssTimeline: { tSeconds: number; rssMB: number; phase: string }[];
    /** RSS split into anonymous memory and file pages, and V8's heap, at rest, at the peak and after the recovery. */
    composition: Record<'atRest' | 'peak' | 'recovered', { rssMB: number; rssAnonMB: number; rssFileMB: number; heapUsedMB: number }>;
    /** Wave Pods Succeeded → requests completed by the controller; the recovery's length. */
    recovery: { podsFinished: number; requestsCompleted: number; seconds: number; completedHow: Record<string, number> };
    /** What the leader's heap holds after the recovery, with every Pod still in the API. */
    heap?: HeapSummary | { error: string };
  };
  cleanupSeconds: number;
}

const NODE_PREFIX = 'bench-kubeletless';
/** How long after the last status write the requests may still come (the controller's agent pickup timeout is 60 s). */
const DRAIN_MS = 40_000;
const FAKE_LABEL = 'sidecar-terminator.bench/kubeletless';
/** How long the leader rests after the recovery before its memory is read. */
const RECOVERY_REST_MS = 30_000;

const microTime = () => new Date().toISOString().replace('Z', '000Z');
const hex = (n: number, seed: number) => (seed.toString(16).padStart(8, '0') + 'c0ffee'.repeat(11)).slice(0, n);

/** The controller process measured: the leader Pod's, or (for experiments) one run on the host. */
export interface ControllerTarget {
  name: string;
  metricsUrl: string;
  pid: number;
  /** The Lease holder identity starts with this while it leads. */
  identityPrefix: string;
}

export function leaderTarget(leader: V1Pod): ControllerTarget {
  return {
    name: leader.metadata!.name!,
    metricsUrl: `http://${leader.status!.podIP!}:9441/metrics`,
    pid: containerPid(leader.status!.containerStatuses![0]!.containerID!),
    identityPrefix: `${leader.metadata!.name}-`,
  };
}

export async function runScale(ctx: Context, target: ControllerTarget, o: ScaleOptions): Promise<ScaleResult> {
  const kube = await Kube.connect(320);
  const namespace = await createNamespace(ctx, 'bench-scale');
  const nodes = Array.from({ length: o.nodes }, (_, i) => `${NODE_PREFIX}-${String(i).padStart(2, '0')}`);
  const names = Array.from({ length: o.pods }, (_, i) => `job-pod-${String(i).padStart(5, '0')}`);
  const others = Array.from({ length: o.unmarked }, (_, i) => `other-pod-${String(i).padStart(5, '0')}`);
  const leaderPid = target.pid;
  const scrapeLeader = () => scrapeUrl(target.metricsUrl);
  const phaseMarks: { tMs: number; phase: string }[] = [];
  const mark = (phase: string) => { phaseMarks.push({ tMs: Date.now(), phase }); ctx.log(`scale: ${phase}`); };
  const rss = sampleRss(leaderPid, 500);
  let renew: NodeJS.Timeout | undefined;
  let result: ScaleResult | undefined;
  try {
    const m0 = await scrapeLeader();
    mark('baseline');

    // ---- Nodes without kubelet, kept Ready through their Leases (so no controller evicts their Pods).
    for (const name of nodes) {
      await kube.request('POST', '/api/v1/nodes', {
        metadata: { name, labels: { 'kubernetes.io/hostname': name, [FAKE_LABEL]: 'true' } },
        spec: { taints: [{ key: FAKE_LABEL, value: 'true', effect: 'NoSchedule' }] },
      });
      const now = new Date().toISOString();
      await kube.request('PATCH', `/api/v1/nodes/${name}/status`, {
        status: {
          capacity: { pods: '0' }, allocatable: { pods: '0' },
          conditions: [{ type: 'Ready', status: 'True', reason: 'BenchNoKubelet', message: 'a Node object with no kubelet, kept by the benchmark', lastHeartbeatTime: now, lastTransitionTime: now }],
        },
      }, 'application/merge-patch+json');
      await kube.request('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        metadata: { name }, spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime() },
      });
      await runningAgent(kube, name);
    }
    renew = setInterval(() => {
      for (const name of nodes) {
        kube.request('PATCH', `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`, { spec: { renewTime: microTime() } }, 'application/merge-patch+json')
          .catch((err: unknown) => ctx.log(`scale: lease renewal of ${name} failed: ${String(err)}`));
      }
    }, 10_000);

    // ---- 20,000 Pods.
    const uids = new Map<string, string>();
    let t = Date.now();
    await pool(names, 64, async (name, i) => {
      const pod = await retrying(() => kube.request<V1Pod>('POST', `/api/v1/namespaces/${namespace}/pods`, {
        metadata: { name, labels: { app: 'bench-scale' } },
        spec: {
          nodeName: nodes[i % nodes.length],
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 30,
          containers: [
            { name: 'main', image: BUSYBOX, command: ['sh', '-c', 'echo working; sleep 30'] },
            { name: 'proxy', image: BUSYBOX, command: ['sh', '-c', 'while true; do sleep 1; done'], env: [SIDECAR_MARK] },
          ],
        },
      }));
      uids.set(name, pod.metadata!.uid!);
      if ((i + 1) % 5000 === 0) ctx.log(`scale: ${i + 1} Pods created`);
    });
    const createSeconds = (Date.now() - t) / 1000;
    mark(`${o.pods} Pods created in ${createSeconds.toFixed(0)} s`);
    const otherUids = new Set<string>();
    await pool(others, 64, async (name, i) => {
      const pod = await retrying(() => kube.request<V1Pod>('POST', `/api/v1/namespaces/${namespace}/pods`, unmarkedPod(name, i, nodes[i % nodes.length]!)));
      otherUids.add(pod.metadata!.uid!);
    });
    mark(`${o.unmarked} unmarked Pods created`);

    // ---- All Running: main and sidecar running (what kubelet would report).
    const started = new Date(Date.now() - 5000).toISOString();
    const running = (i: number) => ({
      name: 'main', ready: true, started: true, restartCount: 0, image: BUSYBOX, imageID: '',
      containerID: `containerd://${hex(64, i * 2)}`, state: { running: { startedAt: started } },
    });
    const proxy = (i: number) => ({
      name: 'proxy', ready: true, started: true, restartCount: 0, image: BUSYBOX, imageID: '',
      containerID: `containerd://${hex(64, i * 2 + 1)}`, state: { running: { startedAt: started } },
    });
    const statusPath = (name: string) => `/api/v1/namespaces/${namespace}/pods/${name}/status`;
    t = Date.now();
    await pool(names, 64, async (name, i) => {
      await retrying(() => kube.request('PATCH', statusPath(name), {
        status: { phase: 'Running', startTime: started, containerStatuses: [running(i), proxy(i)] },
      }, 'application/merge-patch+json'));
    });
    await pool(others, 64, async (name, i) => {
      await retrying(() => kube.request('PATCH', statusPath(name), {
        status: { phase: 'Running', startTime: started, containerStatuses: unmarkedPod(name, i, '').spec!.containers.map((c, k) => ({ ...running(i), name: c.name, containerID: `containerd://${hex(64, 1_000_000 + i * 2 + k)}` })) },
      }, 'application/merge-patch+json'));
    });
    const runningSeconds = (Date.now() - t) / 1000;
    mark(`${o.pods} Pods Running in ${runningSeconds.toFixed(0)} s`);

    // The controller has taken them all in when its decisions stop moving.
    let last = -1;
    for (let i = 0; i < 90; i++) {
      const d = metricSum(await scrapeLeader(), 'sidecar_terminator_controller_decisions_total');
      if (d === last) break;
      last = d;
      await sleep(3000);
    }
    const m1 = await scrapeLeader();
    const atRest = procStats(leaderPid);
    mark('settled with all Pods Running');

    // ---- The wave: mains finish at `rate` per second; every finish should bring a request.
    const seen = new Map<string, number>(); // pod uid → ADDED received
    const completed = new Set<string>(); // pod uids whose request the controller completed
    const completedHow = new Map<string, number>(); // the completed requests' messages
    let requestsForUnmarked = 0;
    const watch = await kube.watch<ContainerRecreateRequest>(`/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}?watch=1`, (e, at) => {
      const uid = e.object.metadata?.labels?.[LABEL_POD_UID];
      if (!uid) return;
      if (e.type === 'ADDED' && otherUids.has(uid)) requestsForUnmarked++;
      if (e.type === 'ADDED' && !seen.has(uid)) seen.set(uid, at);
      if (e.object.status?.phase === 'Completed' && !completed.has(uid)) {
        completed.add(uid);
        const how = (e.object.status.message ?? '').replace(/\b(Pod|node) \S+/g, '$1 <name>').slice(0, 120);
        completedHow.set(how, (completedHow.get(how) ?? 0) + 1);
      }
    });
    const count = Math.min(o.pods, Math.round(o.rate * o.waveSeconds));
    const wave = names.slice(0, count);
    const sent = new Map<string, number>();
    const answered = new Map<string, number>();
    const s0 = await apiserverMetrics(ctx);
    const m2 = await scrapeLeader();
    const m2At = Date.now();
    mark(`wave: ${count} mains finishing at ${o.rate}/s`);
    const waveStart = Date.now();
    await pool(wave, 300, async (name, i) => {
      const finishedAt = new Date().toISOString();
      const uid = uids.get(name)!;
      sent.set(uid, Date.now());
      await retrying(() => kube.request('PATCH', statusPath(name), {
        status: {
          phase: 'Running',
          containerStatuses: [
            { ...running(i), ready: false, started: false, state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: started, finishedAt } } },
            proxy(i),
          ],
        },
      }, 'application/merge-patch+json'));
      answered.set(uid, Date.now());
    }, o.rate);
    const waveEnd = Date.now();
    const achievedRate = count / ((waveEnd - waveStart) / 1000);
    mark(`wave sent in ${((waveEnd - waveStart) / 1000).toFixed(1)} s (${achievedRate.toFixed(0)}/s); draining`);
    const drainDeadline = Date.now() + DRAIN_MS;
    while (seen.size < count && Date.now() < drainDeadline) await sleep(250);
    const s1 = await apiserverMetrics(ctx);
    const m3 = await scrapeLeader();
    const m3At = Date.now();
    const seenAtDrain = new Map(seen);
    const drainedSeen = seenAtDrain.size;
    mark(`drained: ${drainedSeen}/${count} requests seen`);
    const nodeList = await kube.get<{ items: { metadata: { name: string }; status?: { conditions?: { type: string; status: string }[] } }[] }>(`/api/v1/nodes?labelSelector=${FAKE_LABEL}%3Dtrue`);
    const holder = (await kube.get<{ spec?: { holderIdentity?: string } }>(`/apis/coordination.k8s.io/v1/namespaces/sidecar-terminator/leases/sidecar-terminator-controller`)).spec?.holderIdentity ?? '';
    const leaderChangedTo = holder.startsWith(target.identityPrefix) ? undefined : holder;
    const nodesReady = nodeList.items.filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;

    // ---- Recovery: the wave's Pods finish (sidecar stopped, phase Succeeded) and the controller completes their requests.
    const recoveryStart = Date.now();
    await pool(wave, 64, async (name, i) => {
      const finishedAt = new Date().toISOString();
      const done = (c: { name: string; containerID: string }) => ({ ...c, ready: false, started: false, restartCount: 0, image: BUSYBOX, imageID: '', state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: started, finishedAt } } });
      await retrying(() => kube.request('PATCH', statusPath(name), {
        status: { phase: 'Succeeded', containerStatuses: [done(running(i)), done(proxy(i))] },
      }, 'application/merge-patch+json'));
    });
    const waveUids = new Set(wave.map((n) => uids.get(n)!));
    const completedOfWave = () => [...completed].filter((u) => waveUids.has(u)).length;
    mark(`recovery: ${count} wave Pods Succeeded`);
    // No agent runs on these Nodes: the controller completes the requests when their 60 s pickup timeout passes.
    for (let i = 0; i < 960 && completedOfWave() < drainedSeen; i++) await sleep(250);
    const recovery = { podsFinished: count, requestsCompleted: completedOfWave(), seconds: Math.round((Date.now() - recoveryStart) / 1000), completedHow: Object.fromEntries(completedHow) };
    mark(`recovered: ${recovery.requestsCompleted} requests completed in ${recovery.seconds} s; at rest`);
    await sleep(RECOVERY_REST_MS);
    watch.stop();
    const benchWatchRestarts = watch.restarts();
    const m4 = await scrapeLeader();
    const recovered = procStats(leaderPid);
    // Before the snapshot, which raises RSS for good (bench/README.md).
    const rssSamples = rss.stop();
    const heap = await heapSnapshot(leaderPid, join(tmpdir(), `sidecar-terminator-scale-leader-${Date.now()}.heapsnapshot`))
      .catch((err: unknown) => ({ error: `heap snapshot failed: ${String(err)}` }));

    // ---- Figures.
    const lat: number[] = [];
    const latResp: number[] = [];
    const writes: number[] = [];
    const buckets = new Map<number, { finished: number; requests: number; lat: number[] }>();
    const bucket = (ms: number) => {
      const k = Math.floor((ms - waveStart) / 5000) * 5;
      let b = buckets.get(k);
      if (!b) buckets.set(k, (b = { finished: 0, requests: 0, lat: [] }));
      return b;
    };
    for (const [uid, s] of sent) {
      bucket(s).finished++;
      const a = answered.get(uid);
      if (a !== undefined) writes.push(a - s);
      const r = seenAtDrain.get(uid);
      if (r === undefined) continue;
      lat.push(r - s);
      if (a !== undefined) latResp.push(r - a);
      bucket(s).lat.push(r - s);
      bucket(r).requests++;
    }
    const timeline = [...buckets.entries()].sort((a, b) => a[0] - b[0]).map(([second, b]) => ({
      second, finished: b.finished, requests: b.requests,
      p50Ms: Math.round(percentile(b.lat, 50)), p99Ms: Math.round(percentile(b.lat, 99)),
    }));
    const latency = summarize(lat);
    const missing = count - drainedSeen;
    const early = timeline.filter((b) => b.second < 10 && b.finished > 0);
    const late = timeline.filter((b) => b.second >= o.waveSeconds - 10 && b.finished > 0);
    const p99Early = Math.max(...early.map((b) => b.p99Ms));
    const p99Late = Math.max(...late.map((b) => b.p99Ms));
    // No request at all yet for the last Pods of the wave is a backlog too.
    const growing = !Number.isFinite(p99Late) || p99Late > Math.max(3 * p99Early, p99Early + 500);
    const keptUp = missing === 0 && achievedRate >= 200 && !growing;
    if (leaderChangedTo) ctx.log(`scale: WARNING: the leader changed during the measurement (now ${leaderChangedTo})`);
    const keptUpReason = `${missing} of ${count} requests missing ${DRAIN_MS / 1000} s after the wave; finishing rate ${achievedRate.toFixed(0)}/s; ` +
      `p99 per 5 s bucket ${p99Early} ms for the Pods finished in the first 10 s vs ` +
      `${Number.isFinite(p99Late) ? `${p99Late} ms` : 'no request yet'} for those of the last 10 s of the wave${growing ? ' (a growing backlog)' : ''}`;

    const hist = histogramBounds(m2, m3, 'sidecar_terminator_controller_action_latency_seconds', { action: 'createRequest' });
    const requests = metricSum(s1, 'apiserver_flowcontrol_dispatched_requests_total', { flow_schema: CONTROLLER_FLOW }) -
      metricSum(s0, 'apiserver_flowcontrol_dispatched_requests_total', { flow_schema: CONTROLLER_FLOW });
    const peak = rssSamples.reduce((a, b) => (b.rssBytes > a.rssBytes ? b : a), rssSamples[0] ?? { ...recovered, tMs: 0 });
    const phaseAt = (tMs: number) => [...phaseMarks].reverse().find((p) => p.tMs <= tMs)?.phase ?? 'baseline';
    const tStart = rssSamples[0]?.tMs ?? Date.now();

    result = {
      method: `${o.nodes} Node objects with no kubelet (Ready, Leases renewed by the benchmark, tainted NoSchedule, each with an agent Pod reported Running ` +
        `so that the controller does not count them agentless); ${o.pods} Pods bound to them ` +
        '(restartPolicy Never, a main and a sidecar marked ' + `${SIDECAR_MARK.name}=true), created through the API, and beside them ${o.unmarked} Pods ` +
        'without the mark (half Job Pods with one container, half long-running Pods with an unmarked proxy); their status written through ' +
        'pods/status: first Running (all containers running), then, at a fixed rate, the main terminated with exit code 0; after the drain the ' +
        'wave\'s Pods Succeeded (the recovery: the controller completes their requests), then 30 s at rest and a heap snapshot. Latency: the status ' +
        'write sent (benchmark clock) → the ContainerRecreateRequest\'s ADDED event received on a watch of the namespace. Controller RSS: ' +
        'VmRSS of the leader\'s process from /proc every 500 ms, and process_resident_memory_bytes from its /metrics at the marks. Flags: defaults ' +
        '(resync 60 s, 32 workers; V8 --max-semi-space-size=4 as the Deployment runs it). Its API requests: apiserver_flowcontrol_dispatched_requests_total of a FlowSchema matching only its ServiceAccount.',
      options: o,
      podsInApi: uids.size,
      unmarkedPodsInApi: otherUids.size,
      requestsForUnmarked,
      nodesReadyAtEnd: nodesReady,
      createSeconds: Math.round(createSeconds),
      createRate: Math.round(uids.size / createSeconds),
      runningSeconds: Math.round(runningSeconds),
      finished: count,
      achievedRate: Math.round(achievedRate),
      serviceRate: serviceRate([...seenAtDrain.values()], waveStart, waveEnd),
      requestsSeen: drainedSeen,
      missing,
      drainSeconds: drainedSeen ? Math.round((Math.max(...seenAtDrain.values()) - waveEnd) / 100) / 10 : NaN,
      latencyMs: latency,
      latencyQuantilesMs: Array.from({ length: 1001 }, (_, i) => Math.round(percentile(lat, i / 10))),
      latencyFromResponseMs: summarize(latResp),
      statusWriteMs: summarize(writes),
      controllerActionLatency: hist,
      timeline,
      leaderChangedTo,
      keptUp,
      keptUpReason,
      benchWatchRestarts,
      controller: {
        pod: target.name,
        rssBaselineMB: mb(metricSum(m0, 'process_resident_memory_bytes')),
        heapUsedBaselineMB: mb(metricSum(m0, 'nodejs_heap_size_used_bytes')),
        rssAt20kMB: mb(metricSum(m1, 'process_resident_memory_bytes')),
        heapUsedAt20kMB: mb(metricSum(m1, 'nodejs_heap_size_used_bytes')),
        rssPeakMB: mb(Math.max(...rssSamples.map((s) => s.rssBytes))),
        rssEndMB: mb(metricSum(m3, 'process_resident_memory_bytes')),
        heapUsedEndMB: mb(metricSum(m3, 'nodejs_heap_size_used_bytes')),
        apiRequestsDuringWave: requests,
        apiRequestsPerFinishedPod: Math.round((requests / count) * 100) / 100,
        cpuSecondsDuringWave: Math.round((metricSum(m3, 'process_cpu_seconds_total') - metricSum(m2, 'process_cpu_seconds_total')) * 10) / 10,
        waveAndDrainSeconds: Math.round((m3At - m2At) / 1000),
        decisionsDuringWave: metricSum(m3, 'sidecar_terminator_controller_decisions_total') - metricSum(m2, 'sidecar_terminator_controller_decisions_total'),
        rssTimeline: rssSamples.filter((_, i) => i % 4 === 0).map((s) => ({ tSeconds: Math.round((s.tMs - tStart) / 1000), rssMB: mb(s.rssBytes), phase: phaseAt(s.tMs) })),
        composition: {
          atRest: composition(atRest, m1),
          peak: composition(peak, m3),
          recovered: composition(recovered, m4),
        },
        recovery,
        heap,
      },
      cleanupSeconds: 0,
    };
  } finally {
    clearInterval(renew);
    rss.stop();
    ctx.log('scale: cleaning up (Pods force-deleted per Node, then the Nodes, Leases and namespace)');
    const t0 = Date.now();
    await cleanup(ctx, kube, namespace, nodes, [...names, ...others]).catch((err: unknown) => ctx.log(`scale: cleanup problem: ${String(err)}`));
    const cleanupSeconds = Math.round((Date.now() - t0) / 1000);
    ctx.log(`scale: cleaned up in ${cleanupSeconds} s`);
    kube.close();
    if (result) result.cleanupSeconds = cleanupSeconds;
  }
  return result;
}

/**
 * An agent Pod reported running on a kubelet-less Node: without one, the controller counts the Node
 * as agentless after 120 s (--agentless-after-seconds) and creates no request for its Pods. Owned by
 * the Node (so no DaemonSet adopts it, and it goes with the Node).
 */
async function runningAgent(kube: Kube, nodeName: string): Promise<void> {
  const node = await kube.get<{ metadata: { uid: string } }>(`/api/v1/nodes/${nodeName}`);
  const pod = await kube.request<V1Pod>('POST', `/api/v1/namespaces/${NAMESPACE}/pods`, {
    metadata: {
      name: `bench-agent-${nodeName}`,
      labels: { ...labelsOf(DEFAULT_AGENT_POD_SELECTOR), [FAKE_LABEL]: 'true' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata.uid, controller: true }],
    },
    spec: { nodeName, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'agent', image: BUSYBOX }] },
  });
  await kube.request('PATCH', `/api/v1/namespaces/${NAMESPACE}/pods/${pod.metadata!.name}/status`, {
    status: { phase: 'Running', containerStatuses: [{ name: 'agent', ready: true, started: true, restartCount: 0, image: BUSYBOX, imageID: '', containerID: `containerd://${hex(64, 9_000_000)}`, state: { running: { startedAt: new Date().toISOString() } } }] },
  }, 'application/merge-patch+json');
}

/** `a=b,c=d` as labels. */
const labelsOf = (selector: string) => Object.fromEntries(selector.split(',').map((kv) => kv.split('=') as [string, string]));

/**
 * Pods on kubelet-less Nodes never confirm a graceful deletion: each is deleted with grace period 0
 * (one request per Pod, many at once: a delete collection is carried out one Pod at a time), then the
 * Nodes, their Leases and the namespace.
 */
async function cleanup(ctx: Context, kube: Kube, namespace: string, nodes: string[], names: string[]): Promise<void> {
  let left = names;
  for (let round = 0; round < 5 && left.length > 0; round++) {
    await pool(left, 128, async (name) => {
      await kube.request('DELETE', `/api/v1/namespaces/${namespace}/pods/${name}?gracePeriodSeconds=0`).catch(() => {});
    });
    const items = (await kube.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${namespace}/pods`)).items;
    left = items.map((p) => p.metadata!.name!);
  }
  await pool(nodes, 8, async (node) => {
    await kube.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/pods/bench-agent-${node}?gracePeriodSeconds=0`).catch(() => {});
    for (const path of [`/api/v1/nodes/${node}`, `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${node}`]) {
      await kube.request('DELETE', path).catch((err: unknown) => { if (!(err instanceof ApiError && err.status === 404)) throw err; });
    }
  });
  await deleteNamespace(ctx, namespace, 300_000);
}

const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;

/** RSS from /proc beside V8's heap from the same moment's /metrics (for the peak: the drain's end, where it peaks). */
function composition(p: { rssBytes: number; rssAnonBytes: number; rssFileBytes: number }, metrics: Sample[]) {
  return { rssMB: mb(p.rssBytes), rssAnonMB: mb(p.rssAnonBytes), rssFileMB: mb(p.rssFileBytes), heapUsedMB: mb(metricSum(metrics, 'nodejs_heap_size_used_bytes')) };
}

/**
 * A Pod without the sidecar mark: every other one a Job's Pod without sidecars, the rest a
 * long-running Pod with an injected proxy that is not marked (a Deployment's, say).
 */
function unmarkedPod(name: string, i: number, nodeName: string): V1Pod {
  const jobLike = i % 2 === 0;
  return {
    metadata: { name, labels: jobLike ? { 'batch.kubernetes.io/job-name': `other-${i}`, 'job-name': `other-${i}` } : { app: 'bench-other' } },
    spec: {
      nodeName,
      restartPolicy: jobLike ? 'Never' : 'Always',
      terminationGracePeriodSeconds: 30,
      containers: jobLike
        ? [{ name: 'main', image: BUSYBOX, command: ['sh', '-c', 'sleep 30'] }]
        : [{ name: 'web', image: BUSYBOX, command: ['sh', '-c', 'while true; do sleep 1; done'] }, { name: 'proxy', image: BUSYBOX, command: ['sh', '-c', 'while true; do sleep 1; done'] }],
    },
  };
}
