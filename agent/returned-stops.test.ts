import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FIRST_RECHECK_MS, MAX_RECHECK_MS, ReturnedStops } from './returned-stops.ts';

describe('ReturnedStops (R40): the wait before a returned stop is sent again', () => {
  it('none before a stop returned; then the wait, doubling with each stop up to the maximum', () => {
    let now = 0;
    const r = new ReturnedStops(() => now);
    assert.equal(r.waitLeftMs('containerd://a'), undefined);
    assert.equal(r.stoppedHere('containerd://a'), false);
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      r.returned('containerd://a');
      waits.push(r.waitLeftMs('containerd://a')!);
      now += waits.at(-1)!;
      assert.equal(r.waitLeftMs('containerd://a'), undefined);
    }
    assert.deepEqual(waits, [FIRST_RECHECK_MS, FIRST_RECHECK_MS * 2, FIRST_RECHECK_MS * 4, FIRST_RECHECK_MS * 8, MAX_RECHECK_MS, MAX_RECHECK_MS]);
    assert.equal(r.stoppedHere('containerd://a'), true);
    assert.equal(r.waitLeftMs('containerd://b'), undefined);
  });

  it('a container whose exit the runtime reported is never stopped again: each wait that ends begins the next', () => {
    let now = 0;
    const r = new ReturnedStops(() => now);
    r.exited('containerd://a'); // the exit event may come before the stop returns
    r.returned('containerd://a');
    r.returned('containerd://b');
    r.exited('containerd://b');
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      now += waits.at(-1) ?? FIRST_RECHECK_MS;
      waits.push(r.waitLeftMs('containerd://a')!);
      assert.equal(r.waitLeftMs('containerd://b'), waits.at(-1));
    }
    assert.deepEqual(waits, [FIRST_RECHECK_MS * 2, FIRST_RECHECK_MS * 4, FIRST_RECHECK_MS * 8, MAX_RECHECK_MS, MAX_RECHECK_MS]);
    r.returned('containerd://c');
    now += FIRST_RECHECK_MS;
    assert.equal(r.waitLeftMs('containerd://c'), undefined, 'no exit reported: stopped again');
  });

  it('forgets a container long after its last wait ended', () => {
    let now = 0;
    const r = new ReturnedStops(() => now);
    r.returned('containerd://a');
    now += FIRST_RECHECK_MS + MAX_RECHECK_MS * 2;
    r.returned('containerd://b');
    assert.equal(r.stoppedHere('containerd://a'), false);
    assert.equal(r.stoppedHere('containerd://b'), true);
  });
});
