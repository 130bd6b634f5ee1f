import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket } from './rate-limit.ts';

describe('TokenBucket (client-go\'s QPS and burst)', () => {
  it('gives a burst at once, then one token every 1/qps s, in the order asked, and refills to the burst only', () => {
    let now = 0;
    const bucket = new TokenBucket({ qps: 10, burst: 3 }, () => now);
    assert.deepEqual([1, 2, 3].map(() => bucket.reserve()), [0, 0, 0]);
    // Owed tokens queue: the 4th waits 100 ms, the 5th 200 ms.
    assert.deepEqual([bucket.reserve(), bucket.reserve()], [100, 200]);
    now = 10_000; // a quiet spell: back to 3 tokens, never more
    assert.deepEqual([1, 2, 3, 4].map(() => bucket.reserve()), [0, 0, 0, 100]);
  });

  it('refuses a rate or a burst it cannot serve', () => {
    assert.throws(() => new TokenBucket({ qps: 0, burst: 1 }), /positive rate/);
    assert.throws(() => new TokenBucket({ qps: Infinity, burst: 1 }), /positive rate/);
    assert.throws(() => new TokenBucket({ qps: 1, burst: 0 }), /at least 1 token/);
  });
});
