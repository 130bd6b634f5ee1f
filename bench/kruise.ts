// The kruise part: the agent's memory beside OpenKruise's kruise-daemon, the per-node daemon of the
// project it replaces for Job sidecars, on the same node of the same cluster with 100 Job Pods of
// ours on it. kruise-daemon is built from OpenKruise's Go module (bench/build-kruise-daemon.sh)
// and runs as OpenKruise's chart runs it: hostNetwork, the chart's flags, the node's CRI socket
// mounted at /hostvarrun, its ServiceAccount allowed what its informers and status writes need.
// No Kruise manager runs, so no ContainerRecreateRequest, NodeImage or NodePodProbe of Kruise
// exists: the daemon holds its informers (Pods of the node, its three custom resources) and idles,
// as the agent does with no Job finishing.
//
// Both are sampled at the same instants: RSS from /proc (procStats) and the container's working
// set, what kubelet evicts on: its memory cgroup's usage minus total_inactive_file (cgroup v1),
// read from /sys/fs/cgroup/memory at the path /proc/<pid>/cgroup gives.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { clusterEnv, containerdSocketOf } from '../e2e/support/cluster.ts';
import { NAMESPACE, ctr } from '../e2e/support/deploy.ts';
import { kubectl } from '../e2e/support/kubectl.ts';
import type { BarPanel } from './chart.ts';
import type { Context } from './context.ts';
import { SIDECAR_MARK, busybox, containerPid, createJob, createNamespace, deleteNamespace, jobBody, listPods, procStats, sleep, statusOf, waitUntil } from './context.ts';
import { ApiError, pool } from './kube.ts';
import type { PreviousStamps } from './stamps.ts';
import type { Sample } from './stats.ts';
import { MB, parseMetrics, percentile } from './stats.ts';

const HERE = new URL('.', import.meta.url).pathname;
const KRUISE_NAMESPACE = 'kruise-system';
const KRUISE_NAME = 'kruise-daemon';
const KRUISE_ROLE = 'bench-kruise-daemon';
const KRUISE_PORT = 10221;
const LABELS = { 'sidecar-terminator.bench/part': 'kruise' };
/** A main and a sidecar that wake once an hour: nothing on the node but the two daemons moves. */
const QUIET = "trap 'exit 0' TERM; while true; do sleep 3600 & wait $!; done";

// ---------------------------------------------------------------- pure parts

/** memory.stat (cgroup v1) as numbers by key. */
export function parseMemoryStat(text: string): Map<string, number> {
  const stat = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value !== undefined && /^\d+$/.test(value)) stat.set(key, Number(value));
  }
  return stat;
}

/**
 * The working set as kubelet (cAdvisor) computes it on cgroup v1: usage minus the hierarchy's
 * inactive file pages (total_inactive_file), never below 0.
 */
export function workingSetBytes(usageBytes: number, memoryStat: string): number {
  const inactive = parseMemoryStat(memoryStat).get('total_inactive_file');
  if (inactive === undefined) throw new Error('memory.stat has no total_inactive_file (not a cgroup v1 memory controller?)');
  return Math.max(0, usageBytes - inactive);
}

/** The memory cgroup's path in /proc/<pid>/cgroup (cgroup v1: the line whose controllers include memory). */
export function memoryCgroupPath(procCgroup: string): string {
  for (const line of procCgroup.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (controllers?.split(',').includes('memory') && path !== undefined) return path;
  }
  throw new Error('no memory controller in /proc/<pid>/cgroup (cgroup v2 is not read here)');
}

export interface MemorySample {
  tMs: number;
  rssBytes: number;
  rssAnonBytes: number;
  rssFileBytes: number;
  /** memory.usage_in_bytes of the container's cgroup. */
  usageBytes: number;
  workingSetBytes: number;
  cpuSeconds: number;
}

export interface MedianMax { median: number; max: number }

/** One process over a window, in MiB (0.1); CPU in millicores over the window. */
export interface MemorySummary {
  samples: number;
  rssMiB: MedianMax;
  workingSetMiB: MedianMax;
  /** Medians: RSS split into anonymous memory and file pages, and the cgroup's usage. */
  rssAnonMiB: number;
  rssFileMiB: number;
  cgroupUsageMiB: number;
  cpuMillicores: number;
}

const round = (x: number) => Math.round(x * 10) / 10;
const mib = (bytes: number) => round(bytes / MB);

export function summarizeMemory(samples: readonly MemorySample[]): MemorySummary {
  if (samples.length === 0) throw new Error('no samples');
  const medianMax = (pick: (s: MemorySample) => number): MedianMax => {
    const values = samples.map(pick);
    return { median: mib(percentile(values, 50)), max: mib(Math.max(...values)) };
  };
  const first = samples[0]!;
  const last = samples.at(-1)!;
  const seconds = (last.tMs - first.tMs) / 1000;
  return {
    samples: samples.length,
    rssMiB: medianMax((s) => s.rssBytes),
    workingSetMiB: medianMax((s) => s.workingSetBytes),
    rssAnonMiB: medianMax((s) => s.rssAnonBytes).median,
    rssFileMiB: medianMax((s) => s.rssFileBytes).median,
    cgroupUsageMiB: medianMax((s) => s.usageBytes).median,
    cpuMillicores: seconds > 0 ? Math.round(((last.cpuSeconds - first.cpuSeconds) / seconds) * 1000 * 100) / 100 : 0,
  };
}

/** Kubelet's container_memory_working_set_bytes of one container, in MiB, from its resource metrics; null when absent. */
export function kubeletWorkingSetMiB(metrics: readonly Sample[], namespace: string, pod: string, container: string): number | null {
  const s = metrics.find((m) => m.name === 'container_memory_working_set_bytes' && m.labels.namespace === namespace && m.labels.pod === pod && m.labels.container === container);
  return s ? mib(s.value) : null;
}

/** The two target rows of this part (bench/run.ts puts them among the others). */
export function kruiseTargets(k: KruiseResult | undefined): { what: string; target: string; value: string; met: boolean | null }[] {
  if (!k) {
    return [
      { what: 'agent working set vs kruise-daemon\'s, same node, 100 Pods, idle (median)', target: '≤ kruise-daemon\'s', value: 'not measured', met: null },
      { what: 'agent RSS beside kruise-daemon, 100 Pods, idle (median)', target: '≤ 66 MiB', value: 'not measured', met: null },
    ];
  }
  const a = k.agent;
  const d = k.kruiseDaemon;
  const where = `${k.podsOnNode} Pods on the node, ${k.windowSeconds} s idle, every ${k.everySeconds} s`;
  return [
    {
      what: `agent working set vs kruise-daemon ${k.kruise.version}'s, same node, ${where} (median; max)`,
      target: '≤ kruise-daemon\'s',
      value: `${a.workingSetMiB.median} vs ${d.workingSetMiB.median} MiB (max ${a.workingSetMiB.max} vs ${d.workingSetMiB.max})`,
      met: a.workingSetMiB.median <= d.workingSetMiB.median,
    },
    {
      what: `agent RSS beside kruise-daemon, ${where} (median; max; kruise-daemon's median ${d.rssMiB.median} MiB)`,
      target: '≤ 66 MiB',
      value: `${a.rssMiB.median} MiB (max ${a.rssMiB.max})`,
      met: a.rssMiB.median <= 66,
    },
  ];
}

/**
 * The chart's panel of this part (bench/run.ts puts it among the others): each container's working
 * set, median and max, over the window and over the 10 s before the Pods, the target at
 * kruise-daemon's median, labelled with the part's stamp. Results without the part draw "not measured".
 */
export function kruisePanel(r: { kruiseDaemon?: KruiseResult } & PreviousStamps, colors: { agent: string; kruiseDaemon: string }): BarPanel {
  const k = r.kruiseDaemon;
  const stamp = r.measured?.kruise;
  const bars = (agent: MemorySummary, kruiseDaemon: MemorySummary) => [
    { color: colors.agent, p50: agent.workingSetMiB.median, p99: agent.workingSetMiB.max },
    { color: colors.kruiseDaemon, p50: kruiseDaemon.workingSetMiB.median, p99: kruiseDaemon.workingSetMiB.max },
  ];
  return {
    title: `kruise: working set, the agent beside kruise-daemon${k ? ` ${k.kruise.version}` : ''}`,
    xLabel: `MiB (cgroup v1), measured at ${stamp ? `${stamp.commit} (${stamp.kubernetes}, ${stamp.runtime})` : 'an unknown commit'}`,
    legend: [{ label: 'agent', color: colors.agent }, { label: `kruise-daemon${k ? ` ${k.kruise.version}` : ''}`, color: colors.kruiseDaemon }],
    measures: { solid: 'median', light: 'max' },
    rows: k
      ? [
        { label: `${k.podsOnNode} Pods, ${k.windowSeconds} s idle`, bars: bars(k.agent, k.kruiseDaemon), targets: [{ at: k.kruiseDaemon.workingSetMiB.median, label: 'agent ≤ kruise-daemon (medians)' }] },
        { label: `${k.beforePods.podsOnNode} Pods, before the ${k.benchPods}`, bars: bars(k.beforePods.agent, k.beforePods.kruiseDaemon) },
      ]
      : [],
    empty: 'not measured: no kruise part in results.json',
  };
}

// ---------------------------------------------------------------- the part

export interface ProcessMemory extends MemorySummary {
  pod: string;
  container: string;
  /** The container's memory cgroup (cgroup v1 path). */
  cgroup: string;
  /** Kubelet's own container_memory_working_set_bytes (its resource metrics) at the window's end: a cross-check. */
  kubeletWorkingSetMiB: number | null;
  /** The window's samples, MiB, in time order. */
  rssSamplesMiB: number[];
  workingSetSamplesMiB: number[];
}

export interface KruiseResult {
  method: string;
  kruise: {
    version: string;
    module: string;
    image: string;
    args: string[];
    pod: string;
    restarts: number;
    /** Its log lines that show it started its controllers, and its /healthz answer. */
    serving: string[];
    /** What it did during the window. */
    duringWindow: { logLines: number; logExcerpt: string[]; containerRecreateRequests: number; nodeImages: number; nodePodProbes: number };
  };
  benchPods: number;
  podsStartSeconds: number;
  /** Running Pods on the node at the window's start (ours, the benchmark's, both daemons, the controller). */
  podsOnNode: number;
  windowSeconds: number;
  everySeconds: number;
  /** Before the 100 Pods: the same sampling for 10 s (what each holds with only the cluster's own Pods). */
  beforePods: { podsOnNode: number; agent: MemorySummary; kruiseDaemon: MemorySummary };
  agent: ProcessMemory;
  kruiseDaemon: ProcessMemory;
  /** agent / kruise-daemon, medians. */
  ratio: { workingSet: number; rss: number };
}

interface Built { dir: string; version: string; image: string }

function buildKruiseDaemon(ctx: Context): Built {
  ctx.log('kruise: building or reusing kruise-daemon (bench/build-kruise-daemon.sh)');
  const out = execFileSync('bash', [join(HERE, 'build-kruise-daemon.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').at(-1)!;
  const read = (file: string) => readFileSync(join(dir, file), 'utf8').trim();
  return { dir, version: read('version'), image: read('image') };
}

/** The chart's flags, with the CRI socket named (the node's containerd socket is the one file the mount needs). */
export function kruiseDaemonArgs(socketFile: string): string[] {
  return ['--logtostderr=true', '--v=4', `--addr=:${KRUISE_PORT}`, '--feature-gates=', `--socket-file=${socketFile}`, '--enable-pprof=false'];
}

function manifests(built: Built, socketDir: string, socketFile: string) {
  const rules = [
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['pods/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'update', 'patch'] },
    { apiGroups: ['apps.kruise.io'], resources: ['containerrecreaterequests', 'nodepodprobes'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['apps.kruise.io'], resources: ['nodeimages'], verbs: ['get', 'list', 'watch', 'patch', 'update'] },
    { apiGroups: ['apps.kruise.io'], resources: ['containerrecreaterequests/status', 'nodeimages/status', 'nodepodprobes/status'], verbs: ['get', 'patch', 'update'] },
  ];
  const selector = { 'control-plane': 'daemon' };
  return {
    serviceAccount: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: KRUISE_NAME, namespace: KRUISE_NAMESPACE, labels: LABELS } },
    clusterRole: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: KRUISE_ROLE, labels: LABELS }, rules },
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: KRUISE_ROLE, labels: LABELS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: KRUISE_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: KRUISE_NAME, namespace: KRUISE_NAMESPACE }],
    },
    daemonSet: {
      apiVersion: 'apps/v1', kind: 'DaemonSet',
      metadata: { name: KRUISE_NAME, namespace: KRUISE_NAMESPACE, labels: { ...LABELS, ...selector } },
      spec: {
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: { ...LABELS, ...selector } },
          spec: {
            hostNetwork: true,
            serviceAccountName: KRUISE_NAME,
            terminationGracePeriodSeconds: 10,
            tolerations: [{ operator: 'Exists' }],
            containers: [{
              name: 'daemon',
              image: built.image,
              imagePullPolicy: 'Never',
              command: ['/kruise-daemon'],
              args: kruiseDaemonArgs(socketFile),
              env: [{ name: 'NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } }],
              securityContext: { capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] }, allowPrivilegeEscalation: false },
              livenessProbe: { httpGet: { path: '/healthz', port: KRUISE_PORT, scheme: 'HTTP' }, initialDelaySeconds: 60, periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 3 },
              resources: { limits: { cpu: '50m', memory: '128Mi' }, requests: { cpu: '0', memory: '0' } },
              volumeMounts: [{ name: 'runtime-socket', mountPath: '/hostvarrun', readOnly: true }],
            }],
            // The chart mounts the host's /var/run; this cluster's containerd socket lives in its state directory.
            volumes: [{ name: 'runtime-socket', hostPath: { path: socketDir, type: 'Directory' } }],
          },
        },
      },
    },
  };
}

async function ignoreMissing(what: () => Promise<unknown>): Promise<void> {
  try {
    await what();
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
  }
}

async function createOrKeep(ctx: Context, path: string, body: unknown): Promise<void> {
  try {
    await ctx.kube.request('POST', path, body);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 409)) throw err;
  }
}

/** The kruise-daemon Pod once it runs, has not restarted, answers /healthz and has logged its controllers started. */
async function waitServing(ctx: Context): Promise<{ pod: V1Pod; serving: string[] }> {
  const started = ['Started crr daemon controller successfully', 'Started puller controller successfully'];
  let pod: V1Pod | undefined;
  let serving: string[] = [];
  let last = '';
  await waitUntil(async () => {
    const pods = (await ctx.kube.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${KRUISE_NAMESPACE}/pods?labelSelector=control-plane%3Ddaemon`)).items;
    pod = pods.find((p) => p.spec?.nodeName === ctx.nodeName);
    const status = pod && statusOf(pod, 'daemon');
    if (!pod || !status?.state?.running) {
      last = `not running: ${JSON.stringify(status?.state ?? pod?.status?.phase ?? 'no Pod')}`;
      return false;
    }
    if ((status.restartCount ?? 0) > 0) throw new Error(`kruise-daemon restarted ${status.restartCount} times: ${await daemonLog(ctx, pod, true)}`);
    const log = await daemonLog(ctx, pod);
    const lines = log.split('\n').filter((l) => started.some((s) => l.includes(s)));
    if (lines.length < started.length) {
      last = `logs do not show its controllers started yet (last lines: ${log.trim().split('\n').slice(-3).join(' | ')})`;
      return false;
    }
    const healthz = await fetch(`http://${clusterEnv().nodeIP}:${KRUISE_PORT}/healthz`, { signal: AbortSignal.timeout(5000) }).then(async (r) => `${r.status} ${(await r.text()).trim()}`, (err: unknown) => String(err));
    if (!healthz.startsWith('200')) {
      last = `/healthz: ${healthz}`;
      return false;
    }
    serving = [...lines, `GET :${KRUISE_PORT}/healthz: ${healthz}`];
    return true;
  }, 240_000, 'kruise-daemon serving', 2000).catch((err: unknown) => {
    throw new Error(`${err instanceof Error ? err.message : String(err)}; last: ${last}`);
  });
  return { pod: pod!, serving };
}

function daemonLog(ctx: Context, pod: V1Pod, previous = false, sinceTime?: string): Promise<string> {
  const query = `container=daemon${previous ? '&previous=true' : ''}${sinceTime ? `&timestamps=true&sinceTime=${encodeURIComponent(sinceTime)}` : ''}`;
  return ctx.kube.getText(`/api/v1/namespaces/${KRUISE_NAMESPACE}/pods/${pod.metadata!.name!}/log?${query}`).catch((err: unknown) => `(log unreadable: ${String(err)})`);
}

/** RSS, CPU and the container's working set of a process, now. */
export function sampleProcess(pid: number, cgroupDir: string): MemorySample {
  const tMs = Date.now();
  const proc = procStats(pid);
  const usageBytes = Number(readFileSync(join(cgroupDir, 'memory.usage_in_bytes'), 'utf8').trim());
  return { tMs, ...proc, usageBytes, workingSetBytes: workingSetBytes(usageBytes, readFileSync(join(cgroupDir, 'memory.stat'), 'utf8')) };
}

interface Target { pod: V1Pod; container: string; pid: number; cgroup: string; cgroupDir: string }

function target(pod: V1Pod, container: string): Target {
  const id = statusOf(pod, container)?.containerID;
  if (!id) throw new Error(`${pod.metadata!.name}: no container ${container} running`);
  const pid = containerPid(id, pod.spec!.nodeName!);
  const cgroup = memoryCgroupPath(readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
  return { pod, container, pid, cgroup, cgroupDir: join('/sys/fs/cgroup/memory', cgroup) };
}

/** Both processes sampled at the same instants, every `everyMs` for `windowMs`. */
async function sampleBoth(targets: readonly Target[], windowMs: number, everyMs: number): Promise<MemorySample[][]> {
  const out: MemorySample[][] = targets.map(() => []);
  const t0 = Date.now();
  for (let i = 0; i * everyMs <= windowMs; i++) {
    const due = t0 + i * everyMs;
    if (Date.now() < due) await sleep(due - Date.now());
    targets.forEach((t, k) => out[k]!.push(sampleProcess(t.pid, t.cgroupDir)));
  }
  return out;
}

const runningOnNode = async (ctx: Context) =>
  (await ctx.kube.get<{ items: V1Pod[] }>(`/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${ctx.nodeName},status.phase=Running`)}`)).items.length;

export interface KruiseOptions { pods: number; windowSeconds: number; everySeconds: number }

export async function runKruise(ctx: Context, agents: readonly V1Pod[], o: KruiseOptions): Promise<KruiseResult> {
  if (ctx.nodes.length > 1) throw new Error('the kruise part runs on one node');
  const built = buildKruiseDaemon(ctx);
  const socket = containerdSocketOf(ctx.nodeName);
  const socketDir = socket.slice(0, socket.lastIndexOf('/'));
  const socketFile = socket.slice(socket.lastIndexOf('/') + 1);
  const crdFiles = readdirYaml(join(built.dir, 'crds'));
  let namespace: string | undefined;
  let imported = false;
  try {
    // ---- install
    if (!ctr(['images', 'ls', '-q'], socket).split('\n').includes(built.image)) {
      ctr(['images', 'import', join(built.dir, 'kruise-daemon.tar')], socket);
      imported = true;
    }
    kubectl('apply', '--server-side', ...crdFiles.flatMap((f) => ['-f', f]));
    kubectl('wait', '--for=condition=Established', '--timeout=60s', ...crdFiles.map((f) => `crd/${crdName(f)}`));
    const m = manifests(built, socketDir, socketFile);
    await createOrKeep(ctx, '/api/v1/namespaces', { metadata: { name: KRUISE_NAMESPACE, labels: LABELS } });
    await createOrKeep(ctx, `/api/v1/namespaces/${KRUISE_NAMESPACE}/serviceaccounts`, m.serviceAccount);
    await createOrKeep(ctx, '/apis/rbac.authorization.k8s.io/v1/clusterroles', m.clusterRole);
    await createOrKeep(ctx, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', m.clusterRoleBinding);
    await createOrKeep(ctx, `/apis/apps/v1/namespaces/${KRUISE_NAMESPACE}/daemonsets`, m.daemonSet);
    ctx.log(`kruise: kruise-daemon ${built.version} installed (${crdFiles.length} CRDs, DaemonSet ${KRUISE_NAMESPACE}/${KRUISE_NAME}, hostNetwork, CRI socket ${socket}); waiting for it to serve`);
    const { pod: kruisePod, serving } = await waitServing(ctx);
    ctx.log(`kruise: ${kruisePod.metadata!.name} serving: ${serving.join(' / ')}`);

    const agentPod = await ctx.kube.get<V1Pod>(`/api/v1/namespaces/${NAMESPACE}/pods/${agents[0]!.metadata!.name!}`);
    const targets = [target(agentPod, 'agent'), target(kruisePod, 'daemon')];

    // ---- before the Pods: what each holds with the cluster's own Pods only
    const podsBefore = await runningOnNode(ctx);
    const [agentBefore, kruiseBefore] = await sampleBoth(targets, 10_000, o.everySeconds * 1000);

    // ---- the Pods: Jobs of ours (a main and a marked sidecar), as the burst's, quieter
    namespace = await createNamespace(ctx, 'bench-kruise');
    const ns = namespace;
    const names = Array.from({ length: o.pods }, (_, i) => `idle-${String(i).padStart(3, '0')}`);
    const t0 = Date.now();
    await pool(names, 10, async (name) => {
      await createJob(ctx, ns, jobBody(name, { containers: [busybox('main', QUIET), busybox('proxy', QUIET, { env: [SIDECAR_MARK] })] }));
    });
    const startLimitMs = Math.max(420_000, o.pods * 2_000);
    const running = (p: V1Pod) => ['main', 'proxy'].every((c) => statusOf(p, c)?.state?.running);
    for (let i = 0; ; i++) {
      const n = (await listPods(ctx, ns)).filter(running).length;
      if (n === o.pods) break;
      if (i % 10 === 0) ctx.log(`kruise: ${n}/${o.pods} Pods running`);
      if (Date.now() - t0 > startLimitMs) throw new Error(`only ${n}/${o.pods} Pods running after ${startLimitMs / 1000} s`);
      await sleep(2000);
    }
    const podsStartSeconds = Math.round((Date.now() - t0) / 1000);
    // Both daemons have seen every Pod start; the window begins once the node is quiet.
    await sleep(20_000);
    const podsOnNode = await runningOnNode(ctx);
    ctx.log(`kruise: ${o.pods} Pods running after ${podsStartSeconds} s (${podsOnNode} Running on the node); sampling both for ${o.windowSeconds} s every ${o.everySeconds} s`);

    // ---- the window
    const windowStart = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    const [agentSamples, kruiseSamples] = await sampleBoth(targets, o.windowSeconds * 1000, o.everySeconds * 1000);
    const windowEndMs = Date.now();
    const kubeletMetrics = await ctx.kube.getText(`/api/v1/nodes/${ctx.nodeName}/proxy/metrics/resource`).then(parseMetrics, (err: unknown) => {
      ctx.log(`kruise: kubelet's resource metrics unreadable (no cross-check): ${String(err)}`);
      return [];
    });
    const during = (await daemonLog(ctx, kruisePod, false, windowStart)).split('\n').filter((l) => l.trim() && Date.parse(l.split(' ')[0]!) <= windowEndMs);
    const count = async (resource: string) => (await ctx.kube.get<{ items: unknown[] }>(`/apis/apps.kruise.io/v1alpha1/${resource}`)).items.length;
    const after = await ctx.kube.get<V1Pod>(`/api/v1/namespaces/${KRUISE_NAMESPACE}/pods/${kruisePod.metadata!.name!}`);
    const restarts = statusOf(after, 'daemon')?.restartCount ?? 0;
    if (restarts > 0) throw new Error(`kruise-daemon restarted during the part (${restarts})`);

    const processMemory = (t: Target, samples: MemorySample[]): ProcessMemory => ({
      pod: t.pod.metadata!.name!, container: t.container, cgroup: t.cgroup, ...summarizeMemory(samples),
      kubeletWorkingSetMiB: kubeletWorkingSetMiB(kubeletMetrics, t.pod.metadata!.namespace!, t.pod.metadata!.name!, t.container),
      rssSamplesMiB: samples.map((s) => mib(s.rssBytes)), workingSetSamplesMiB: samples.map((s) => mib(s.workingSetBytes)),
    });
    const agent = processMemory(targets[0]!, agentSamples!);
    const kruiseDaemon = processMemory(targets[1]!, kruiseSamples!);
    ctx.log(`kruise: working set median/max agent ${agent.workingSetMiB.median}/${agent.workingSetMiB.max} MiB (kubelet's ${agent.kubeletWorkingSetMiB}), ` +
      `kruise-daemon ${kruiseDaemon.workingSetMiB.median}/${kruiseDaemon.workingSetMiB.max} MiB (kubelet's ${kruiseDaemon.kubeletWorkingSetMiB}); ` +
      `RSS agent ${agent.rssMiB.median}/${agent.rssMiB.max} MiB, kruise-daemon ${kruiseDaemon.rssMiB.median}/${kruiseDaemon.rssMiB.max} MiB`);
    return {
      method: `kruise-daemon ${built.version} built from github.com/openkruise/kruise (cmd/daemon, CGO_ENABLED=0; bench/build-kruise-daemon.sh), ` +
        'an OCI image of the binary alone imported into the node\'s containerd, run as OpenKruise\'s chart runs it (a DaemonSet in kruise-system, ' +
        'hostNetwork, the chart\'s flags and limits, the CRI socket\'s directory mounted read-only at /hostvarrun), with its CRDs ' +
        `(${crdFiles.map(crdName).join(', ')}) and a ClusterRole for its informers and status writes. No Kruise manager: no ` +
        'ContainerRecreateRequest, NodeImage or NodePodProbe exists, so it only holds its informers (its Pods, by spec.nodeName) and idles. ' +
        `Then ${o.pods} Jobs of ours on the node (a main and a marked sidecar, both asleep); ${o.windowSeconds} s idle from 20 s after they all ran, ` +
        `both containers sampled at the same instants every ${o.everySeconds} s: RSS (VmRSS, RssAnon, RssFile) from /proc/<pid>/status, CPU from ` +
        '/proc/<pid>/stat, working set = memory.usage_in_bytes − total_inactive_file of the container\'s memory cgroup (cgroup v1, ' +
        'the path from /proc/<pid>/cgroup), as kubelet computes it for eviction; kubelet\'s own container_memory_working_set_bytes ' +
        '(its /metrics/resource through the API server\'s node proxy) at the window\'s end beside it as a cross-check.',
      kruise: {
        version: built.version,
        module: `github.com/openkruise/kruise@${built.version}`,
        image: built.image,
        args: kruiseDaemonArgs(socketFile),
        pod: kruisePod.metadata!.name!,
        restarts,
        serving,
        duringWindow: {
          logLines: during.length,
          logExcerpt: during.slice(0, 10),
          containerRecreateRequests: await count('containerrecreaterequests'),
          nodeImages: await count('nodeimages'),
          nodePodProbes: await count('nodepodprobes'),
        },
      },
      benchPods: o.pods,
      podsStartSeconds,
      podsOnNode,
      windowSeconds: o.windowSeconds,
      everySeconds: o.everySeconds,
      beforePods: { podsOnNode: podsBefore, agent: summarizeMemory(agentBefore!), kruiseDaemon: summarizeMemory(kruiseBefore!) },
      agent,
      kruiseDaemon,
      ratio: {
        workingSet: Math.round((agent.workingSetMiB.median / kruiseDaemon.workingSetMiB.median) * 100) / 100,
        rss: Math.round((agent.rssMiB.median / kruiseDaemon.rssMiB.median) * 100) / 100,
      },
    };
  } finally {
    await cleanUp(ctx, namespace, crdFiles, imported ? { image: built.image, socket } : undefined);
  }
}

/** Everything the part installed, each step on its own (one failing does not keep the others from running). */
async function cleanUp(ctx: Context, namespace: string | undefined, crdFiles: string[], image: { image: string; socket: string } | undefined): Promise<void> {
  const steps: [string, () => Promise<unknown>][] = [
    ...(namespace ? [[`namespace ${namespace}`, () => deleteNamespace(ctx, namespace)] as [string, () => Promise<unknown>]] : []),
    [`namespace ${KRUISE_NAMESPACE}`, () => deleteNamespace(ctx, KRUISE_NAMESPACE)],
    ['ClusterRoleBinding', () => ignoreMissing(() => ctx.kube.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${KRUISE_ROLE}`))],
    ['ClusterRole', () => ignoreMissing(() => ctx.kube.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${KRUISE_ROLE}`))],
    ['CRDs', async () => kubectl('delete', '--ignore-not-found', '--wait=true', '--timeout=120s', ...crdFiles.flatMap((f) => ['-f', f]))],
    ...(image ? [['image', async () => ctr(['images', 'rm', image.image], image.socket)] as [string, () => Promise<unknown>]] : []),
  ];
  for (const [what, step] of steps) {
    try {
      await step();
    } catch (err) {
      ctx.log(`kruise: cleanup of ${what} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  ctx.log('kruise: cleaned up');
}

function readdirYaml(dir: string): string[] {
  return readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort().map((f) => join(dir, f));
}

/** apps.kruise.io_nodeimages.yaml → nodeimages.apps.kruise.io */
export function crdName(file: string): string {
  const base = file.slice(file.lastIndexOf('/') + 1).replace(/\.yaml$/, '');
  const [group, plural] = base.split('_');
  return `${plural}.${group}`;
}
