// Leader election (R49) against the fake API server (test/support/fake-api.ts) under a fake clock: renewals,
// the renew deadline whatever the API answers (500, 429, 409, no answer, a call that hangs), another
// holder, a conflicting write, a create race, a deleted Lease, and the release on stop.
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import winston from 'winston';
import { FakeKubeApi, networkError } from '../test/support/fake-api.ts';
import { LeaderElector, type LeaderElectionOptions, type LeaseClient } from './leader.ts';

interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

const LEASE_PATH = '/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease';

/**
 * The fake API server, with the Lease at LEASE_PATH, and the ways a test makes its calls fail,
 * hang or slow down.
 */
function leases() {
  const api = new FakeKubeApi();
  let clear = () => {};
  let hung: (() => void) | undefined;
  return {
    api,
    lease: () => api.object<Lease>(LEASE_PATH),
    /** Every call from now on fails with `fault`, until ok(). */
    fail(fault: number | Error = 500) {
      clear();
      clear = api.inject({}, fault, Infinity);
    },
    /** Every call from now on hangs, until ok() (the hung calls then go on, and act on the Lease as usual). */
    hang() {
      clear();
      const held = new Promise<void>((resolve) => (hung = resolve));
      clear = api.inject({}, () => held, Infinity);
    },
    ok() {
      clear();
      hung?.();
    },
    /** Every PUT takes this long from now on. */
    slowReplaces(ms: number) {
      api.inject({ method: 'replace' }, () => new Promise<void>((r) => setTimeout(r, ms)), Infinity);
    },
    /** Another replica's write. */
    put(spec: Lease['spec']) {
      api.set(LEASE_PATH, { metadata: { name: 'lease', namespace: 'ns' }, spec });
    },
    /** The calls as `METHOD@ms since T0`. */
    calls: (t0: number) => api.calls.map((c) => ({ method: c.method, at: c.atMs - t0 })),
  };
}

const silent = winston.createLogger({ silent: true });

function flush(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/** Moves the fake clock on in small steps, letting promise continuations run in between. */
async function advance(ms: number, step = 10): Promise<void> {
  for (let done = 0; done < ms; done += step) {
    mock.timers.tick(Math.min(step, ms - done));
    await flush();
  }
}

function elector(client: LeaseClient, identity = 'me', extra: Partial<LeaderElectionOptions> = {}) {
  const events: string[] = [];
  const e = new LeaderElector({
    client, namespace: 'ns', name: 'lease', identity, log: silent,
    leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2,
    onStartedLeading: () => events.push(`started@${Date.now()}`),
    onStoppedLeading: () => events.push(`stopped@${Date.now()}`),
    ...extra,
  });
  return { e, events };
}

describe('LeaderElector (R49)', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());
  const T0 = 1_000_000;

  it('creates the Lease and leads when there is none', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    assert.deepEqual(l.calls(T0).map((c) => c.method), ['get', 'create']);
    assert.equal(l.lease()?.spec?.holderIdentity, 'me');
    assert.equal(l.lease()?.spec?.leaseDurationSeconds, 15);
    assert.equal(l.lease()?.spec?.leaseTransitions, 0);
    await e.stop();
  });

  it('renews the Lease every retry period and stays leader', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    const acquireTime = l.lease()?.spec?.acquireTime;
    await advance(60_000);
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    const puts = l.calls(T0).filter((c) => c.method === 'replace').map((c) => c.at);
    assert.deepEqual(puts, Array.from({ length: 30 }, (_, i) => (i + 1) * 2000));
    assert.equal(l.lease()?.spec?.acquireTime, acquireTime);
    assert.equal(l.lease()?.spec?.renewTime, new Date(T0 + 60_000).toISOString().replace('Z', '000Z'));
    assert.equal(l.lease()?.spec?.leaseTransitions, 0);
    await e.stop();
  });

  for (const [name, fault] of [['500', 500], ['429', 429], ['409', 409], ['no answer', networkError()]] as const) {
    it(`loses leadership renewDeadline after the last renewal was sent when renewals fail (${name})`, async () => {
      const l = leases();
      const { e, events } = elector(l.api);
      e.start();
      await flush();
      await advance(2000); // renewal sent at T0 + 2000
      l.fail(fault);
      await advance(9990);
      assert.equal(e.isLeader(), true);
      assert.deepEqual(events, [`started@${T0}`]);
      await advance(10);
      assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 12_000}`]);
      assert.equal(e.isLeader(), false);
      // It stops campaigning, and a working API does not bring it back.
      l.ok();
      const calls = l.api.calls.length;
      await advance(30_000);
      assert.equal(l.api.calls.length, calls);
      assert.equal(events.length, 2);
    });
  }

  it('loses leadership on time while a renewal hangs forever', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    await advance(2000); // renewal sent at T0 + 2000
    l.hang();
    await advance(2000); // the next renewal's GET never returns
    assert.deepEqual(l.calls(T0).at(-1), { method: 'get', at: 4000 });
    await advance(7990);
    assert.equal(e.isLeader(), true);
    await advance(10);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 12_000}`]);
    assert.equal(e.isLeader(), false);
  });

  it('does not let a renewal that returns after the deadline revive leadership', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    l.hang();
    await advance(2000); // the renewal sent at T0 + 2000 hangs
    await advance(10_000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 10_000}`]);
    l.ok(); // ...and then succeeds
    await advance(10);
    assert.equal(l.lease()?.spec?.renewTime, new Date(T0 + 12_010).toISOString().replace('Z', '000Z'));
    await advance(30_000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 10_000}`]);
    assert.equal(e.isLeader(), false);
  });

  it('counts a renewal from when its write was sent, not from when it returned', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    l.slowReplaces(7000); // every PUT now takes 7 s
    await advance(2000); // a PUT sent at T0 + 2000 succeeds at T0 + 9000
    await advance(7000);
    assert.equal(l.lease()?.spec?.renewTime, new Date(T0 + 2000).toISOString().replace('Z', '000Z'));
    await advance(2990); // the next PUT, sent at T0 + 11000, is still on its way
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    await advance(10);
    // Another replica may have seen the renewal as early as T0 + 2000, not T0 + 9000.
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 12_000}`]);
    assert.equal(e.isLeader(), false);
  });

  it('stops leading at once when it finds another holder in the Lease', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    await advance(1000);
    l.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z' });
    await advance(1000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 2000}`]);
    assert.equal(l.lease()?.spec?.holderIdentity, 'other');
  });

  it('takes over a Lease held by another only after a lease duration without renewal', async () => {
    const l = leases();
    // The holder's renewTime is far in the past: clocks are not compared, only changes observed.
    l.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z', leaseTransitions: 3 });
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    await advance(5000);
    // The holder renews at T0 + 5000: the count starts again when this candidate sees it (T0 + 6000).
    l.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:05.000000Z', leaseTransitions: 3 });
    await advance(16_990); // T0 + 21990
    assert.deepEqual(events, []);
    assert.equal(e.isLeader(), false);
    assert.equal(l.calls(T0).filter((c) => c.method !== 'get').length, 0);
    assert.equal(l.lease()?.spec?.holderIdentity, 'other');
    await advance(10); // T0 + 22000: the first round at or after T0 + 6000 + 15000
    assert.deepEqual(events, [`started@${T0 + 22_000}`]);
    assert.equal(l.lease()?.spec?.holderIdentity, 'me');
    assert.equal(l.lease()?.spec?.leaseTransitions, 4);
    assert.equal(l.lease()?.spec?.acquireTime, l.lease()?.spec?.renewTime);
    await e.stop();
  });

  it('releases the Lease on stop so a standby takes over at once', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    await advance(3000);
    await e.stop();
    assert.equal(e.isLeader(), false);
    assert.equal(l.lease()?.spec?.holderIdentity, undefined);
    assert.equal(l.lease()?.spec?.leaseDurationSeconds, 1);
    assert.deepEqual(events, [`started@${T0}`], 'stop() is not a loss of leadership');
    const calls = l.api.calls.length;
    await advance(20_000);
    assert.equal(l.api.calls.length, calls, 'no more rounds after stop()');

    const standby = elector(l.api, 'standby');
    standby.e.start();
    await flush();
    assert.deepEqual(standby.events, [`started@${T0 + 23_000}`]);
    assert.equal(l.lease()?.spec?.holderIdentity, 'standby');
    await standby.e.stop();
  });

  it('lets a renewal in flight finish before releasing on stop', async () => {
    const l = leases();
    const { e } = elector(l.api);
    e.start();
    await flush();
    l.slowReplaces(500);
    await advance(2000); // a PUT is in flight until T0 + 2500
    const stopping = e.stop();
    assert.equal(e.isLeader(), false);
    await advance(400);
    assert.equal(l.calls(T0).filter((c) => c.at > 2000).length, 0, 'the release waits for the renewal');
    await advance(1000);
    await stopping;
    assert.equal(l.lease()?.spec?.leaseTransitions, 0);
    assert.equal(l.lease()?.spec?.holderIdentity, undefined);
  });

  it('another replica writes between the renewal\'s read and its write: 409, and the next round finds the other holder', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    l.api.inject({ method: 'replace' }, () => l.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z' }));
    await advance(2000);
    assert.deepEqual(l.api.lines({ method: 'replace' }).map((line) => line.split(' ').at(-1)), ['409']);
    assert.equal(e.isLeader(), true, 'a failed renewal alone ends nothing before the deadline');
    await advance(2000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 4000}`]);
    assert.equal(l.lease()?.spec?.holderIdentity, 'other');
  });

  it('two candidates create the Lease at once: the one answered 409 does not lead', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    l.api.inject({ method: 'create' }, () => l.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z' }));
    e.start();
    await flush();
    await advance(10_000);
    assert.deepEqual(l.api.lines({ method: 'create' }).map((line) => line.split(' ').at(-1)), ['409']);
    assert.deepEqual(events, []);
    assert.equal(e.isLeader(), false);
    assert.equal(l.lease()?.spec?.holderIdentity, 'other');
    await e.stop();
  });

  it('the Lease deleted under the leader (404): created again, leadership goes on', async () => {
    const l = leases();
    const { e, events } = elector(l.api);
    e.start();
    await flush();
    await advance(1000);
    l.api.remove(LEASE_PATH);
    await advance(1000);
    assert.deepEqual(l.calls(T0).slice(-2), [{ method: 'get', at: 2000 }, { method: 'create', at: 2000 }]);
    assert.equal(l.lease()?.spec?.holderIdentity, 'me');
    await advance(20_000);
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    await e.stop();
  });

  it('rejects durations that cannot work', () => {
    const l = leases();
    assert.throws(() => elector(l.api, 'me', { renewDeadlineSeconds: 15 }), /leaseDuration/);
    assert.throws(() => elector(l.api, 'me', { retryPeriodSeconds: 10 }), /renewDeadline/);
    assert.throws(() => elector(l.api, 'me', { leaseDurationSeconds: Number.NaN }), /positive/);
    assert.throws(() => elector(l.api, 'me', { leaseDurationSeconds: 30 * 24 * 3600 }), /at most/);
  });
});
