// A keyed work queue in the manner of client-go's: a key is queued at most once, never processed by
// two workers at once, re-run if it was added while being processed, and retried with backoff
// when its handler fails. Keys a periodic resync adds wait behind every other key, so a pass over
// thousands of objects never delays the one that just changed. A handler may give its worker back
// before it settles (`release`), when what is left of its work must not hold up other keys; its key
// stays busy until it settles. It tells an observer what client-go's work queues tell their
// metrics (common/queue-metrics.ts).
import type { Clock } from './clock.ts';
import { now } from './clock.ts';

/**
 * The longest delay the queue ever waits before re-running a key (one hour). Node's timers hold at
 * most 2^31-1 ms (~24.8 days) and fire after 1 ms for anything larger, so an unclamped far deadline
 * becomes a busy loop; past an hour the periodic resync re-checks the object anyway.
 */
export const MAX_REQUEUE_MS = 60 * 60 * 1000;

/** A delay the queue can safely hand to setTimeout: NaN and negatives become 0, at most MAX_REQUEUE_MS. */
export function clampDelay(ms: number): number {
  if (Number.isNaN(ms) || ms <= 0) return 0;
  return Math.min(ms, MAX_REQUEUE_MS);
}

export interface QueueResult {
  /** Process the key again after this long even if nothing changes (clamped to MAX_REQUEUE_MS). */
  requeueAfterMs?: number;
}

/** Given to each run of the handler. */
export interface QueueWorker {
  /**
   * Gives the worker to the next key now; the key itself is not run again until this run settles
   * (a later add re-runs it then). Calling it again does nothing.
   */
  release(): void;
}

export type QueueHandler = (key: string, worker: QueueWorker) => Promise<QueueResult | void>;

/** What a queue tells of its work as it happens, as client-go's work queues tell their metrics. */
export interface QueueObserver {
  /** A key was queued (not one already waiting: those are deduplicated). */
  added(): void;
  /** A key was handed to a worker after waiting this long since it was queued. */
  started(waitedSeconds: number): void;
  /** A key's handler settled after running this long. */
  finished(workedSeconds: number): void;
  /** A key's handler failed: it is retried after a backoff. */
  failed(): void;
}

/** What a queue is doing now, read when the metrics are scraped. */
export interface QueueState {
  /** Keys waiting to be processed (not counting delayed ones). */
  depth: number;
  /** How long the keys being processed have been, together. */
  unfinishedWorkSeconds: number;
  /** How long the key processed longest has been. */
  longestRunningSeconds: number;
}

export interface WorkQueueOptions {
  workers: number;
  handler: QueueHandler;
  onError: (key: string, err: unknown, retryInMs: number) => void;
  /** The first retry delay after a failure (default 200 ms); doubles with each further failure. */
  baseBackoffMs?: number;
  /** The longest retry delay (default 60 s; never more than MAX_REQUEUE_MS). */
  maxBackoffMs?: number;
  /** The clock that orders delayed adds and times the work (default the system's). */
  now?: Clock;
  /** Called once with the queue: what it returns is told of the queue's work. */
  observe?: (queue: WorkQueue) => QueueObserver;
}

export class WorkQueue {
  /** Keys waiting, with when each was queued and whether only a resync asked for it. */
  private readonly pending = new Map<string, { at: number; resync: boolean }>();
  private readonly order: string[] = [];
  /** Keys only a resync asked for, taken when `order` is empty; an entry whose key left `pending`, or was promoted, is skipped. */
  private readonly resyncOrder: string[] = [];
  /** Keys being processed, with when each started. */
  private readonly active = new Map<string, number>();
  /** Keys added while being processed, with when: they are queued again when they settle. */
  private readonly dirty = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private running = 0;
  private stopped = false;
  private readonly options: Required<Omit<WorkQueueOptions, 'observe'>>;
  private idleWaiters: (() => void)[] = [];
  private readonly observer: QueueObserver | undefined;

  constructor(options: WorkQueueOptions) {
    this.options = {
      ...options,
      baseBackoffMs: clampDelay(options.baseBackoffMs ?? 200),
      maxBackoffMs: clampDelay(options.maxBackoffMs ?? 60_000),
      now: options.now ?? now,
    };
    this.observer = options.observe?.(this);
  }

  add(key: string): void {
    if (this.stopped || this.dirty.has(key)) return;
    const waiting = this.pending.get(key);
    if (waiting) {
      // Waiting behind a resync's keys: it changed since, so it goes in line with the others now.
      if (waiting.resync) this.enqueue(key, waiting.at);
      return;
    }
    const at = this.options.now();
    this.observer?.added();
    if (this.active.has(key)) this.dirty.set(key, at);
    else this.enqueue(key, at);
  }

  /**
   * Adds the key for a periodic resync: it is processed only when no other key waits. A key that is
   * waiting or being processed already is left as it is: that run looks at it anyway.
   */
  addForResync(key: string): void {
    // A key re-added while it runs (`dirty`) is active too.
    if (this.stopped || this.pending.has(key) || this.active.has(key)) return;
    this.observer?.added();
    this.pending.set(key, { at: this.options.now(), resync: true });
    this.resyncOrder.push(key);
    this.pump();
  }

  private enqueue(key: string, queuedAt: number): void {
    this.pending.set(key, { at: queuedAt, resync: false });
    this.order.push(key);
    this.pump();
  }

  /** The next key to process: any other key before a resync's. */
  private next(): string | undefined {
    if (this.order.length > 0) return this.order.shift();
    while (this.resyncOrder.length > 0) {
      const key = this.resyncOrder.shift()!;
      if (this.pending.get(key)?.resync) return key;
    }
    return undefined;
  }

  /**
   * Adds the key after `ms` (clamped to [0, MAX_REQUEUE_MS]; NaN counts as 0); an earlier pending
   * timer for the same key wins.
   */
  addAfter(key: string, requestedMs: number): void {
    if (this.stopped) return;
    const ms = clampDelay(requestedMs);
    if (ms === 0) return this.add(key);
    const at = this.options.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  state(): QueueState {
    const now = this.options.now();
    let unfinishedMs = 0;
    let longestMs = 0;
    for (const startedAt of this.active.values()) {
      const ms = Math.max(0, now - startedAt);
      unfinishedMs += ms;
      longestMs = Math.max(longestMs, ms);
    }
    return { depth: this.pending.size, unfinishedWorkSeconds: unfinishedMs / 1000, longestRunningSeconds: longestMs / 1000 };
  }

  stop(): void {
    this.stopped = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  /** Resolves when nothing is queued or running, released runs included (for tests). */
  idle(): Promise<void> {
    if (this.pending.size === 0 && this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (!this.stopped && this.running < this.options.workers) {
      const key = this.next();
      if (key === undefined) break;
      const now = this.options.now();
      this.observer?.started(Math.max(0, now - this.pending.get(key)!.at) / 1000);
      this.pending.delete(key);
      this.active.set(key, now);
      this.running++;
      void this.process(key);
    }
    if (this.pending.size === 0 && this.active.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  private async process(key: string): Promise<void> {
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.running--;
      this.pump();
    };
    try {
      const result = await this.options.handler(key, { release });
      this.failures.delete(key);
      if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    } catch (err) {
      const attempts = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, attempts);
      // The exponent is capped so the product stays finite; clampDelay bounds it whatever the options.
      const delay = clampDelay(Math.min(this.options.baseBackoffMs * 2 ** Math.min(attempts - 1, 30), this.options.maxBackoffMs));
      this.observer?.failed();
      this.options.onError(key, err, delay);
      this.addAfter(key, delay);
    } finally {
      this.observer?.finished(Math.max(0, this.options.now() - this.active.get(key)!) / 1000);
      this.active.delete(key);
      if (!released) this.running--;
      const addedAt = this.dirty.get(key);
      this.dirty.delete(key);
      if (addedAt !== undefined && !this.stopped) this.enqueue(key, addedAt);
      this.pump();
    }
  }
}
