// The controller's view of nodes (R5, R22): the watches that tell a virtual node, a node the operator
// names as agentless, and a node where no agent has run for a while, answered by the pure nodeKindOf
// of node-kind.ts.
import type { Clock } from '../common/clock.ts';
import { now } from '../common/clock.ts';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { FlagError } from '../common/flags.ts';
import type { KubeApi } from '../common/kube/api.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import { ProjectingInformer } from '../common/informer.ts';
import type { Logger } from '../common/log.ts';
import { statusCode } from '../common/log.ts';
import { VIRTUAL_NODE_LABEL_KEY, VIRTUAL_NODE_LABEL_VALUE } from '../api/names.ts';
import type { NodeKind } from '../rules/classify.ts';
import type { AgentPodView, NodeFacts } from './node-kind.ts';
import { nodeKindOf } from './node-kind.ts';

export interface NodeKindsOptions {
  client: Pick<KubeApi, 'get' | 'watch'>;
  log: Logger;
  /** Nodes where no agent runs, by label selector (--agentless-node-selector); empty: none. */
  agentlessNodeSelector: string;
  /** --agentless-after-seconds; 0: a node never counts as agentless by the absence of an agent. */
  agentlessAfterSeconds: number;
  /** Where the agent Pods run, and their labels (--agent-pod-selector). */
  agentNamespace: string;
  agentPodSelector: string;
  onRestart: (resource: string) => void;
  now?: Clock;
}

type NodeView = Pick<NodeFacts, 'virtual' | 'createdMs'>;
type AgentPod = AgentPodView & { nodeName: string };

/** How often a selector matching no agent Pod is reported while it lasts. */
const NO_AGENTS_REPORT_MS = 5 * 60_000;

const msOf = (time: Date | string | undefined): number => (time ? new Date(time).getTime() : 0);

function nodeView(node: V1Node): NodeView {
  return {
    virtual: node.metadata?.labels?.[VIRTUAL_NODE_LABEL_KEY] === VIRTUAL_NODE_LABEL_VALUE,
    createdMs: msOf(node.metadata?.creationTimestamp),
  };
}

function agentPodView(pod: V1Pod): AgentPod | undefined {
  const nodeName = pod.spec?.nodeName;
  if (!nodeName) return undefined; // not scheduled yet: on no node
  const deletingMs = msOf(pod.metadata?.deletionTimestamp);
  const running = !deletingMs && pod.status?.containerStatuses?.some((c) => c.state?.running !== undefined) === true;
  if (running) return { nodeName, running: true, notRunningSinceMs: 0 };
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  return { nodeName, running: false, notRunningSinceMs: Math.max(msOf(pod.metadata?.creationTimestamp), msOf(ready?.lastTransitionTime), deletingMs) };
}

/**
 * Checks the flags' selectors with the API server, which parses them as it will for the watches: an
 * invalid one stops the controller at start-up as a bad flag, with the API server's own message,
 * rather than a watch that fails for ever. Any other error is left to the watches' retries.
 */
export async function checkSelectors(client: Pick<KubeApi, 'get'>, o: Pick<NodeKindsOptions, 'agentlessNodeSelector' | 'agentNamespace' | 'agentPodSelector'>): Promise<void> {
  await checkSelector(client, resourcePath('v1', 'nodes'), '--agentless-node-selector', o.agentlessNodeSelector);
  await checkSelector(client, podPath(o.agentNamespace), '--agent-pod-selector', o.agentPodSelector);
}

async function checkSelector(client: Pick<KubeApi, 'get'>, path: string, flag: string, selector: string): Promise<void> {
  if (!selector) return;
  try {
    await client.get(path, { labelSelector: selector, limit: 1 });
  } catch (err) {
    if (statusCode(err) === 400) throw new FlagError(`${flag} ${JSON.stringify(selector)} is not a valid label selector: ${(err as Error).message}`, { cause: err });
  }
}

export class NodeKinds {
  private readonly o: NodeKindsOptions;
  private readonly now: Clock;
  private readonly nodes: ProjectingInformer<V1Node, NodeView>;
  private readonly agentless: ProjectingInformer<V1Node, true> | undefined;
  private readonly agents: ProjectingInformer<V1Pod, AgentPod>;
  /** Node name → when an agent Pod on it last went away (bounded by the nodes: dropped with the node). */
  private readonly agentGone = new Map<string, number>();
  /** Agent Pod key → its node, to know which node an agent Pod left. */
  private readonly agentNodes = new Map<string, string>();
  /** When the agent-Pod watch was first seen synced; 0: not yet. */
  private agentsSyncedAtMs = 0;
  /** When a selector matching no agent Pod was last reported. */
  private noAgentsToldAtMs = -Infinity;

  constructor(options: NodeKindsOptions) {
    this.o = options;
    this.now = options.now ?? now;
    const { client, log } = options;
    this.nodes = new ProjectingInformer<V1Node, NodeView>({
      client, log, path: resourcePath('v1', 'nodes'), project: nodeView,
      onChange: (name, view) => {
        if (!view) this.agentGone.delete(name);
      },
      onRestart: () => options.onRestart('nodes'),
    });
    this.agentless = options.agentlessNodeSelector
      ? new ProjectingInformer<V1Node, true>({
          client, log, path: resourcePath('v1', 'nodes'), labelSelector: options.agentlessNodeSelector, project: () => true,
          onChange: () => {},
          onRestart: () => options.onRestart('nodes'),
        })
      : undefined;
    this.agents = new ProjectingInformer<V1Pod, AgentPod>({
      client, log, path: podPath(options.agentNamespace), labelSelector: options.agentPodSelector, project: agentPodView,
      indexBy: (p) => [p.nodeName],
      onChange: (key, pod) => {
        const node = pod?.nodeName ?? this.agentNodes.get(key);
        if (pod) this.agentNodes.set(key, pod.nodeName);
        else if (node) {
          this.agentNodes.delete(key);
          this.agentGone.set(node, this.now());
        }
      },
      onRestart: () => options.onRestart('agent pods'),
    });
  }

  start(): void {
    for (const informer of this.informers()) informer.start();
  }

  stop(): void {
    for (const informer of this.informers()) informer.stop();
  }

  isSynced(): boolean {
    return this.informers().every((i) => i.isSynced());
  }

  /** The kind of the node named; a node not in the watch is read from the API, never guessed. */
  async kindOf(name: string): Promise<NodeKind> {
    const view = this.nodes.get(name) ?? nodeView(await this.o.client.get<V1Node>(resourcePath('v1', 'nodes', undefined, name)));
    const facts: NodeFacts = {
      ...view,
      agentlessBySelector: this.agentless?.get(name) === true,
      agents: this.agents.byIndex(name),
      agentGoneMs: this.agentGone.get(name),
    };
    const now = this.now();
    if (!this.agentsSyncedAtMs && this.agents.isSynced()) this.agentsSyncedAtMs = now;
    const agentsSeen = this.agentsSyncedAtMs > 0 && this.agents.size() > 0;
    if (this.agentsSyncedAtMs > 0 && !agentsSeen) this.reportNoAgents(now);
    const timing = { agentsSeen, watchingSinceMs: this.agentsSyncedAtMs, afterMs: this.o.agentlessAfterSeconds * 1000 };
    return nodeKindOf(facts, timing, now).kind;
  }

  /** A selector that matches no agent Pod is a misconfiguration: said every NO_AGENTS_REPORT_MS while it lasts. */
  private reportNoAgents(now: number): void {
    if (now - this.noAgentsToldAtMs < NO_AGENTS_REPORT_MS) return;
    this.noAgentsToldAtMs = now;
    this.o.log.error('no agent Pod matches --agent-pod-selector in --agent-namespace: no node counts as agentless by the absence of an agent until one does (was the agent relabelled, or installed elsewhere?)', {
      agentNamespace: this.o.agentNamespace, agentPodSelector: this.o.agentPodSelector,
    });
  }

  private informers(): { start(): void; stop(): void; isSynced(): boolean }[] {
    return [this.nodes, this.agents, ...(this.agentless ? [this.agentless] : [])];
  }
}
