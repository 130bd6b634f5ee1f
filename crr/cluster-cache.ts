// The controller's view of the cluster's requests and Pods, from two watches: every request (indexed
// by the Pod uids it names) and the Pods the sidecar rules or a policy may concern (compact projections). Readers
// ask it; who must hear of a change subscribes, in the order subscribed.
import { now } from '../common/clock.ts';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeApi, UnreadableObject } from '../common/kube/api.ts';
import { podPath } from '../common/kube/paths.ts';
import type { Logger } from '../common/log.ts';
import { Listeners } from '../common/listeners.ts';
import { namespacedKey, ProjectingInformer } from '../common/informer.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { requestPath } from '../api/container-recreate-request.ts';
import { mayNeedSidecarTermination } from '../rules/classify.ts';
import { mayBeHeldByUnmarkedSidecar } from '../rules/unmarked-sidecars.ts';
import type { PodProjection } from '../rules/projection.ts';
import { projectPod } from '../rules/projection.ts';
import type { WatchedPolicy } from '../rules/policies.ts';
import { POLICY_WATCH, PoliciesInEffect, policyMayYetMark } from '../rules/policies.ts';
import type { ChangedScope } from '../common/policy-store.ts';
import { keysInScope, PolicyStore } from '../common/policy-store.ts';
import { keptRequest, REQUEST_PAGE_SIZE, requestPodUids } from '../rules/requests.ts';
import type { ControllerMetrics } from './metrics.ts';
import type { WatchedPod } from './sidecar-controller.ts';

export interface ClusterCacheDeps {
  client: Pick<KubeApi, 'get' | 'watch'>;
  metrics: Pick<ControllerMetrics, 'watchRestarts' | 'unreadableObjects'>;
  log: Logger;
}

export class ClusterCache {
  private readonly requestInformer: ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>;
  private readonly podInformer: ProjectingInformer<V1Pod, WatchedPod>;
  private readonly informers: readonly { start(): void; stop(): void; isSynced(): boolean }[];
  /** A request was added or changed. */
  readonly onRequestChange = new Listeners<[key: string, request: ContainerRecreateRequest]>();
  /** A Pod of interest was added or changed, or the policies that apply to it did. */
  readonly onPodChange = new Listeners<[key: string]>();
  /** A Pod is of no interest (any more): deleted, finished, or no longer picked by a policy. */
  readonly onPodGone = new Listeners<[key: string]>();
  /** A Pod could not be read (served over the answer cap, or not JSON): it is left out as if deleted. */
  readonly onPodUnreadable = new Listeners<[pod: UnreadableObject]>();
  /** The sidecar policies (R54) as watched, and as in effect. */
  readonly policyStore: PolicyStore<WatchedPolicy>;
  readonly policies: PoliciesInEffect;

  constructor({ client, metrics, log }: ClusterCacheDeps) {
    this.requestInformer = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
      client,
      path: requestPath(),
      project: keptRequest,
      pageSize: REQUEST_PAGE_SIZE,
      // By the uid in the label and in the name: a request that took our name is found whatever its labels.
      indexBy: requestPodUids,
      onChange: (key, r) => {
        if (!r) return;
        this.onRequestChange.tell(key, r);
      },
      onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
      onUnreadable: () => metrics.unreadableObjects.inc({ resource: 'containerrecreaterequests' }),
      log,
    });
    this.policyStore = new PolicyStore({
      client, log, ...POLICY_WATCH,
      onRestart: (resource) => metrics.watchRestarts.inc({ resource }),
      onUnreadable: (resource) => metrics.unreadableObjects.inc({ resource }),
    });
    this.policies = new PoliciesInEffect(this.policyStore);
    // Kept, as a compact projection: the Pods that may need their sidecars stopped (by their markers
    // or a policy, R54), or be held by a well-known sidecar nobody marked (R52), and every Job Pod
    // not finished, which a policy may yet mark: a policy's change is then decided from here,
    // without listing Pods. Only the first are of interest (`concerns`); the API server already
    // leaves out restartPolicy Always Pods (most of a cluster).
    this.podInformer = new ProjectingInformer<V1Pod, WatchedPod>({
      client,
      path: podPath(),
      fieldSelector: 'spec.restartPolicy!=Always',
      project: (p) => {
        const pod = projectPod(p);
        return this.concerns(pod) || policyMayYetMark(pod) ? { pod, receivedAtMs: now() } : undefined;
      },
      onChange: (key, cached) => {
        (cached && this.concerns(cached.pod) ? this.onPodChange : this.onPodGone).tell(key);
      },
      onRestart: () => metrics.watchRestarts.inc({ resource: 'pods' }),
      onUnreadable: (pod) => {
        metrics.unreadableObjects.inc({ resource: 'pods' });
        this.onPodUnreadable.tell(pod);
      },
      log,
    });
    this.policyStore.onScopeChange.add((scope) => this.decideAgain(scope));
    this.informers = [this.requestInformer, this.policyStore, this.podInformer];
  }

  request(namespace: string, name: string): ContainerRecreateRequest | undefined {
    return this.requestInformer.get(namespacedKey(namespace, name));
  }

  /** The Pod, when it is of interest. */
  pod(key: string): WatchedPod | undefined {
    const cached = this.podInformer.get(key);
    return cached && this.concerns(cached.pod) ? cached : undefined;
  }

  /** The requests of the namespace that name the Pod's uid (in the label or in the name). */
  requestsForPod(namespace: string, uid: string): ContainerRecreateRequest[] {
    return this.requestInformer.byIndex(uid).filter((r) => r.metadata.namespace === namespace);
  }

  requestKeys(): IterableIterator<string> {
    return this.requestInformer.keys();
  }

  /** The keys of the Pods of interest. */
  *podKeys(): IterableIterator<string> {
    for (const key of this.podInformer.keys()) if (this.pod(key)) yield key;
  }

  /** Whether the controller has anything to decide for the Pod: its markers, a well-known sidecar, or a policy that may mark one. */
  private concerns(pod: PodProjection): boolean {
    return mayNeedSidecarTermination(pod) || mayBeHeldByUnmarkedSidecar(pod) || this.policies.mayMatch(pod);
  }

  /**
   * The policies, or a namespace's labels, changed: the kept Pods of the scope are decided again,
   * from the cache (a policy may mark a Pod it did not, or no longer mark one). Their wait is
   * counted from now: the change is what they are decided on.
   */
  private decideAgain(scope: ChangedScope): void {
    for (const key of keysInScope(scope, this.podInformer)) {
      const cached = this.podInformer.get(key)!;
      if (!this.concerns(cached.pod)) {
        this.onPodGone.tell(key);
        continue;
      }
      cached.receivedAtMs = now();
      this.onPodChange.tell(key);
    }
  }

  isSynced(): boolean {
    return this.informers.every((informer) => informer.isSynced());
  }

  /** Starts the watches: the requests first. */
  start(): void {
    for (const informer of this.informers) informer.start();
  }

  stop(): void {
    for (const informer of this.informers) informer.stop();
  }
}
