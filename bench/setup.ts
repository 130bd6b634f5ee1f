// Deploys sidecar-terminator for the benchmark: the project as e2e deploys it (kubectl apply -k),
// then the flags put back to the shipped defaults (the e2e overlay shortens the resync periods to
// 5 s for fast tests, which would not be what users run), and API Priority and Fairness
// FlowSchemas that give the agent's and the controller's ServiceAccounts flows of their own, so
// kube-apiserver counts their requests separately (apiserver_flowcontrol_dispatched_requests_total).
import type { V1Pod } from '@kubernetes/client-node';
import { AGENT, CONTROLLER, NAMESPACE, agentPod, agentPods, controllerLeader, deployProject } from '../e2e/support/deploy.ts';
import { kubectl } from '../e2e/support/kubectl.ts';
import type { Context } from './context.ts';
import { sleep } from './context.ts';
import { ApiError } from './kube.ts';

export const AGENT_FLOW = 'bench-sidecar-terminator-agent';
export const CONTROLLER_FLOW = 'bench-sidecar-terminator-controller';

export interface Deployed {
  agent: V1Pod;
  /** Every node's agent, in the order of the cluster's nodes (the one agent on a one-node cluster). */
  agents: V1Pod[];
  leader: V1Pod;
  args: { agent: string[]; controller: string[] };
}

export async function deploy(ctx: Context): Promise<Deployed> {
  ctx.log('deploying sidecar-terminator (kubectl apply -k, image built offline)');
  await deployProject();
  // The shipped flags: the e2e overlay's fast resyncs removed.
  const shipped = (kind: string, name: string): string[] => {
    const current = JSON.parse(kubectl('-n', NAMESPACE, 'get', kind, name, '-o', 'jsonpath={.spec.template.spec.containers[0].args}')) as string[];
    const args = current.filter((a) => !a.startsWith('--resync-seconds='));
    kubectl('-n', NAMESPACE, 'patch', kind, name, '--type=json', '-p', JSON.stringify([{ op: 'replace', path: '/spec/template/spec/containers/0/args', value: args }]));
    return args;
  };
  const args = { agent: shipped('daemonset', AGENT), controller: shipped('deployment', CONTROLLER) };
  kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=180s');
  kubectl('-n', NAMESPACE, 'rollout', 'status', `deployment/${CONTROLLER}`, '--timeout=180s');
  for (const [flow, sa] of [[AGENT_FLOW, AGENT], [CONTROLLER_FLOW, CONTROLLER]] as const) await flowSchema(ctx, flow, sa);
  const leader = await controllerLeader(90_000);
  const agent = await agentPod();
  const agents = await agentsByNode(ctx);
  for (const a of agents) await waitReady(ctx, a);
  ctx.log(`deployed with the default flags (agent ${args.agent.join(' ')}; controller ${args.controller.join(' ')}); agent ${agents.map((a) => a.metadata!.name).join(', ')}, leader ${leader.metadata!.name}`);
  return { agent, agents, leader, args };
}

/** One agent on every node, in the nodes' order. */
async function agentsByNode(ctx: Context): Promise<V1Pod[]> {
  const pods = await agentPods();
  return ctx.nodes.map((node) => {
    const pod = pods.find((p) => p.spec?.nodeName === node);
    if (!pod) throw new Error(`no agent Pod on node ${node}`);
    return pod;
  });
}

async function waitReady(ctx: Context, pod: V1Pod): Promise<void> {
  for (let i = 0; i < 120; i++) {
    const p = await ctx.kube.get<V1Pod>(`/api/v1/namespaces/${NAMESPACE}/pods/${pod.metadata!.name}`);
    if (p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return;
    await sleep(1000);
  }
  throw new Error(`${pod.metadata!.name} not ready`);
}

/**
 * A FlowSchema matching every request of one ServiceAccount, on the priority level its requests
 * get by default (workload-low, from the suggested `service-accounts` FlowSchema), so only the
 * accounting changes, not how the requests are served.
 */
async function flowSchema(ctx: Context, name: string, serviceAccount: string): Promise<void> {
  // v1 from 1.29; v1beta3 (the same schema) on 1.27 and 1.28.
  const group = await ctx.kube.get<{ versions?: { version: string }[] }>('/apis/flowcontrol.apiserver.k8s.io');
  const version = group.versions?.some((v) => v.version === 'v1') ? 'v1' : 'v1beta3';
  const body = {
    apiVersion: `flowcontrol.apiserver.k8s.io/${version}`,
    kind: 'FlowSchema',
    metadata: { name },
    spec: {
      priorityLevelConfiguration: { name: 'workload-low' },
      matchingPrecedence: 1000,
      distinguisherMethod: { type: 'ByUser' },
      rules: [{
        subjects: [{ kind: 'ServiceAccount', serviceAccount: { name: serviceAccount, namespace: NAMESPACE } }],
        resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], clusterScope: true, namespaces: ['*'] }],
        nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
      }],
    },
  };
  try {
    await ctx.kube.request('POST', `/apis/flowcontrol.apiserver.k8s.io/${version}/flowschemas`, body);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 409)) throw err;
  }
}
