// The cluster side of ContainerRecreateRequests: admits new ones, completes the ones that cannot
// run or ran out of time, unlabels and deletes finished ones, and handles unreadyGracePeriodSeconds.
import type { Clock } from '../common/clock.ts';
import { now } from '../common/clock.ts';
import { FirstTimes } from '../common/first-times.ts';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeApi } from '../common/kube/api.ts';
import { ignoreNotFound, isConflict, isNotFound } from '../common/kube/errors.ts';
import { getObject } from '../common/kube/client.ts';
import { isValidName, podPath } from '../common/kube/paths.ts';
import type { Logger } from '../common/log.ts';
import type { QueueResult } from '../common/queue.ts';
import type { EventRecorder } from '../common/events.ts';
import { decideLifecycle, decideReadiness, needsPod } from './lifecycle.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { LifecycleAction, ReadinessAction } from './lifecycle.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { completedStatus, LABEL_ACTIVE, READINESS_CONDITION, READINESS_FINALIZER, requestPath } from '../api/container-recreate-request.ts';
import { namespacedKey, splitKey } from '../common/informer.ts';

export interface RequestsControllerDeps {
  /** Reads Pods; patches requests and Pod status; deletes requests. */
  client: Pick<KubeApi, 'get' | 'patch' | 'delete'>;
  events: EventRecorder;
  cachedRequest: (namespace: string, name: string) => ContainerRecreateRequest | undefined;
  log: Logger;
  onAction?: (action: string) => void;
  now?: Clock;
}

/** Pods told about a refused request, remembered so each gets one Warning: bounded, oldest forgotten. */
const MAX_REFUSAL_PODS = 10_000;

export class RequestsController {
  private readonly deps: RequestsControllerDeps;
  private readonly now: Clock;
  private readonly refusalTold = new FirstTimes(MAX_REFUSAL_PODS);

  constructor(deps: RequestsControllerDeps) {
    this.deps = deps;
    this.now = deps.now ?? now;
  }

  async reconcile(key: string): Promise<QueueResult | void> {
    const [namespace, name] = splitKey(key);
    const crr = this.deps.cachedRequest(namespace, name);
    if (!crr) return;
    const pod = needsPod(crr) ? await this.readPod(namespace, crr.spec.podName) : undefined;

    const readiness = decideReadiness(crr, pod);
    if (readiness.kind !== 'none') {
      await this.applyReadiness(crr, readiness);
      // Finalizer and readiness changes come back through the watch; decide the rest from there.
      return;
    }
    const action = decideLifecycle(crr, pod, this.now());
    await this.apply(crr, action, pod);
    return action.kind === 'none' && action.requeueAfterMs !== undefined ? { requeueAfterMs: action.requeueAfterMs } : undefined;
  }

  /** The Pod, or undefined when there is none, or when the name cannot be one (the request is then completed unread). */
  private readPod(namespace: string, name: string): Promise<V1Pod | undefined> {
    if (!isValidName(name)) return Promise.resolve(undefined);
    return getObject<V1Pod>(this.deps.client, podPath(namespace, name), 'Pod').catch(ignoreNotFound);
  }

  /** One Warning per Pod, however many requests that do not match it are made. */
  private warnRefused(crr: ContainerRecreateRequest, pod: V1Pod, message: string): void {
    const ref = { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' };
    if (!this.refusalTold.first(ref.uid)) return;
    this.deps.events.emit(ref, { type: 'Warning', reason: EVENT_REASONS.requestRefused, message: `ContainerRecreateRequest ${crr.metadata.name}: ${message}` });
  }

  /**
   * Each write carries the cached resourceVersion (the delete, the uid). A conflict means the cache is
   * behind a version the watch will deliver, which queues the request again: it is not retried from
   * the stale copy, which under load (an API server slow to send big requests) only conflicts again,
   * each try costing the server a read of the whole object.
   */
  private async apply(crr: ContainerRecreateRequest, action: LifecycleAction, pod: V1Pod | undefined): Promise<void> {
    try {
      await this.applyLifecycle(crr, action, pod);
    } catch (err) {
      if (!isConflict(err)) throw err;
      this.deps.log.debug('request changed since it was read; decided again when the watch brings it', {
        request: namespacedKey(crr.metadata.namespace!, crr.metadata.name!), action: action.kind,
      });
    }
  }

  private async applyLifecycle(crr: ContainerRecreateRequest, action: LifecycleAction, pod: V1Pod | undefined): Promise<void> {
    if (action.kind === 'none') return;
    const ref = namespacedKey(crr.metadata.namespace!, crr.metadata.name!);
    this.deps.onAction?.(action.kind);
    switch (action.kind) {
      case 'admit':
        await this.patch(crr, { metadata: { labels: action.labels }, spec: { containers: action.containers } });
        this.deps.log.info('request admitted', { request: ref, node: Object.values(action.labels)[0] });
        return;
      case 'complete': {
        const states = crr.status?.containerRecreateStates ?? crr.spec.containers.map((c) => ({ name: c.name, phase: 'Pending' as const }));
        const status = completedStatus(this.now(), { message: action.message, containerRecreateStates: states });
        await this.deps.client.patch(this.path(crr, 'status'), { metadata: { resourceVersion: crr.metadata.resourceVersion }, status }, 'merge');
        this.deps.log.info('request completed', { request: ref, message: action.message });
        if (action.refused && pod) this.warnRefused(crr, pod, action.message);
        return;
      }
      case 'deactivate':
        await this.patch(crr, { metadata: { labels: { [LABEL_ACTIVE]: null } } });
        return;
      case 'delete':
        try {
          await this.deps.client.delete(this.path(crr), { preconditions: { uid: crr.metadata.uid } });
          this.deps.log.info('request deleted after its TTL', { request: ref });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        return;
    }
  }

  private async applyReadiness(crr: ContainerRecreateRequest, action: ReadinessAction): Promise<void> {
    switch (action.kind) {
      case 'addFinalizer':
      case 'removeFinalizer': {
        // The cache keeps only our finalizer, and a merge patch replaces the whole list: the others
        // are read from the API (a list by name: the controller may list requests, not get one).
        // The cached resourceVersion still guards the write (409: decided again).
        const { namespace, name } = crr.metadata;
        const found = await this.deps.client.get<{ items: ContainerRecreateRequest[] }>(requestPath(namespace), { fieldSelector: `metadata.name=${name}`, limit: 1 });
        const stored = found.items.find((r) => r.metadata.name === name);
        if (!stored) return;
        const others = (stored.metadata.finalizers ?? []).filter((f) => f !== READINESS_FINALIZER);
        await this.patch(crr, { metadata: { finalizers: action.kind === 'addFinalizer' ? [...others, READINESS_FINALIZER] : others } });
        return;
      }
      case 'setPodReady': {
        const condition = {
          type: READINESS_CONDITION,
          status: action.ready ? 'True' : 'False',
          lastTransitionTime: new Date(this.now()).toISOString(),
          reason: action.ready ? 'ContainerRecreateFinished' : 'ContainerRecreating',
          message: `request ${crr.metadata.name}`,
        };
        // The uid is a precondition: a Pod deleted and recreated under the name since it was read is not touched (409).
        const body = { metadata: { uid: action.podUid }, status: { conditions: [condition] } };
        await this.deps.client.patch(podPath(crr.metadata.namespace, crr.spec.podName, 'status'), body, 'strategic');
        return;
      }
      case 'none':
        return;
    }
  }

  private patch(crr: ContainerRecreateRequest, body: { metadata?: object; spec?: object }): Promise<unknown> {
    // The resourceVersion makes this a compare-and-swap: a conflict retries from fresh state.
    const withVersion = { ...body, metadata: { ...body.metadata, resourceVersion: crr.metadata.resourceVersion } };
    return this.deps.client.patch(this.path(crr), withVersion, 'merge');
  }

  private path(crr: ContainerRecreateRequest, subresource?: string): string {
    return requestPath(crr.metadata.namespace, crr.metadata.name, subresource);
  }
}
