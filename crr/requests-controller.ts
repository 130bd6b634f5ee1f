// The cluster side of ContainerRecreateRequests: admits new ones, completes the ones that cannot
// run or ran out of time, unlabels and deletes finished ones, and handles unreadyGracePeriodSeconds.
import type * as k8s from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Logger } from '../common/log.ts';
import { statusCode } from '../common/log.ts';
import type { QueueResult } from '../common/queue.ts';
import { decideLifecycle, decideReadiness } from './lifecycle.ts';
import type { LifecycleAction, ReadinessAction } from './lifecycle.ts';
import type { ContainerRecreateRequest, CRRStatus } from './types.ts';
import { GROUP, LABEL_ACTIVE, PLURAL, READINESS_CONDITION, READINESS_FINALIZER, VERSION } from './types.ts';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const strategicPatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

export interface RequestsControllerDeps {
  core: k8s.CoreV1Api;
  custom: k8s.CustomObjectsApi;
  cachedRequest: (namespace: string, name: string) => ContainerRecreateRequest | undefined;
  log: Logger;
  onAction?: (action: string) => void;
  now?: () => number;
}

export class RequestsController {
  private readonly deps: RequestsControllerDeps;
  private readonly now: () => number;

  constructor(deps: RequestsControllerDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  async reconcile(key: string): Promise<QueueResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const crr = this.deps.cachedRequest(namespace, name);
    if (!crr) return;
    const pod = await this.readPod(namespace, crr.spec.podName);

    const readiness = decideReadiness(crr, pod);
    if (readiness.kind !== 'none') {
      await this.applyReadiness(crr, readiness);
      // Finalizer and readiness changes come back through the watch; decide the rest from there.
      return;
    }
    const action = decideLifecycle(crr, pod, this.now());
    await this.apply(crr, action);
    return action.kind === 'none' && action.requeueAfterMs !== undefined ? { requeueAfterMs: action.requeueAfterMs } : undefined;
  }

  private async readPod(namespace: string, name: string): Promise<k8s.V1Pod | undefined> {
    try {
      return await this.deps.core.readNamespacedPod({ namespace, name });
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  private async apply(crr: ContainerRecreateRequest, action: LifecycleAction): Promise<void> {
    if (action.kind === 'none') return;
    const ref = `${crr.metadata.namespace}/${crr.metadata.name}`;
    this.deps.onAction?.(action.kind);
    switch (action.kind) {
      case 'admit':
        await this.patch(crr, { metadata: { labels: action.labels }, spec: { containers: action.containers } });
        this.deps.log.info('request admitted', { request: ref, node: Object.values(action.labels)[0] });
        return;
      case 'complete': {
        const states = crr.status?.containerRecreateStates ?? crr.spec.containers.map((c) => ({ name: c.name, phase: 'Pending' as const }));
        const status: CRRStatus = { phase: 'Completed', completionTime: new Date(this.now()).toISOString(), message: action.message, containerRecreateStates: states };
        await this.deps.custom.patchNamespacedCustomObjectStatus({ ...this.target(crr), body: { metadata: { resourceVersion: crr.metadata.resourceVersion }, status } }, mergePatch);
        this.deps.log.info('request completed', { request: ref, message: action.message });
        return;
      }
      case 'deactivate':
        await this.patch(crr, { metadata: { labels: { [LABEL_ACTIVE]: null } } });
        return;
      case 'delete':
        try {
          await this.deps.custom.deleteNamespacedCustomObject({ ...this.target(crr), body: { preconditions: { uid: crr.metadata.uid } } });
          this.deps.log.info('request deleted after its TTL', { request: ref });
        } catch (err) {
          if (statusCode(err) !== 404) throw err;
        }
        return;
    }
  }

  private async applyReadiness(crr: ContainerRecreateRequest, action: ReadinessAction): Promise<void> {
    const finalizers = crr.metadata.finalizers ?? [];
    switch (action.kind) {
      case 'addFinalizer':
        await this.patch(crr, { metadata: { finalizers: [...finalizers, READINESS_FINALIZER] } });
        return;
      case 'removeFinalizer':
        await this.patch(crr, { metadata: { finalizers: finalizers.filter((f) => f !== READINESS_FINALIZER) } });
        return;
      case 'setPodReady': {
        const condition = {
          type: READINESS_CONDITION,
          status: action.ready ? 'True' : 'False',
          lastTransitionTime: new Date(this.now()).toISOString(),
          reason: action.ready ? 'ContainerRecreateFinished' : 'ContainerRecreating',
          message: `request ${crr.metadata.name}`,
        };
        await this.deps.core.patchNamespacedPodStatus({
          namespace: crr.metadata.namespace!, name: crr.spec.podName, body: { status: { conditions: [condition] } },
        }, strategicPatch);
        return;
      }
      case 'none':
        return;
    }
  }

  private patch(crr: ContainerRecreateRequest, body: { metadata?: object; spec?: object }): Promise<unknown> {
    // The resourceVersion makes this a compare-and-swap: a conflict retries from fresh state.
    const withVersion = { ...body, metadata: { ...body.metadata, resourceVersion: crr.metadata.resourceVersion } };
    return this.deps.custom.patchNamespacedCustomObject({ ...this.target(crr), body: withVersion }, mergePatch);
  }

  private target(crr: ContainerRecreateRequest) {
    return { group: GROUP, version: VERSION, plural: PLURAL, namespace: crr.metadata.namespace!, name: crr.metadata.name! };
  }
}
