// Parts 1 and 2 on a cluster of several nodes (e2e/cluster, ST_NODES): where each Job goes, and
// what the per-node readings add up to. Pure helpers (no cluster), unit-tested in nodes.test.ts.
import type { AgentLog } from './context.ts';
import type { Summary } from './stats.ts';
import { summarize } from './stats.ts';

/**
 * The node of a kind's `index`-th Job: round-robin over the nodes, counted per kind, so every node
 * gets as many of each kind as the count allows, and the i-th of two kinds counted alike share a node.
 */
export function roundRobin(index: number, nodes: readonly string[]): string {
  if (nodes.length === 0) throw new Error('no nodes to spread Jobs over');
  return nodes[index % nodes.length]!;
}

/** Main → sidecar finished per node and group (e.g. the kind of batch), node by node in the cluster's order. */
export function summaryByNode<T extends { node?: string; mainToSidecarMs: number }>(
  samples: readonly T[], nodes: readonly string[], groupOf: (s: T) => string,
): Record<string, Record<string, Summary>> {
  const out: Record<string, Record<string, Summary>> = {};
  for (const node of nodes) {
    const groups = new Map<string, number[]>();
    for (const s of samples) {
      if (s.node !== node) continue;
      const group = groupOf(s);
      groups.set(group, [...(groups.get(group) ?? []), s.mainToSidecarMs]);
    }
    out[node] = Object.fromEntries([...groups].map(([group, values]) => [group, summarize(values)]));
  }
  return out;
}

/** Every node's agent log as one: the stops by Pod (Pods are on one node each), restarts summed, errors named by agent. */
export function mergeAgentLogs(logs: readonly { agent: string; log: AgentLog }[]): AgentLog {
  const timelines = new Map(logs.flatMap(({ log }) => [...log.timelines]));
  const errors = logs.flatMap(({ agent, log }) => (log.error ? [`${agent}: ${log.error}`] : []));
  return { timelines, agentRestarts: logs.reduce((n, { log }) => n + log.agentRestarts, 0), ...(errors.length > 0 ? { error: errors.join('; ') } : {}) };
}

/** What each node's agent measured in the footprint window, as AgentResult holds it. */
export interface AgentFigures {
  rssIdleMB: number;
  rssPeakBurstMB: number;
  idle: { millicores: number };
  burst: { cpuSeconds: number };
}

export interface AgentTotals {
  agents: number;
  /** Summed over the agents; the peak is the sum of each one's own peak (not reached at one instant). */
  rssIdleMB: number;
  rssPeakBurstMB: number;
  idleMillicores: number;
  burstCpuSeconds: number;
  /** The agents' CPU over the burst per stopped sidecar (one a Job), all nodes together. */
  cpuMsPerStop: number;
}

/** The agents of all nodes together: memory and CPU summed, CPU per stop over every Job of the burst. */
export function agentTotals(agents: readonly AgentFigures[], jobs: number): AgentTotals {
  const sum = (f: (a: AgentFigures) => number) => agents.reduce((n, a) => n + f(a), 0);
  const cpuSeconds = sum((a) => a.burst.cpuSeconds);
  return {
    agents: agents.length,
    rssIdleMB: round(sum((a) => a.rssIdleMB)),
    rssPeakBurstMB: round(sum((a) => a.rssPeakBurstMB)),
    idleMillicores: Math.round(sum((a) => a.idle.millicores) * 1000) / 1000,
    burstCpuSeconds: Math.round(cpuSeconds * 1000) / 1000,
    cpuMsPerStop: round((cpuSeconds * 1000) / jobs),
  };
}

const round = (x: number) => Math.round(x * 10) / 10;
