// Each work queue's figures in client-go's shape (workqueue_*{name}), and its reconcile loop's
// failures in controller-runtime's (reconcile_errors_total{controller}), under the program's prefix.
// A queue is its reconcile loop here, so one name serves as both labels.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { QueueObserver, QueueState, WorkQueue } from './queue.ts';

/**
 * From a millisecond (the queue's clock) to five minutes: a key waits from nothing to minutes under
 * a burst, and a handler may hold its key through a preStop hook and a grace period.
 */
const QUEUE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * Registers the metrics; returns, for a queue's name, the `observe` option of its WorkQueue. The
 * gauges read each queue at scrape time; a queue not (yet) made has no series (the controller's
 * standby replicas).
 */
export function queueMetrics(registry: Registry, prefix: string): (name: string) => (queue: WorkQueue) => QueueObserver {
  const queues = new Map<string, WorkQueue>();
  const labelNames = ['name'] as const;
  const stateGauge = (metric: string, help: string, field: keyof QueueState) =>
    new Gauge({
      name: `${prefix}_workqueue_${metric}`, help, labelNames, registers: [registry],
      collect() {
        this.reset();
        for (const [name, queue] of queues) this.set({ name }, queue.state()[field]);
      },
    });
  stateGauge('depth', 'Keys waiting in the queue (not counting those waiting out a delay or a backoff).', 'depth');
  stateGauge('unfinished_work_seconds', 'How long the keys being processed have been, together: a stuck handler makes it grow without bound.', 'unfinishedWorkSeconds');
  stateGauge('longest_running_processor_seconds', 'How long the key processed longest has been.', 'longestRunningSeconds');
  const adds = new Counter({ name: `${prefix}_workqueue_adds_total`, help: 'Keys queued (one already waiting is not queued twice).', labelNames, registers: [registry] });
  const retries = new Counter({ name: `${prefix}_workqueue_retries_total`, help: 'Keys queued again after a backoff because their handler failed.', labelNames, registers: [registry] });
  const queued = new Histogram({
    name: `${prefix}_workqueue_queue_duration_seconds`, help: 'Time a key waited in the queue before a worker took it.',
    labelNames, buckets: QUEUE_BUCKETS, registers: [registry],
  });
  const worked = new Histogram({
    name: `${prefix}_workqueue_work_duration_seconds`, help: 'Time from a worker taking a key to its handler settling.',
    labelNames, buckets: QUEUE_BUCKETS, registers: [registry],
  });
  const reconcileErrors = new Counter({
    name: `${prefix}_reconcile_errors_total`,
    help: 'Reconciles that failed (and are retried after a backoff), by reconcile loop: the name of its work queue.',
    labelNames: ['controller'] as const, registers: [registry],
  });
  return (name) => (queue) => {
    queues.set(name, queue);
    // At 0 from the start, so that a rate over the first failure is not lost.
    for (const counter of [adds, retries]) counter.inc({ name }, 0);
    reconcileErrors.inc({ controller: name }, 0);
    return {
      added: () => adds.inc({ name }),
      started: (seconds) => queued.observe({ name }, seconds),
      finished: (seconds) => worked.observe({ name }, seconds),
      failed: () => {
        retries.inc({ name });
        reconcileErrors.inc({ controller: name });
      },
    };
  };
}
