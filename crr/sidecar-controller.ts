// The Job sidecar terminator's I/O around the pure decide(): reads the compact Pod, its node's kind
// and its requests, and carries out the one action decided (create a request, swap images, patch
// the phase), emitting each event once.
import type { KubeClient } from '../common/kube/client.ts';
import { podPath } from '../common/kube/paths.ts';
import type { EventRecorder } from '../common/events.ts';
import type { Logger } from '../common/log.ts';
import { statusCode } from '../common/log.ts';
import type { QueueResult } from '../common/queue.ts';
import type { ControllerMetrics } from './metrics.ts';
import type { NodeKind } from './sidecar/classify.ts';
import { decide } from './sidecar/decide.ts';
import type { Decision } from './sidecar/decision.ts';
import type { PodEvent } from './sidecar/events.ts';
import type { PodProjection } from './sidecar/projection.ts';
import type { SidecarTerminatorOptions } from './sidecar/requests.ts';
import { projectRequest } from './sidecar/requests.ts';
import type { ContainerRecreateRequest } from './types.ts';
import { requestPath } from './types.ts';

/** A watched Pod: its projection and when the update that produced it arrived. */
export interface CachedPod {
  pod: PodProjection;
  receivedAtMs: number;
}

export interface SidecarControllerDeps {
  client: KubeClient;
  cachedPod: (key: string) => CachedPod | undefined;
  requestsForPod: (namespace: string, podUid: string) => ContainerRecreateRequest[];
  /** The kind of a node; throws when it cannot be known (the Pod is then retried, never guessed). */
  nodeKind: (nodeName: string) => Promise<NodeKind>;
  events: EventRecorder;
  metrics: ControllerMetrics;
  options: SidecarTerminatorOptions;
  log: Logger;
  now?: () => number;
}

export class SidecarController {
  private readonly deps: SidecarControllerDeps;
  private readonly now: () => number;
  /** Event keys already emitted, by Pod uid: decisions are recomputed often, events go out once. */
  private readonly emitted = new Map<string, Set<string>>();

  constructor(deps: SidecarControllerDeps) {
    this.deps = deps;
    this.now = deps.now ?? Date.now;
  }

  /** Forgets what was emitted for a Pod that is gone. */
  forget(podUid: string): void {
    this.emitted.delete(podUid);
  }

  async reconcile(key: string): Promise<QueueResult | void> {
    const cached = this.deps.cachedPod(key);
    if (!cached?.pod.nodeName) return;
    const { pod } = cached;
    const node = await this.deps.nodeKind(pod.nodeName!);
    const requests = this.deps.requestsForPod(pod.namespace, pod.uid).map((r) => projectRequest(r, pod.uid));
    const decision = decide(pod, node, { requests, nowMs: this.now(), options: this.deps.options });
    this.deps.metrics.decisions.inc({ outcome: outcomeLabel(decision) });
    this.deps.log.debug('decided', { pod: key, node, decision: decision.kind, message: decision.message });

    switch (decision.kind) {
      case 'notHandled':
      case 'wait':
        this.emit(pod, decision.events);
        return;
      case 'createRequest':
        if (decision.delayMs > 0) return { requeueAfterMs: decision.delayMs };
        // Already there: the node's agent saw the mains exit first (it then gave the event), or a
        // previous leader or try created it; the watch brings it.
        if (!(await this.createRequest(decision.request))) return;
        this.deps.metrics.requestsCreated.inc();
        if (decision.retryOf) this.deps.metrics.retries.inc();
        break;
      case 'swapImages':
        // The resourceVersion makes this one compare-and-swap update: a conflict re-decides.
        await this.deps.client.patch(podPath(pod.namespace, pod.name), {
          metadata: { resourceVersion: pod.resourceVersion }, spec: { containers: decision.swaps.map((s) => ({ name: s.container, image: s.to })) },
        }, 'strategic');
        this.deps.metrics.imagePatches.inc();
        break;
      case 'patchPhase':
        await this.deps.client.patch(podPath(pod.namespace, pod.name, 'status'), { metadata: { resourceVersion: pod.resourceVersion }, ...decision.statusPatch }, 'strategic');
        this.deps.metrics.phasePatches.inc({ phase: decision.phase });
        break;
    }
    this.deps.metrics.actionLatency.observe({ action: decision.kind }, (this.now() - cached.receivedAtMs) / 1000);
    this.deps.log.info(decision.message, { pod: key, action: decision.kind });
    this.emit(pod, decision.events);
  }

  /** Resolves false when a request of that name already exists. */
  private async createRequest(request: ContainerRecreateRequest): Promise<boolean> {
    try {
      await this.deps.client.create(requestPath(request.metadata.namespace), request);
      return true;
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
      return false;
    }
  }

  private emit(pod: PodProjection, events: PodEvent[]): void {
    let seen = this.emitted.get(pod.uid);
    for (const event of events) {
      if (seen?.has(event.key)) continue;
      if (!seen) this.emitted.set(pod.uid, (seen = new Set()));
      seen.add(event.key);
      this.deps.events.emit(pod, event);
    }
  }
}

function outcomeLabel(decision: Decision): string {
  return decision.kind === 'notHandled' || decision.kind === 'wait' ? `${decision.kind}:${decision.reason}` : decision.kind;
}
