// Which kind of node a Pod runs on, as the controller decides it (rules R5 and R50, docs/design.md):
// pure, from what the watches hold and the time, so that a blip (an agent rolling out, a node's
// first seconds, a controller that just started) never turns a real node into an agentless one.
import type { NodeKind } from '../rules/classify.ts';

/** An agent Pod on the node, as the controller's watch of agent Pods keeps it. */
export interface AgentPodView {
  /** Ready, and not being deleted. */
  ready: boolean;
  /**
   * When not ready: since when, in ms — its Ready condition's last transition, else its creation,
   * or for a Pod being deleted its deletion timestamp. An agent Pod that exists was placed there by
   * the DaemonSet, so it counts as an agent on its way for that long.
   */
  notReadySinceMs: number;
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
  /** When the controller began watching agent Pods: it knows nothing of what happened before. */
  watchingSinceMs: number;
  /** How long a node goes without a ready agent before it counts as agentless; 0: never by absence. */
  afterMs: number;
}

/**
 * The node's kind: virtual by its label; agentless when the selector names it, or when no agent
 * Pod has been ready on it for `afterMs` — counted from the latest of the node's creation, the
 * controller's watch start, an agent Pod's going away, and each agent Pod's not-ready start; real
 * otherwise. `recheckAtMs`: when a real node without a ready agent would turn agentless.
 */
export function nodeKindOf(node: NodeFacts, timing: AgentlessTiming, nowMs: number): { kind: NodeKind; recheckAtMs?: number } {
  if (node.virtual) return { kind: 'virtual' };
  if (node.agentlessBySelector) return { kind: 'agentless' };
  if (node.agents.some((a) => a.ready) || timing.afterMs <= 0) return { kind: 'real' };
  const withoutAgentSinceMs = Math.max(
    node.createdMs,
    timing.watchingSinceMs,
    node.agentGoneMs ?? 0,
    ...node.agents.map((a) => a.notReadySinceMs),
  );
  const agentlessAtMs = withoutAgentSinceMs + timing.afterMs;
  return nowMs >= agentlessAtMs ? { kind: 'agentless' } : { kind: 'real', recheckAtMs: agentlessAtMs };
}
