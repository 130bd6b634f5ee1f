// The agent's view of its node, from two watches: the node's Pods (compact projections, indexed by
// the container IDs kubelet reported) and the node's active requests (indexed by Pod uid). Readers
// ask it; who must hear of a change subscribes, in the order subscribed.
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_ACTIVE, LABEL_NODE_NAME, podUidIndex, requestPath } from '../api/container-recreate-request.ts';
import type { KubeApi } from '../common/kube/api.ts';
import { podPath } from '../common/kube/paths.ts';
import { namespacedKey, ProjectingInformer, splitKey } from '../common/informer.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import { Listeners } from '../common/listeners.ts';
import { mayNeedSidecarTermination } from '../rules/classify.ts';
import { keysInScope, PolicyStore } from '../common/policy-store.ts';
import type { WatchedPolicy } from '../rules/policies.ts';
import { POLICY_WATCH, PoliciesInEffect, policyMayYetMark } from '../rules/policies.ts';
import { keptRequest, REQUEST_PAGE_SIZE } from '../rules/requests.ts';
import type { PodProjection } from '../rules/projection.ts';
import { projectPod } from '../rules/projection.ts';
import type { AgentMetrics } from './metrics.ts';
import type { AgentPod } from './pod.ts';
import { projectAgentPod } from './pod.ts';

/** What the agent keeps of a Pod on its node: for carrying out requests, and for the sidecar rules (agent/pod.ts says why two). */
export interface NodePod {
  pod: AgentPod;
  /** Only for Pods the sidecar rules may concern. */
  termination?: PodProjection;
}

/** How soon a namespace's policies that could not be read are asked for again. */
const NAMESPACE_POLICIES_RETRY_MS = 5_000;

export interface NodeCacheDeps {
  client: Pick<KubeApi, 'get' | 'watch'>;
  nodeName: string;
  metrics: Pick<AgentMetrics, 'watchRestarts' | 'unreadableObjects'>;
  log: Logger;
}

export class NodeCache {
  /** As kept: `termination` also for a Job Pod not finished that nothing marks yet (read through `asRead`, as the policies are now). */
  private readonly pods: ProjectingInformer<V1Pod, NodePod>;
  private readonly active: ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>;
  /** A Pod of the node was added or changed. */
  readonly onPodChange = new Listeners<[namespace: string, name: string, pod: NodePod]>();
  /** A Pod left the node's cache. */
  readonly onPodGone = new Listeners<[namespace: string, name: string]>();
  /** An active request of the node was added or changed (one of a Pod). */
  readonly onRequestChange = new Listeners<[request: ContainerRecreateRequest]>();
  /** The sidecar policies (R54), so that the fast path acts for policy-marked sidecars too. */
  private readonly policyStore: PolicyStore<WatchedPolicy>;
  private readonly policies: PoliciesInEffect;
  /** Namespaces with Pods on this node. */
  private readonly podNamespaces = new Set<string>();
  private readonly log: Logger;

  constructor({ client, nodeName, metrics, log }: NodeCacheDeps) {
    this.log = log;
    this.active = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
      client,
      path: requestPath(),
      labelSelector: `${LABEL_NODE_NAME}=${nodeName},${LABEL_ACTIVE}=true`,
      project: keptRequest,
      pageSize: REQUEST_PAGE_SIZE,
      indexBy: podUidIndex,
      onChange: (_key, r) => {
        if (!r?.spec?.podName) return;
        this.onRequestChange.tell(r);
      },
      onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
      onUnreadable: () => metrics.unreadableObjects.inc({ resource: 'containerrecreaterequests' }),
      log,
    });
    // Namespaced policies are kept in full only for namespaces with Pods on this node: a tenant's
    // policies cost the agents of the nodes their Pods run on, not every agent of the cluster.
    this.policyStore = new PolicyStore({
      client, log, ...POLICY_WATCH,
      keepsNamespace: (namespace) => this.podNamespaces.has(namespace),
      onRestart: (resource) => metrics.watchRestarts.inc({ resource }),
      onUnreadable: (resource) => metrics.unreadableObjects.inc({ resource }),
    });
    this.policies = new PoliciesInEffect(this.policyStore);
    // Only compact projections of each Pod on this node are kept; the sidecar rules' one only for
    // Pods their markers or a policy may concern, and for Job Pods not finished, which a policy may
    // yet mark: a policy's change is then decided from here, without listing the node's Pods.
    this.pods = new ProjectingInformer<V1Pod, NodePod>({
      client,
      path: podPath(),
      fieldSelector: `spec.nodeName=${nodeName}`,
      project: (pod) => {
        const termination = projectPod(pod);
        const kept = this.concerns(termination) || policyMayYetMark(termination);
        return { pod: projectAgentPod(pod), ...(kept ? { termination } : {}) };
      },
      // Container IDs as kubelet reported them: a runtime exit event leads straight to its Pod.
      indexBy: (cached) => cached.pod.statuses.flatMap((s) => (s.containerID ? [s.containerID] : [])),
      onChange: (key, cached) => {
        const [namespace, name] = splitKey(key);
        this.followNamespace(namespace, cached !== undefined);
        if (cached) this.onPodChange.tell(namespace, name, this.asRead(cached));
        else this.onPodGone.tell(namespace, name);
      },
      onRestart: () => metrics.watchRestarts.inc({ resource: 'pods' }),
      onUnreadable: () => metrics.unreadableObjects.inc({ resource: 'pods' }),
      log,
    });
    // The policies, or a namespace's labels, changed: the scope's Pods are told again, as they are read now.
    this.policyStore.onScopeChange.add((scope) => {
      for (const key of keysInScope(scope, this.pods)) {
        const [namespace, name] = splitKey(key);
        this.onPodChange.tell(namespace, name, this.asRead(this.pods.get(key)!));
      }
    });
  }

  /** A Pod of the namespace came or went: the namespace's policies are read in full when it first has Pods here, and dropped when it has none. */
  private followNamespace(namespace: string, podCame: boolean): void {
    if (podCame && !this.podNamespaces.has(namespace)) {
      this.podNamespaces.add(namespace);
      this.readNamespacePolicies(namespace);
    } else if (!podCame && this.pods.keysIn(namespace).length === 0 && this.podNamespaces.delete(namespace)) {
      this.policyStore.namespaceNotNeeded(namespace);
    }
  }

  private readNamespacePolicies(namespace: string): void {
    this.policyStore.namespaceNeeded(namespace).catch((err: unknown) => {
      this.log.warn('the namespace\'s sidecar policies could not be read; trying again', { namespace, error: errorMessage(err), retryInMs: NAMESPACE_POLICIES_RETRY_MS });
      setTimeout(() => {
        if (this.podNamespaces.has(namespace)) this.readNamespacePolicies(namespace);
      }, NAMESPACE_POLICIES_RETRY_MS).unref();
    });
  }

  /** Whether the sidecar rules have anything to decide for the Pod: its markers, or a policy that may mark a container. */
  private concerns(termination: PodProjection): boolean {
    return mayNeedSidecarTermination(termination) || this.policies.mayMatch(termination);
  }

  /** The Pod as read: the rules' projection only where they may concern it, with the sidecar policies laid over (read when used: policies change). */
  private asRead(kept: NodePod): NodePod {
    return kept.termination ? { pod: kept.pod, ...(this.concerns(kept.termination) ? { termination: this.policies.apply(kept.termination) } : {}) } : kept;
  }

  /** The Pod as the Reconciler reads it. */
  agentPod(namespace: string, name: string): AgentPod | undefined {
    return this.pods.get(namespacedKey(namespace, name))?.pod;
  }

  /** The Pod's projection for the sidecar rules; undefined for Pods they do not concern. */
  sidecarPod(namespace: string, name: string): PodProjection | undefined {
    const kept = this.pods.get(namespacedKey(namespace, name));
    return kept && this.asRead(kept).termination;
  }

  /** Whether the policy watches are current (PolicyStore.isCurrent): the fast path acts on a policy only then. */
  policiesCurrent(): boolean {
    return this.policyStore.isCurrent();
  }

  /** The same, found by a container ID (`<runtime>://<id>`) that kubelet has reported. */
  sidecarPodOfContainer(containerID: string): PodProjection | undefined {
    const kept = this.pods.byIndex(containerID)[0];
    return kept && this.asRead(kept).termination;
  }

  /** The node's active requests, in a namespace or in all. */
  requests(namespace?: string): ContainerRecreateRequest[] {
    return this.active.list(namespace);
  }

  /** The Pod's active requests on this node, by its uid. */
  activeRequests(namespace: string, podUid: string): ContainerRecreateRequest[] {
    return this.active.byIndex(podUid).filter((r) => r.metadata.namespace === namespace);
  }

  /** Whether the named Pod has an active request on this node. */
  hasRequests(namespace: string, name: string): boolean {
    return this.active.list(namespace).some((r) => r.spec?.podName === name);
  }

  /** Why the watches are not ready, or undefined. */
  notReadyReason(): string | undefined {
    if (!this.pods.isSynced()) return 'pod watch not synced';
    if (!this.active.isSynced()) return 'request watch not synced';
    if (!this.policyStore.isSynced()) return 'policy watches not synced';
    return undefined;
  }

  start(): void {
    this.policyStore.start();
    this.pods.start();
    this.active.start();
  }

  stop(): void {
    this.policyStore.stop();
    this.pods.stop();
    this.active.stop();
  }
}
