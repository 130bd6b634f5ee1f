import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KeyedLimit } from './keyed-limit.ts';

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('KeyedLimit (R39: a Pod\'s stops, 8 at a time)', () => {
  it('runs at most `limit` tasks of a key at once, the rest in the order they came', async () => {
    const limit = new KeyedLimit(2);
    const gates = Array.from({ length: 5 }, deferred);
    const started: number[] = [];
    const runs = gates.map((g, i) => limit.run('pod', async () => { started.push(i); await g.promise; return i; }));
    await tick();
    assert.deepEqual(started, [0, 1]);
    assert.equal(limit.running('pod'), 2);
    gates[1]!.resolve();
    await tick();
    assert.deepEqual(started, [0, 1, 2]);
    for (const g of gates) g.resolve();
    assert.deepEqual(await Promise.all(runs), [0, 1, 2, 3, 4]);
    assert.deepEqual(started, [0, 1, 2, 3, 4]);
    assert.equal(limit.running('pod'), 0);
  });

  it('keys do not wait for each other', async () => {
    const limit = new KeyedLimit(1);
    const held = deferred();
    const a = limit.run('a', () => held.promise);
    let bRan = false;
    await limit.run('b', async () => { bRan = true; });
    assert.ok(bRan);
    held.resolve();
    await a;
  });

  it('a failed task frees its slot and its error reaches its caller', async () => {
    const limit = new KeyedLimit(1);
    const first = deferred();
    const failing = limit.run('pod', () => first.promise);
    const next = limit.run('pod', async () => 'ran');
    first.reject(new Error('runtime down'));
    await assert.rejects(failing, /runtime down/);
    assert.equal(await next, 'ran');
    assert.equal(limit.running('pod'), 0);
  });

  it('refuses a limit that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => new KeyedLimit(bad), RangeError);
  });
});
