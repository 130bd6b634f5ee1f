import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WorkQueue } from './queue.ts';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('deduplicates a key queued twice while it waits', async () => {
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
    q.add('a');
    q.add('a');
    q.add('b');
    assert.equal(q.depth(), 2);
    gate.resolve();
    await q.idle();
    assert.deepEqual(seen, ['busy', 'a', 'b']);
  });

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
