import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { bootstrapInterval, percentile } from './stats.ts';

describe('bootstrap intervals', () => {
  const samples = Array.from({ length: 50 }, (_, i) => 10 + ((i * 37) % 50));

  it('hold the percentile, are the same for the same samples, and narrow with more samples', () => {
    const [lo, hi] = bootstrapInterval(samples, 50);
    const p50 = percentile(samples, 50);
    assert.ok(lo <= p50 && p50 <= hi, `${lo} <= ${p50} <= ${hi}`);
    assert.ok(hi > lo);
    assert.deepEqual(bootstrapInterval(samples, 50), [lo, hi]);
    const more = [...samples, ...samples, ...samples, ...samples];
    const [lo4, hi4] = bootstrapInterval(more, 50);
    assert.ok(hi4 - lo4 < hi - lo, `${hi4 - lo4} < ${hi - lo}`);
  });

  it('one value: a point; none: NaN', () => {
    assert.deepEqual(bootstrapInterval([7], 99), [7, 7]);
    assert.ok(bootstrapInterval([], 50).every(Number.isNaN));
  });
});
