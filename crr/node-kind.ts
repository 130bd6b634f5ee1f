// Which kind of node a Pod runs on, as the controller decides it (rules R5 and R22, docs/design.md):
// pure, from what the watches hold and the time, so that a blip (an agent rolling out, a node's
// first seconds, a controller that just started) never turns a real node into an agentless one.
// An agent counts while its container runs, ready or not: an agent that is not ready (a watch
// resyncing, its fast path not confined) still carries out requests; one whose container does not
// run (no Pod, a Pod that cannot start, a crash loop) does not.
import type { NodeKind } from '../rules/classify.ts';

/** An agent Pod on the node, as the controller's watch of agent Pods keeps it. */
export interface AgentPodView {
  /** Its agent container runs, and the Pod is not being deleted. */
  running: boolean;
  /**
   * When not running: since when, in ms — the latest of its creation, its Ready condition's last
   * transition (a crash loop's first crash) and, for a Pod being deleted, its deletion timestamp. An
   * agent Pod that exists was placed there by the DaemonSet, so it counts as an agent on its way for
   * that long.
   */
  notRunningSinceMs: number;
}

export interface NodeFacts {
  /** Labelled type=virtual-kubelet. */
  virtual: boolean;
  /** Matched by --agentless-node-selector: the operator says no agent runs there. */
  agentlessBySelector: boolean;
  /** The node's creationTimestamp, in ms. */
  createdMs: number;
  /** The agent Pods on the node. */
  agents: readonly AgentPodView[];
  /** When the watch last saw an agent Pod of this node go away (a rollout deletes one before it creates the next). */
  agentGoneMs?: number;
}

export interface AgentlessTiming {
  /**
   * The agent-Pod watch has synced and holds an agent Pod on some node. Until then no node's lack of
   * one means anything: a watch not yet listed, or a selector that matches no agent at all (an
   * overlay that relabels the agent) would make every node agentless.
   */
  agentsSeen: boolean;
  /** When the controller's watch of agent Pods first synced: it knows nothing of what happened before. */
  watchingSinceMs: number;
  /** How long a node goes without a running agent before it counts as agentless; 0: never by absence. */
  afterMs: number;
}

/**
 * The node's kind: virtual by its label; agentless when the selector names it, or when no agent
 * has run on it for `afterMs` — counted from the latest of the node's creation, the controller's
 * watch sync, an agent Pod's going away, and each agent Pod's not-running start, and only once some
 * agent Pod is seen anywhere (`agentsSeen`); real otherwise.
 * `recheckAtMs`: when a real node without a running agent would turn agentless.
 */
export function nodeKindOf(node: NodeFacts, timing: AgentlessTiming, nowMs: number): { kind: NodeKind; recheckAtMs?: number } {
  if (node.virtual) return { kind: 'virtual' };
  if (node.agentlessBySelector) return { kind: 'agentless' };
  if (node.agents.some((a) => a.running) || timing.afterMs <= 0 || !timing.agentsSeen) return { kind: 'real' };
  const withoutAgentSinceMs = Math.max(
    node.createdMs,
    timing.watchingSinceMs,
    node.agentGoneMs ?? 0,
    ...node.agents.map((a) => a.notRunningSinceMs),
  );
  const agentlessAtMs = withoutAgentSinceMs + timing.afterMs;
  return nowMs >= agentlessAtMs ? { kind: 'agentless' } : { kind: 'real', recheckAtMs: agentlessAtMs };
}
