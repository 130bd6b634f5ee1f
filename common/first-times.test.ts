import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FirstTimes } from './first-times.ts';

describe('FirstTimes', () => {
  it('is true once per key', () => {
    const told = new FirstTimes(10);
    assert.equal(told.first('a'), true);
    assert.equal(told.first('a'), false);
    assert.equal(told.first('b'), true);
  });

  it('keeps at most max keys, forgetting the oldest first', () => {
    const told = new FirstTimes(2);
    for (const k of ['a', 'b', 'c']) assert.equal(told.first(k), true);
    assert.equal(told.first('c'), false);
    assert.equal(told.first('b'), false);
    assert.equal(told.first('a'), true, 'a was forgotten');
  });
});
