// The order the benchmark runs things in: the burst's alternating kinds, the latency part's two kinds of batches.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { burstOrder, interleave } from './order.ts';

describe('the order of the runs', () => {
  it('ours and native take turns going first in the burst', () => {
    assert.deepEqual(burstOrder(3).map((r) => `${r.repeat}${r.kind}${r.order}`), ['1ours1', '1native2', '2native1', '2ours2', '3ours1', '3native2']);
  });

  it('two kinds of batches are spread evenly over the run, each in its own order', () => {
    assert.deepEqual(interleave(['m1', 'm2', 'm3', 'm4'], ['a1', 'a2']).join(' '), 'm1 a1 m2 m3 a2 m4');
    assert.deepEqual(interleave(['m1', 'm2'], []), ['m1', 'm2']);
    assert.deepEqual(interleave([], ['a1']), ['a1']);
    const merged = interleave(Array.from({ length: 10 }, (_, i) => `m${i}`), Array.from({ length: 5 }, (_, i) => `a${i}`));
    assert.equal(merged.length, 15);
    assert.deepEqual(merged.filter((x) => x.startsWith('a')), ['a0', 'a1', 'a2', 'a3', 'a4']);
    assert.ok(!merged.join(' ').includes('a0 a1') && !merged.slice(-3).every((x) => x.startsWith('m')));
  });
});
