import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ServerClock } from './server-clock.ts';

/** The Date header an API server whose clock reads `serverMs` sends (whole seconds). */
const header = (serverMs: number) => new Date(Math.floor(serverMs / 1000) * 1000).toUTCString();

describe('ServerClock (R31): the API server\'s time, from its answers\' Date headers', () => {
  /** Answers from a server `offsetMs` ahead of the local clock, `latencyMs` each way, one every 700 ms. */
  function clockAfter(offsetMs: number, answers: number, latencyMs = 5) {
    let local = 1_700_000_000_000;
    const clock = new ServerClock(() => local);
    for (let i = 0; i < answers; i++) {
      const sent = local;
      const serverAt = sent + latencyMs + offsetMs;
      local = sent + 2 * latencyMs;
      clock.observe(header(serverAt), sent, local);
      local += 700;
    }
    return clock;
  }

  const rows: [string, number, number][] = [
    ['in step: no offset', 0, 20],
    ['a node 60 s ahead of the API server', -60_000, 20],
    ['a node 5 minutes behind', 300_000, 20],
  ];
  for (const [name, offset, answers] of rows) {
    it(name, () => {
      const got = clockAfter(offset, answers).offsetMs();
      assert.ok(Math.abs(got - offset) < 600, `offset ${got} ms, expected about ${offset}`);
    });
  }

  it('half a second apart is taken as none (one answer cannot tell it)', () => assert.equal(clockAfter(500, 20).offsetMs(), 0));

  it('a clock stepped meanwhile: the answers that contradict the old offset start over', () => {
    let local = 1_700_000_000_000;
    const clock = new ServerClock(() => local);
    for (const offset of [0, 0, 0, 90_000, 90_000]) {
      clock.observe(header(local + offset), local - 5, local + 5);
      local += 1_300;
    }
    assert.ok(Math.abs(clock.offsetMs() - 90_000) < 1_000, String(clock.offsetMs()));
    assert.ok(Math.abs(clock.now() - (local + 90_000)) < 1_000);
  });

  it('no Date header, or one that is not a date: nothing learned', () => {
    const clock = new ServerClock(() => 5);
    clock.observe(undefined, 0, 10);
    clock.observe('yesterday', 0, 10);
    assert.equal(clock.now(), 5);
  });
});
