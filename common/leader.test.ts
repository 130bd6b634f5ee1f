import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import winston from 'winston';
import { KubeApiError } from './kube/client.ts';
import { LeaderElector, type LeaderElectionOptions, type LeaseClient } from './leader.ts';

interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

const LEASE_PATH = '/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease';

/**
 * An API server holding one Lease, with optimistic concurrency on resourceVersion. `mode` makes
 * every later call fail, or hang (never settle, or until `release()`); `replaceDelayMs` slows PUTs.
 */
class FakeLeases implements LeaseClient {
  lease: Lease | undefined;
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  replaceDelayMs = 0;
  readonly calls: { method: string; at: number }[] = [];
  private rv = 0;
  private hung: (() => void)[] = [];

  /** Lets calls hung so far go on (they then act on the store as usual). */
  release(): void {
    this.mode = 'ok';
    for (const go of this.hung.splice(0)) go();
  }

  async get<T>(path: string): Promise<T> {
    await this.enter('GET');
    if (path !== LEASE_PATH || !this.lease) throw new KubeApiError(404, 'GET', path, '');
    return structuredClone(this.lease) as T;
  }

  async create<T>(path: string, body: unknown): Promise<T> {
    await this.enter('POST');
    assert.equal(path, '/apis/coordination.k8s.io/v1/namespaces/ns/leases');
    if (this.lease) throw new KubeApiError(409, 'POST', path, '');
    return this.store(body as Lease) as T;
  }

  async replace<T>(path: string, body: unknown): Promise<T> {
    await this.enter('PUT');
    if (this.replaceDelayMs) await new Promise((r) => setTimeout(r, this.replaceDelayMs));
    const lease = body as Lease;
    if (path !== LEASE_PATH || !this.lease) throw new KubeApiError(404, 'PUT', path, '');
    if (lease.metadata?.resourceVersion !== this.lease.metadata?.resourceVersion) throw new KubeApiError(409, 'PUT', path, '');
    return this.store(lease) as T;
  }

  /** Another replica's write. */
  put(spec: Lease['spec']): void {
    this.store({ metadata: { name: 'lease', namespace: 'ns' }, spec });
  }

  private store(lease: Lease): Lease {
    this.lease = structuredClone({ ...lease, metadata: { ...lease.metadata, resourceVersion: String(++this.rv) } });
    return structuredClone(this.lease);
  }

  private async enter(method: string): Promise<void> {
    this.calls.push({ method, at: Date.now() });
    if (this.mode === 'fail') throw new KubeApiError(500, method, LEASE_PATH, '');
    if (this.mode === 'hang') await new Promise<void>((resolve) => this.hung.push(resolve));
  }
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

describe('LeaderElector', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());
  const T0 = 1_000_000;

  it('creates the Lease and leads when there is none', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    assert.deepEqual(api.calls.map((c) => c.method), ['GET', 'POST']);
    assert.equal(api.lease?.spec?.holderIdentity, 'me');
    assert.equal(api.lease?.spec?.leaseDurationSeconds, 15);
    assert.equal(api.lease?.spec?.leaseTransitions, 0);
    await e.stop();
  });

  it('renews the Lease every retry period and stays leader', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    const acquireTime = api.lease?.spec?.acquireTime;
    await advance(60_000);
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    const puts = api.calls.filter((c) => c.method === 'PUT').map((c) => c.at - T0);
    assert.deepEqual(puts, Array.from({ length: 30 }, (_, i) => (i + 1) * 2000));
    assert.equal(api.lease?.spec?.acquireTime, acquireTime);
    assert.equal(api.lease?.spec?.renewTime, new Date(T0 + 60_000).toISOString().replace('Z', '000Z'));
    assert.equal(api.lease?.spec?.leaseTransitions, 0);
    await e.stop();
  });

  it('loses leadership renewDeadline after the last renewal was sent when renewals fail', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    await advance(2000); // renewal sent at T0 + 2000
    api.mode = 'fail';
    await advance(9990);
    assert.equal(e.isLeader(), true);
    assert.deepEqual(events, [`started@${T0}`]);
    await advance(10);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 12_000}`]);
    assert.equal(e.isLeader(), false);
    // It stops campaigning, and a working API does not bring it back.
    api.mode = 'ok';
    const calls = api.calls.length;
    await advance(30_000);
    assert.equal(api.calls.length, calls);
    assert.equal(events.length, 2);
  });

  it('loses leadership on time while a renewal hangs forever', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    await advance(2000); // renewal sent at T0 + 2000
    api.mode = 'hang';
    await advance(2000); // the next renewal's GET never returns
    assert.deepEqual(api.calls.at(-1), { method: 'GET', at: T0 + 4000 });
    await advance(7990);
    assert.equal(e.isLeader(), true);
    await advance(10);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 12_000}`]);
    assert.equal(e.isLeader(), false);
  });

  it('does not let a renewal that returns after the deadline revive leadership', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    api.mode = 'hang';
    await advance(2000); // the renewal sent at T0 + 2000 hangs
    await advance(10_000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 10_000}`]);
    api.release(); // ...and then succeeds
    await advance(10);
    assert.equal(api.lease?.spec?.renewTime, new Date(T0 + 12_010).toISOString().replace('Z', '000Z'));
    await advance(30_000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 10_000}`]);
    assert.equal(e.isLeader(), false);
  });

  it('counts a renewal from when its write was sent, not from when it returned', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    api.replaceDelayMs = 7000; // every PUT now takes 7 s
    await advance(2000); // a PUT sent at T0 + 2000 succeeds at T0 + 9000
    await advance(7000);
    assert.equal(api.lease?.spec?.renewTime, new Date(T0 + 2000).toISOString().replace('Z', '000Z'));
    await advance(2990); // the next PUT, sent at T0 + 11000, is still on its way
    assert.deepEqual(events, [`started@${T0}`]);
    assert.equal(e.isLeader(), true);
    await advance(10);
    // Another replica may have seen the renewal as early as T0 + 2000, not T0 + 9000.
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 12_000}`]);
    assert.equal(e.isLeader(), false);
  });

  it('stops leading at once when it finds another holder in the Lease', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    await advance(1000);
    api.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z' });
    await advance(1000);
    assert.deepEqual(events, [`started@${T0}`, `stopped@${T0 + 2000}`]);
    assert.equal(api.lease?.spec?.holderIdentity, 'other');
  });

  it('takes over a Lease held by another only after a lease duration without renewal', async () => {
    const api = new FakeLeases();
    // The holder's renewTime is far in the past: clocks are not compared, only changes observed.
    api.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z', leaseTransitions: 3 });
    const { e, events } = elector(api);
    e.start();
    await flush();
    await advance(5000);
    // The holder renews at T0 + 5000: the count starts again when this candidate sees it (T0 + 6000).
    api.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:05.000000Z', leaseTransitions: 3 });
    await advance(16_990); // T0 + 21990
    assert.deepEqual(events, []);
    assert.equal(e.isLeader(), false);
    assert.equal(api.calls.filter((c) => c.method !== 'GET').length, 0);
    assert.equal(api.lease?.spec?.holderIdentity, 'other');
    await advance(10); // T0 + 22000: the first round at or after T0 + 6000 + 15000
    assert.deepEqual(events, [`started@${T0 + 22_000}`]);
    assert.equal(api.lease?.spec?.holderIdentity, 'me');
    assert.equal(api.lease?.spec?.leaseTransitions, 4);
    assert.equal(api.lease?.spec?.acquireTime, api.lease?.spec?.renewTime);
    await e.stop();
  });

  it('releases the Lease on stop so a standby takes over at once', async () => {
    const api = new FakeLeases();
    const { e, events } = elector(api);
    e.start();
    await flush();
    await advance(3000);
    await e.stop();
    assert.equal(e.isLeader(), false);
    assert.equal(api.lease?.spec?.holderIdentity, undefined);
    assert.equal(api.lease?.spec?.leaseDurationSeconds, 1);
    assert.deepEqual(events, [`started@${T0}`], 'stop() is not a loss of leadership');
    const calls = api.calls.length;
    await advance(20_000);
    assert.equal(api.calls.length, calls, 'no more rounds after stop()');

    const standby = elector(api, 'standby');
    standby.e.start();
    await flush();
    assert.deepEqual(standby.events, [`started@${T0 + 23_000}`]);
    assert.equal(api.lease?.spec?.holderIdentity, 'standby');
    await standby.e.stop();
  });

  it('lets a renewal in flight finish before releasing on stop', async () => {
    const api = new FakeLeases();
    const { e } = elector(api);
    e.start();
    await flush();
    api.replaceDelayMs = 500;
    await advance(2000); // a PUT is in flight until T0 + 2500
    const stopping = e.stop();
    assert.equal(e.isLeader(), false);
    await advance(400);
    assert.equal(api.calls.filter((c) => c.at > T0 + 2000).length, 0, 'the release waits for the renewal');
    await advance(1000);
    await stopping;
    assert.equal(api.lease?.spec?.leaseTransitions, 0);
    assert.equal(api.lease?.spec?.holderIdentity, undefined);
  });

  it('rejects durations that cannot work', () => {
    const api = new FakeLeases();
    assert.throws(() => elector(api, 'me', { renewDeadlineSeconds: 15 }), /leaseDuration/);
    assert.throws(() => elector(api, 'me', { retryPeriodSeconds: 10 }), /renewDeadline/);
    assert.throws(() => elector(api, 'me', { leaseDurationSeconds: Number.NaN }), /positive/);
    assert.throws(() => elector(api, 'me', { leaseDurationSeconds: 30 * 24 * 3600 }), /at most/);
  });
});
