// Events on a Pod, where `kubectl describe pod` shows them to the user.
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from './log.ts';
import { errorMessage } from './log.ts';

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface PodEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export class EventRecorder {
  private readonly core: k8s.CoreV1Api;
  private readonly component: string;
  private readonly host: string | undefined;
  private readonly log: Logger;

  constructor(core: k8s.CoreV1Api, component: string, log: Logger, host?: string) {
    this.core = core;
    this.component = component;
    this.log = log;
    this.host = host;
  }

  /** Records the event; a failure is logged, never thrown: an event is not worth failing a stop for. */
  async emit(pod: PodRef, event: PodEvent): Promise<void> {
    const now = new Date();
    try {
      await this.core.createNamespacedEvent({
        namespace: pod.namespace,
        body: {
          metadata: { generateName: `${pod.name}.`, namespace: pod.namespace },
          involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: pod.namespace, name: pod.name, uid: pod.uid },
          type: event.type,
          reason: event.reason,
          message: event.message.slice(0, 1024),
          source: { component: this.component, host: this.host },
          reportingComponent: this.component,
          reportingInstance: this.host ?? this.component,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    } catch (err) {
      this.log.warn('could not record event', { pod: `${pod.namespace}/${pod.name}`, reason: event.reason, error: errorMessage(err) });
    }
  }
}
