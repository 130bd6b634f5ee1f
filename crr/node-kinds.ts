// The controller's view of nodes (R5, R22): the watches that tell a virtual node, a node the operator
// names as agentless, and a node where no agent has run for a while, answered by the pure nodeKindOf
// of node-kind.ts.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
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
  now?: () => number;
}

type NodeView = Pick<NodeFacts, 'virtual' | 'createdMs'>;
type AgentPod = AgentPodView & { nodeName: string };

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
 * Checks the selector with the API server, which parses it as it will for the watch: an invalid one
 * stops the controller at start-up with the API server's own message, rather than a watch that
 * fails for ever. Any other error is left to the watch's retries.
 */
export async function checkNodeSelector(client: Pick<KubeApi, 'get'>, selector: string): Promise<void> {
  if (!selector) return;
  try {
    await client.get(resourcePath('v1', 'nodes'), { labelSelector: selector, limit: 1 });
  } catch (err) {
    if (statusCode(err) === 400) throw new Error(`--agentless-node-selector ${JSON.stringify(selector)} is not a valid label selector: ${(err as Error).message}`, { cause: err });
  }
}

export class NodeKinds {
  private readonly o: NodeKindsOptions;
  private readonly now: () => number;
  private readonly nodes: ProjectingInformer<V1Node, NodeView>;
  private readonly agentless: ProjectingInformer<V1Node, true> | undefined;
  private readonly agents: ProjectingInformer<V1Pod, AgentPod>;
  /** Node name → when an agent Pod on it last went away (bounded by the nodes: dropped with the node). */
  private readonly agentGone = new Map<string, number>();
  /** Agent Pod key → its node, to know which node an agent Pod left. */
  private readonly agentNodes = new Map<string, string>();
  private watchingSinceMs = 0;

  constructor(options: NodeKindsOptions) {
    this.o = options;
    this.now = options.now ?? (() => Date.now());
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
    this.watchingSinceMs = this.now();
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
    const timing = { watchingSinceMs: this.watchingSinceMs, afterMs: this.o.agentlessAfterSeconds * 1000 };
    return nodeKindOf(facts, timing, this.now()).kind;
  }

  private informers(): { start(): void; stop(): void; isSynced(): boolean }[] {
    return [this.nodes, this.agents, ...(this.agentless ? [this.agentless] : [])];
  }
}
