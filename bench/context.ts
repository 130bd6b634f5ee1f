// What every part of the benchmark shares: the API client, each node's CRI runtime (for nanosecond
// container timestamps), namespaces, Jobs, and reading a container's process straight from /proc.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { V1Container, V1Job, V1Pod, V1Volume } from '@kubernetes/client-node';
import { CriRuntime } from '../agent/runtime/cri.ts';
import type { RuntimeContainer } from '../agent/runtime/types.ts';
import { clusterEnv, containerdSocketOf } from '../e2e/support/cluster.ts';
import { NAMESPACE } from '../e2e/support/deploy.ts';
import { BUSYBOX } from '../e2e/support/jobs.ts';
import { ApiError, Kube, retrying } from './kube.ts';
import { mergeAgentLogs } from './nodes.ts';
import type { Sample } from './stats.ts';
import { parseMetrics } from './stats.ts';
import type { Timeline } from './timeline.ts';
import { parseStopTimelines } from './timeline.ts';

export interface Context {
  kube: Kube;
  /** Node 1's runtime. */
  cri: CriRuntime;
  nodeName: string;
  /** Every node, node 1 first: parts 1 and 2 spread their Jobs over them (one on a one-node cluster). */
  nodes: string[];
  /** Each node's runtime, by node name. */
  runtimes: Map<string, CriRuntime>;
  log: (msg: string) => void;
}

export async function createContext(): Promise<Context> {
  const env = clusterEnv();
  const t0 = Date.now();
  const runtimes = new Map(await Promise.all(env.nodeNames.map(async (node) => [node, await CriRuntime.connect(containerdSocketOf(node))] as const)));
  return {
    kube: await Kube.connect(),
    cri: runtimes.get(env.nodeName)!,
    nodeName: env.nodeName,
    nodes: env.nodeNames,
    runtimes,
    log: (msg) => console.log(`[bench +${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${msg}`),
  };
}

export function closeContext(ctx: Context): void {
  for (const cri of ctx.runtimes.values()) cri.close();
  ctx.kube.close();
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A sidecar that exits 0 at once on SIGTERM: the shell waits on `sleep` in the background, so the trap runs immediately. */
export const SIDECAR_SCRIPT = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
export const SIDECAR_MARK = { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' };

export function busybox(name: string, script: string, extra: Partial<V1Container> = {}): V1Container {
  return { name, image: BUSYBOX, imagePullPolicy: 'Never', command: ['sh', '-c', script], ...extra };
}

export async function createNamespace(ctx: Context, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await ctx.kube.request('POST', '/api/v1/namespaces', { metadata: { name, labels: { 'sidecar-terminator.bench/part': prefix } } });
  // Pods are refused until the ServiceAccount controller has made the default ServiceAccount.
  await waitUntil(async () => {
    try {
      await ctx.kube.get(`/api/v1/namespaces/${name}/serviceaccounts/default`);
      return true;
    } catch {
      return false;
    }
  }, 30_000, `ServiceAccount default in ${name}`);
  return name;
}

/** Deletes the namespace and waits (bounded) until it is gone; returns the seconds it took. */
export async function deleteNamespace(ctx: Context, name: string, timeoutMs = 180_000): Promise<number> {
  const t0 = Date.now();
  try {
    await ctx.kube.request('DELETE', `/api/v1/namespaces/${name}`);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
  }
  await waitUntil(async () => {
    try {
      await ctx.kube.get(`/api/v1/namespaces/${name}`);
      return false;
    } catch (err) {
      return err instanceof ApiError && err.status === 404;
    }
  }, timeoutMs, `namespace ${name} deleted`, 1000);
  return (Date.now() - t0) / 1000;
}

export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string, intervalMs = 500): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

export interface JobOptions {
  containers: V1Container[];
  initContainers?: V1Container[];
  volumes?: V1Volume[];
  /** The Pod's restartPolicy (default Never). */
  restartPolicy?: 'Never' | 'OnFailure';
  /** The node it is pinned to (default node 1). */
  nodeName?: string;
}

/** A Job pinned to a node of the cluster (node 1 unless asked), restartPolicy Never unless asked, no retries. */
export function jobBody(name: string, o: JobOptions): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          nodeName: o.nodeName ?? clusterEnv().nodeName,
          restartPolicy: o.restartPolicy ?? 'Never',
          terminationGracePeriodSeconds: 10,
          containers: o.containers,
          initContainers: o.initContainers,
          volumes: o.volumes,
        },
      },
    },
  };
}

export function createJob(ctx: Context, namespace: string, job: V1Job): Promise<V1Job> {
  return retrying(() => ctx.kube.request<V1Job>('POST', `/apis/batch/v1/namespaces/${namespace}/jobs`, job));
}

export async function listPods(ctx: Context, namespace: string): Promise<V1Pod[]> {
  return (await ctx.kube.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${namespace}/pods`)).items;
}

export function statusOf(pod: V1Pod, name: string) {
  return [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].find((s) => s.name === name);
}

/** The runtime's view of a Pod's container (nanosecond timestamps), by its status' containerID, from its node's runtime. */
export async function runtimeContainer(ctx: Context, pod: V1Pod, name: string): Promise<RuntimeContainer | undefined> {
  const id = statusOf(pod, name)?.containerID?.replace(/^containerd:\/\//, '');
  if (!id) return undefined;
  const cri = ctx.runtimes.get(pod.spec?.nodeName ?? '');
  if (!cri) throw new Error(`Pod ${pod.metadata?.name} is on ${pod.spec?.nodeName}, not a node of this cluster`);
  return cri.status(id);
}

export const nsToMs = (ns: bigint) => Number(ns / 1000n) / 1000;

// ---------------------------------------------------------------- processes of containers

/**
 * The host PID of a container's first process (the node process of our images), by container ID,
 * from the runtime of its node (node 1 unless told; the nodes share the host's PID namespace).
 */
export function containerPid(containerID: string, nodeName = clusterEnv().nodeName): number {
  const id = containerID.replace(/^containerd:\/\//, '');
  const out = execFileSync('ctr', ['-a', containerdSocketOf(nodeName), '-n', 'k8s.io', 'tasks', 'ls'], { encoding: 'utf8' });
  for (const line of out.split('\n')) {
    const [task, pid] = line.trim().split(/\s+/);
    if (task === id && pid) return Number(pid);
  }
  throw new Error(`no running task for container ${id}`);
}

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/**
 * RSS (bytes), split into anonymous memory and file pages (mostly the node binary's own code,
 * clean and shared), and CPU seconds (user + system) of a process, read from /proc without touching it.
 */
export function procStats(pid: number): { rssBytes: number; rssAnonBytes: number; rssFileBytes: number; cpuSeconds: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields after "(comm) ": state is index 0, utime index 11, stime index 12.
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rssBytes: kb('VmRSS') * 1024, rssAnonBytes: kb('RssAnon') * 1024, rssFileBytes: kb('RssFile') * 1024, cpuSeconds: ticks / CLK_TCK };
}

export interface RssSample { tMs: number; rssBytes: number; rssAnonBytes: number; rssFileBytes: number }

/** Samples a process' RSS every `intervalMs` in the background; stop() returns the samples. */
export function sampleRss(pid: number, intervalMs = 500): { stop: () => RssSample[] } {
  const samples: RssSample[] = [];
  const take = () => {
    try {
      const { rssBytes, rssAnonBytes, rssFileBytes } = procStats(pid);
      samples.push({ tMs: Date.now(), rssBytes, rssAnonBytes, rssFileBytes });
    } catch {
      // The process is gone (a restart): the gap shows in the samples.
    }
  };
  take();
  const timer = setInterval(take, intervalMs);
  return { stop: () => { clearInterval(timer); take(); return samples; } };
}

// ---------------------------------------------------------------- metrics

export function scrape(podIP: string, port: number): Promise<Sample[]> {
  return scrapeUrl(`http://${podIP}:${port}/metrics`);
}

export async function scrapeUrl(url: string): Promise<Sample[]> {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  return parseMetrics(await res.text());
}

/** The agent's /metrics, or none when they cannot be read (a cross-check only: the part goes on without it). */
export async function scrapeOrNothing(agent: V1Pod): Promise<Sample[]> {
  try {
    return await scrape(agent.status!.podIP!, 9440);
  } catch {
    return [];
  }
}

/** Every node's agent's /metrics as one list: the sums over it (metricSum, histograms) are over all agents. */
export async function scrapeAllOrNothing(agents: readonly V1Pod[]): Promise<Sample[]> {
  return (await Promise.all(agents.map(scrapeOrNothing))).flat();
}

export async function apiserverMetrics(ctx: Context): Promise<Sample[]> {
  return parseMetrics(await ctx.kube.get<string>('/metrics'));
}

// ---------------------------------------------------------------- the agent's log

export interface AgentLog {
  /** The per-step timing of each stop, by Pod (namespace/name). */
  timelines: Map<string, Timeline>;
  /** Restarts of the agent's container since following began: the stops before the last but one are lost. */
  agentRestarts: number;
  error?: string;
}

/** What results.json keeps of an AgentLog. */
export interface AgentLogNote {
  timelines: number;
  agentRestarts: number;
  error?: string;
}

export const logNote = (log: AgentLog): AgentLogNote => ({ timelines: log.timelines.size, agentRestarts: log.agentRestarts, ...(log.error ? { error: log.error } : {}) });

/** Starts following the agent's log: the function returned reads the stops logged since (through the API, as kubectl logs). */
export async function followAgentLog(ctx: Context, agent: V1Pod): Promise<() => Promise<AgentLog>> {
  const pod = `/api/v1/namespaces/${NAMESPACE}/pods/${agent.metadata!.name!}`;
  // Whole seconds, one early: the log's timestamps and this clock are the same host's.
  const since = new Date(Math.floor(Date.now() / 1000) * 1000 - 1000).toISOString().replace('.000Z', 'Z');
  const restarts = async () => (await ctx.kube.get<V1Pod>(pod)).status?.containerStatuses?.find((c) => c.name === 'agent')?.restartCount ?? 0;
  const restartsBefore = await restarts();
  const logPath = (previous: boolean) => `${pod}/log?container=agent&sinceTime=${encodeURIComponent(since)}${previous ? '&previous=true' : ''}`;
  return async () => {
    let agentRestarts = 0;
    try {
      agentRestarts = (await restarts()) - restartsBefore;
      const current = await ctx.kube.getText(logPath(false));
      // After a restart, the stops made before it are in the previous container's log.
      const previous = agentRestarts > 0 ? await ctx.kube.getText(logPath(true)).catch(() => '') : '';
      return { timelines: parseStopTimelines(`${previous}\n${current}`), agentRestarts };
    } catch (err) {
      return { timelines: new Map(), agentRestarts, error: err instanceof Error ? err.message : String(err) };
    }
  };
}

/** Follows every node's agent's log; the function returned reads the stops of all of them (one agent: its log as it is). */
export async function followAgentLogs(ctx: Context, agents: readonly V1Pod[]): Promise<() => Promise<AgentLog>> {
  const readers = await Promise.all(agents.map(async (agent) => ({ agent: agent.metadata!.name!, read: await followAgentLog(ctx, agent) })));
  return async () => {
    const logs = await Promise.all(readers.map(async ({ agent, read }) => ({ agent, log: await read() })));
    return logs.length === 1 ? logs[0]!.log : mergeAgentLogs(logs);
  };
}
