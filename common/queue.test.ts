import { afterEach, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { clampDelay, MAX_REQUEUE_MS, WorkQueue } from './queue.ts';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** One worker, held by the key 'busy' until `gate` resolves; `seen` is the keys in the order run. */
function heldQueue() {
  const seen: string[] = [];
  const gate = deferred();
  const q = new WorkQueue({
    workers: 1,
    handler: async (k) => {
      seen.push(k);
      if (k === 'busy') await gate.promise;
    },
    onError: () => {},
  });
  q.add('busy');
  return { q, seen, gate };
}

describe('WorkQueue', () => {
  it('deduplicates a key queued twice while it waits', async () => {
    const { q, seen, gate } = heldQueue();
    q.add('a');
    q.add('a');
    q.add('b');
    assert.equal(q.state().depth, 2);
    gate.resolve();
    await q.idle();
    assert.deepEqual(seen, ['busy', 'a', 'b']);
  });

  // A resync adds every key at once; what changed meanwhile must not wait behind all of them.
  const resyncCases: { what: string; steps: (q: WorkQueue) => void; order: string[]; depth: number }[] = [
    { what: 'keys added after a resync go before its keys', steps: (q) => { for (const k of ['r1', 'r2', 'r3']) q.addForResync(k); q.add('changed'); }, order: ['busy', 'changed', 'r1', 'r2', 'r3'], depth: 4 },
    { what: 'a resync key added again as a change moves up, and runs once', steps: (q) => { for (const k of ['r1', 'r2', 'r3']) q.addForResync(k); q.add('r3'); }, order: ['busy', 'r3', 'r1', 'r2'], depth: 3 },
    { what: 'a key already waiting keeps its place when a resync adds it', steps: (q) => { q.add('a'); q.addForResync('r1'); q.addForResync('a'); q.add('b'); }, order: ['busy', 'a', 'b', 'r1'], depth: 3 },
    { what: 'a key being processed is not queued again by a resync', steps: (q) => { q.addForResync('busy'); q.addForResync('r1'); }, order: ['busy', 'r1'], depth: 1 },
    { what: 'resync keys run in the order the resync added them', steps: (q) => { for (const k of ['r1', 'r2', 'r3']) q.addForResync(k); }, order: ['busy', 'r1', 'r2', 'r3'], depth: 3 },
  ];
  for (const c of resyncCases) {
    it(`resync: ${c.what}`, async () => {
      const { q, seen, gate } = heldQueue();
      c.steps(q);
      assert.equal(q.state().depth, c.depth);
      gate.resolve();
      await q.idle();
      assert.deepEqual(seen, c.order);
    });
  }

  it('never runs one key on two workers, and re-runs a key added while it ran', async () => {
    let concurrent = 0;
    let maxConcurrent = 0;
    let runs = 0;
    const gate = deferred();
    const q = new WorkQueue({
      workers: 4,
      handler: async () => {
        runs++;
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        if (runs === 1) await gate.promise;
        concurrent--;
      },
      onError: () => {},
    });
    q.add('k');
    await new Promise((r) => setImmediate(r));
    q.add('k');
    q.add('k');
    gate.resolve();
    await q.idle();
    await new Promise((r) => setImmediate(r));
    await q.idle();
    assert.equal(maxConcurrent, 1);
    assert.equal(runs, 2);
  });

  it('a released worker takes the next key; the released key is not run again until its run settles, and idle waits for it', async () => {
    const gate = deferred();
    const seen: string[] = [];
    const q = new WorkQueue({
      workers: 1,
      handler: async (key, worker) => {
        seen.push(`start ${key}`);
        if (key === 'a' && !seen.includes('end a')) {
          worker.release();
          worker.release(); // twice: the second does nothing
          await gate.promise;
        }
        seen.push(`end ${key}`);
      },
      onError: () => {},
    });
    q.add('a');
    q.add('b');
    q.add('c');
    await new Promise((r) => setImmediate(r));
    q.add('a');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, ['start a', 'start b', 'end b', 'start c', 'end c']);
    let idle = false;
    void q.idle().then(() => (idle = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(idle, false, 'the released run of a is still under way');
    gate.resolve();
    await q.idle();
    assert.deepEqual(seen.slice(5), ['end a', 'start a', 'end a']);
  });

  it('retries a failing key with growing backoff', async () => {
    const delays: number[] = [];
    let calls = 0;
    const done = deferred();
    const q = new WorkQueue({
      workers: 1,
      baseBackoffMs: 1,
      handler: async () => {
        calls++;
        if (calls < 4) throw new Error('boom');
        done.resolve();
      },
      onError: (_k, _e, delay) => delays.push(delay),
    });
    q.add('k');
    await done.promise;
    q.stop();
    assert.deepEqual(delays, [1, 2, 4]);
  });

  it('requeues after the delay the handler asks for', async () => {
    const times: number[] = [];
    const done = deferred();
    const q = new WorkQueue({
      workers: 1,
      handler: async () => {
        times.push(Date.now());
        if (times.length === 2) done.resolve();
        return times.length === 1 ? { requeueAfterMs: 30 } : undefined;
      },
      onError: () => {},
    });
    q.add('k');
    await done.promise;
    assert.ok(times[1]! - times[0]! >= 25);
  });
});

/** Lets resolved promises and their continuations run (setImmediate is not faked). */
function flush(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

describe('WorkQueue delays', () => {
  afterEach(() => mock.timers.reset());

  /** A queue whose handler counts runs per key and returns `result` on the first run only. */
  function countingQueue(result: { requeueAfterMs?: number } | undefined) {
    const runs = new Map<string, number>();
    const q = new WorkQueue({
      workers: 1,
      handler: async (k) => {
        const n = (runs.get(k) ?? 0) + 1;
        runs.set(k, n);
        return n === 1 ? result : undefined;
      },
      onError: () => {},
    });
    return { q, runs: (k: string) => runs.get(k) ?? 0 };
  }

  it('clampDelay maps NaN and negatives to 0 and caps large values', () => {
    assert.equal(clampDelay(Number.NaN), 0);
    assert.equal(clampDelay(-5), 0);
    assert.equal(clampDelay(-Infinity), 0);
    assert.equal(clampDelay(0), 0);
    assert.equal(clampDelay(1500), 1500);
    assert.equal(clampDelay(Infinity), MAX_REQUEUE_MS);
    assert.equal(clampDelay(25 * 24 * 3600 * 1000), MAX_REQUEUE_MS);
    assert.ok(MAX_REQUEUE_MS < 2 ** 31 - 1);
  });

  for (const [name, ms] of [
    ['a deadline ~25 days away', 25 * 24 * 3600 * 1000],
    ['a delay past 2^31-1 ms', 2 ** 31 + 10],
    ['Infinity', Infinity],
  ] as const) {
    it(`requeues ${name} after MAX_REQUEUE_MS, not after 1 ms`, async () => {
      mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
      const { q, runs } = countingQueue({ requeueAfterMs: ms });
      q.add('k');
      await flush();
      assert.equal(runs('k'), 1);
      mock.timers.tick(1);
      await flush();
      mock.timers.tick(1000);
      await flush();
      assert.equal(runs('k'), 1, 'must not fire at once');
      mock.timers.tick(MAX_REQUEUE_MS - 1002);
      await flush();
      assert.equal(runs('k'), 1);
      mock.timers.tick(1);
      await flush();
      assert.equal(runs('k'), 2);
      q.stop();
    });
  }

  for (const [name, ms] of [['NaN', Number.NaN], ['a negative delay', -1000]] as const) {
    it(`requeues ${name} at once, once`, async () => {
      mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
      const { q, runs } = countingQueue({ requeueAfterMs: ms });
      q.add('k');
      await flush();
      await q.idle();
      assert.equal(runs('k'), 2);
      mock.timers.tick(MAX_REQUEUE_MS * 2);
      await flush();
      assert.equal(runs('k'), 2);
      q.stop();
    });
  }

  it('clamps addAfter the same way', async () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const { q, runs } = countingQueue(undefined);
    q.addAfter('huge', 2 ** 40);
    q.addAfter('inf', Infinity);
    q.addAfter('nan', Number.NaN);
    q.addAfter('neg', -1);
    await flush();
    assert.equal(runs('nan'), 1);
    assert.equal(runs('neg'), 1);
    mock.timers.tick(1000);
    await flush();
    assert.equal(runs('huge') + runs('inf'), 0);
    mock.timers.tick(MAX_REQUEUE_MS - 1000);
    await flush();
    assert.equal(runs('huge'), 1);
    assert.equal(runs('inf'), 1);
    q.stop();
  });

  it('bounds the error backoff by maxBackoffMs and by MAX_REQUEUE_MS', async () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const delays: number[] = [];
    const q = new WorkQueue({
      workers: 1,
      baseBackoffMs: 1000,
      maxBackoffMs: Number.MAX_VALUE,
      handler: async () => {
        throw new Error('boom');
      },
      onError: (_k, _e, delay) => delays.push(delay),
    });
    q.add('k');
    for (let i = 0; i < 1100 && delays.length < 1100; i++) {
      await flush();
      mock.timers.tick(delays.at(-1) ?? 0);
    }
    q.stop();
    assert.ok(delays.length > 1030, `only ${delays.length} retries`);
    assert.deepEqual(delays.slice(0, 4), [1000, 2000, 4000, 8000]);
    assert.ok(delays.every((d) => Number.isFinite(d) && d > 0 && d <= MAX_REQUEUE_MS));
    assert.equal(delays.at(-1), MAX_REQUEUE_MS);
  });

  it('retries a failing handler on time, at growing delays up to the cap; a success starts the backoff over; keys back off apart', async () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const runs: string[] = [];
    /** By key: how each run ends (true: fails); runs past the script succeed. */
    const script: Record<string, boolean[]> = {
      k: [true, true, true, true, true, false, true, false],
      other: [true, false],
    };
    const seen = new Map<string, number>();
    const q = new WorkQueue({
      workers: 2,
      baseBackoffMs: 200,
      maxBackoffMs: 1000,
      handler: async (key) => {
        const n = seen.get(key) ?? 0;
        seen.set(key, n + 1);
        runs.push(`${key}@${Date.now()}`);
        if (script[key]?.[n]) throw new Error('boom');
        // A success: the key is looked at again later (as a resync would).
        if (key === 'k' && n === 5) q.addAfter(key, 5000);
      },
      onError: () => {},
    });
    q.add('k');
    q.add('other');
    for (let t = 0; t < 20_000; t += 10) {
      await flush();
      mock.timers.tick(10);
    }
    q.stop();
    // k: fails at 0, then after 200, 400, 800, 1000 (capped), 1000 ms; succeeds at 3400; looked at
    // again at 8400 it fails and is retried after the base delay again, 200 ms.
    assert.deepEqual(runs.filter((r) => r.startsWith('k@')), ['k@0', 'k@200', 'k@600', 'k@1400', 'k@2400', 'k@3400', 'k@8400', 'k@8600']);
    assert.deepEqual(runs.filter((r) => r.startsWith('other@')), ['other@0', 'other@200']);
  });

  it('keeps the default backoff cap when maxBackoffMs is passed as undefined', async () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const delays: number[] = [];
    const q = new WorkQueue({
      workers: 1,
      baseBackoffMs: 1000,
      maxBackoffMs: undefined,
      handler: async () => {
        throw new Error('boom');
      },
      onError: (_k, _e, delay) => delays.push(delay),
    });
    q.add('k');
    for (let i = 0; i < 12; i++) {
      await flush();
      mock.timers.tick(delays.at(-1) ?? 0);
    }
    q.stop();
    assert.equal(delays.at(-1), 60_000);
  });
});

describe('WorkQueue: what it tells its observer (client-go\'s work-queue metrics)', () => {
  it('adds (not a key already waiting or already re-added while it runs), waits, work, failures and what runs now', async () => {
    let now = 1000;
    const told: string[] = [];
    let queue: WorkQueue | undefined;
    const gate = deferred();
    const q = new WorkQueue({
      workers: 1,
      now: () => now,
      handler: async (k) => {
        if (k === 'slow') await gate.promise;
        if (k === 'bad') throw new Error('boom');
      },
      onError: () => {},
      observe: (observed) => {
        queue = observed;
        return {
          added: () => told.push('added'),
          started: (s) => told.push(`started ${s}`),
          finished: (s) => told.push(`finished ${s}`),
          failed: () => told.push('failed'),
        };
      },
    });
    assert.equal(queue, q);
    q.add('slow');
    q.add('a');
    q.add('a'); // waiting already
    now = 1500;
    assert.deepEqual(q.state(), { depth: 1, unfinishedWorkSeconds: 0.5, longestRunningSeconds: 0.5 });
    q.add('slow'); // runs: queued again once it settles, counted once
    q.add('slow');
    now = 3000;
    gate.resolve();
    await q.idle();
    // One worker: slow (2 s), then a (waited 2 s), then slow again (re-added at 1.5 s).
    assert.deepEqual(told, ['added', 'started 0', 'added', 'added', 'finished 2', 'started 2', 'finished 0', 'started 1.5', 'finished 0']);

    told.length = 0;
    q.add('bad');
    await flush();
    q.stop();
    assert.deepEqual(told, ['added', 'started 0', 'failed', 'finished 0']);
    assert.deepEqual(q.state(), { depth: 0, unfinishedWorkSeconds: 0, longestRunningSeconds: 0 });
  });
});
