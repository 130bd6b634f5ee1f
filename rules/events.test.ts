import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EmittedEvents, MAX_KEYS_PER_POD, normal, quoteList, warning } from './events.ts';

describe('quoteList (R47)', () => {
  const rows: Array<[string[], number | undefined, string]> = [
    [[], undefined, ''],
    [['a'], undefined, '"a"'],
    [['a', 'b'], undefined, '"a" and "b"'],
    [['a', 'b', 'c'], undefined, '"a", "b" and "c"'],
    [['a', 'b', 'c', 'd', 'e'], undefined, '"a", "b", "c", "d" and "e"'],
    [['a', 'b', 'c', 'd', 'e', 'f'], undefined, '"a", "b", "c", "d", "e" and 1 more'],
    [['a', 'b'], 10, '"a", "b" and 8 more'],
    [['x'.repeat(100)], undefined, `"${'x'.repeat(63)}…"`],
  ];
  for (const [names, total, want] of rows) {
    it(`${names.length} names${total !== undefined ? ` of ${total}` : ''}`, () => assert.equal(quoteList(names, total), want));
  }

  it('stays short for 100,000 names', () => {
    const many = Array.from({ length: 100_000 }, (_, i) => `name-${i}`);
    assert.ok(quoteList(many).length < 100);
  });
});

describe('EmittedEvents (R47)', () => {
  const a = warning('R', 'k1', 'm');
  const b = normal('S', 'k2', 'm');

  it('lets each key of a Pod through once', () => {
    const emitted = new EmittedEvents();
    assert.deepEqual(emitted.take('ns/p', 'u1', [a, b]), [a, b]);
    assert.deepEqual(emitted.take('ns/p', 'u1', [a, b]), []);
    assert.deepEqual(emitted.take('ns/q', 'u9', [a]), [a]);
  });

  it('a Pod recreated under the same name (new uid) starts afresh', () => {
    const emitted = new EmittedEvents();
    emitted.take('ns/p', 'u1', [a]);
    assert.deepEqual(emitted.take('ns/p', 'u2', [a]), [a]);
    assert.equal(emitted.size(), 1);
  });

  it('forget drops the Pod; nothing is kept for Pods without events', () => {
    const emitted = new EmittedEvents();
    emitted.take('ns/p', 'u1', [a]);
    emitted.take('ns/quiet', 'u2', []);
    assert.equal(emitted.size(), 1);
    emitted.forget('ns/p');
    assert.equal(emitted.size(), 0);
    assert.deepEqual(emitted.take('ns/p', 'u1', [a]), [a]);
  });

  it('R48: keeps at most MAX_KEYS_PER_POD keys per Pod, dropping the oldest', () => {
    const emitted = new EmittedEvents();
    const events = Array.from({ length: MAX_KEYS_PER_POD + 10 }, (_, i) => normal('S', `k${i}`, 'm'));
    assert.equal(emitted.take('ns/p', 'u1', events).length, events.length);
    // The newest are still known, the oldest were dropped.
    assert.deepEqual(emitted.take('ns/p', 'u1', events.slice(-5)), []);
    assert.deepEqual(emitted.take('ns/p', 'u1', events.slice(0, 1)), events.slice(0, 1));
  });
});
