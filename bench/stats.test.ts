import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { bootstrapInterval, censoredSummary, percentile, ratioInterval, serviceRate } from './stats.ts';

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

describe('the ratio\'s interval', () => {
  const ours = Array.from({ length: 50 }, (_, i) => 50 + ((i * 37) % 50));
  const theirs = ours.map((v) => v * 10);

  it('holds the ratio of the p50s, is the same for the same samples, and is NaN without samples', () => {
    const [lo, hi] = ratioInterval(ours, theirs, 50);
    assert.ok(lo <= 0.1 && 0.1 <= hi && hi > lo, `${lo} <= 0.1 <= ${hi}`);
    assert.deepEqual(ratioInterval(ours, theirs, 50), [lo, hi]);
    assert.ok(ratioInterval([], theirs, 50).every(Number.isNaN));
  });

  it('is a point when neither group varies', () => {
    assert.deepEqual(ratioInterval([5, 5, 5], [20, 20], 50), [0.25, 0.25]);
  });
});

describe('censored percentiles (misses rank last)', () => {
  const cases: { name: string; values: number[]; censored: number; want: [number | null, number | null, number | null]; n: number; over: number }[] = [
    { name: 'no misses: the plain percentiles', values: [1, 2, 3, 4, 5], censored: 0, want: [3, 4.6, 5], n: 5, over: 0 },
    { name: 'misses push the upper percentiles past the limit', values: [1, 2, 3, 4], censored: 1, want: [3, null, null], n: 5, over: 1 },
    { name: 'a value over the limit counts as a miss', values: [1, 2, 3, 4, 40_000], censored: 0, want: [3, null, null], n: 5, over: 1 },
    { name: 'more misses than finishes: even the median is above', values: [1], censored: 2, want: [null, null, null], n: 3, over: 2 },
    { name: 'nothing at all', values: [], censored: 0, want: [null, null, null], n: 0, over: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const s = censoredSummary(c.values, c.censored, 30_000);
      assert.deepEqual([s.p50, s.p90, s.p99], c.want);
      assert.equal(s.n, c.n);
      assert.equal(s.censored, c.over);
      if (c.over === 0 && c.values.length > 0) assert.equal(s.p50, percentile(c.values, 50));
    });
  }
});

describe('service rate', () => {
  it('counts the requests seen within the wave over its length, and all of them from the first seen to the last', () => {
    // A 5 s wave; 100 requests seen 100 ms apart from 0.5 s in, most of them after it: a backlog.
    const seenAt = Array.from({ length: 100 }, (_, i) => 500 + i * 100);
    assert.deepEqual(serviceRate(seenAt, 0, 5_000), { duringWave: 9, firstToLast: 10 });
  });

  it('none or one seen: no rate from first to last', () => {
    assert.ok(Number.isNaN(serviceRate([1_000], 0, 5_000).firstToLast));
    assert.deepEqual(serviceRate([], 0, 5_000).duringWave, 0);
  });
});
