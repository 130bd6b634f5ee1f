// Events on a Pod, where `kubectl describe pod` shows them to the user. They are sent in the
// background, a few at a time: an event must never delay a stop or a request, and a burst of them
// must not crowd out the API requests that do the work.
import { now } from './clock.ts';
import type { KubeApi } from './kube/api.ts';
import { resourcePath } from './kube/paths.ts';
import type { Logger } from './log.ts';
import { errorMessage } from './log.ts';
import type { UrgentWrites } from './urgent-writes.ts';
import { namespacedKey } from './informer.ts';

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

interface EventBody {
  metadata: { generateName: string; namespace: string };
  involvedObject: { apiVersion: 'v1'; kind: 'Pod'; namespace: string; name: string; uid: string };
  reason: string;
  [field: string]: unknown;
}

/** The client calls the recorder makes. */
export type EventsClient = Pick<KubeApi, 'create'>;

const IN_FLIGHT = 4;
/** Past this many waiting (by default), new events are dropped (and counted in the log) rather than kept in memory. */
export const MAX_WAITING_EVENTS = 1000;

export interface EventRecorderOptions {
  /** The node, for the events' source. */
  host?: string;
  /** Events hold back while any of these writes is in flight. */
  urgent?: UrgentWrites;
  /** How many events may wait (default MAX_WAITING_EVENTS). */
  maxWaiting?: number;
}

export class EventRecorder {
  private readonly client: EventsClient;
  private readonly component: string;
  private readonly host: string | undefined;
  private readonly log: Logger;
  private readonly waiting: EventBody[] = [];
  private inFlight = 0;
  private dropped = 0;
  private idle: (() => void)[] = [];
  private readonly urgent: UrgentWrites | undefined;
  private readonly maxWaiting: number;
  /** Waiting for the urgent writes in flight to end. */
  private holding = false;

  constructor(client: EventsClient, component: string, log: Logger, options: EventRecorderOptions = {}) {
    this.client = client;
    this.component = component;
    this.log = log;
    this.host = options.host;
    this.urgent = options.urgent;
    this.maxWaiting = options.maxWaiting ?? MAX_WAITING_EVENTS;
  }

  /** Queues the event; a failure to record it is logged, never thrown. */
  emit(pod: PodRef, event: PodEvent): void {
    if (this.waiting.length >= this.maxWaiting) {
      if (this.dropped++ % 100 === 0) this.log.warn('events backlog full, dropping events', { dropped: this.dropped, reason: event.reason });
      return;
    }
    this.waiting.push(this.body(pod, event, new Date(now()).toISOString()));
    this.pump();
  }

  /** Resolves once every queued event was sent (or failed). */
  flushed(): Promise<void> {
    if (this.inFlight === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private pump(): void {
    if (this.holding || this.waiting.length === 0) return;
    if (this.urgent?.busy()) {
      this.holding = true;
      void this.urgent.settled().then(() => {
        this.holding = false;
        this.pump();
      });
      return;
    }
    while (this.inFlight < IN_FLIGHT && this.waiting.length > 0) {
      const body = this.waiting.shift()!;
      this.inFlight++;
      this.client.create(resourcePath('v1', 'events', body.metadata.namespace), body)
        .catch((err: unknown) => this.log.warn('could not record event', {
          pod: namespacedKey(body.metadata.namespace, body.involvedObject.name), reason: body.reason, error: errorMessage(err),
        }))
        .finally(() => {
          this.inFlight--;
          this.pump();
          if (this.inFlight === 0 && this.waiting.length === 0) for (const resolve of this.idle.splice(0)) resolve();
        });
    }
  }

  private body(pod: PodRef, event: PodEvent, now: string): EventBody {
    return {
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
    };
  }
}
