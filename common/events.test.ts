// The event recorder against the fake API server (test/support/fake-api.ts): what an Event looks like, and
// how they are sent: in the background, a few at a time, a bounded backlog, failures logged and
// never thrown. The recorder does not deduplicate: each emit is one Event. Sending a reason once per
// Pod is its callers' part (crr/sidecar-controller.test.ts, crr/requests-controller.test.ts). Events
// hold back while an urgent write (the agent's create) is in flight.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventRecorder, MAX_WAITING_EVENTS } from './events.ts';
import { FakeKubeApi, networkError } from '../test/support/fake-api.ts';
import { resourcePath } from './kube/paths.ts';
import type { Logger } from './log.ts';
import { UrgentWrites } from './urgent-writes.ts';

const EVENTS = resourcePath('v1', 'events', 'ns');
const POD = { namespace: 'ns', name: 'job-pod', uid: 'uid-1' };

interface Event {
  metadata: { name: string; namespace: string };
  involvedObject: Record<string, string>;
  type: string;
  reason: string;
  message: string;
  source: { component: string; host?: string };
  reportingComponent: string;
  reportingInstance: string;
  count: number;
}

function recorder(host?: string, maxWaiting?: number) {
  const api = new FakeKubeApi();
  const warnings: { message: string; meta: Record<string, unknown> }[] = [];
  const log = { warn: (message: string, meta: Record<string, unknown>) => warnings.push({ message, meta }) } as unknown as Logger;
  const events = new EventRecorder(api, 'sidecar-terminator-agent', log, { host, maxWaiting });
  return { api, events, warnings, stored: () => api.list<Event>(EVENTS) };
}

/** Holds every create until released; `underWay()` counts the creates not yet answered. */
function holdCreates(api: FakeKubeApi) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const take = api.inject({ method: 'create' }, () => held, Infinity);
  return {
    underWay: () => api.calls.filter((c) => c.method === 'create' && c.status === undefined).length,
    release: () => {
      take();
      release();
    },
  };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('EventRecorder', () => {
  it('R47: records a Pod event as kubectl describe shows it: on the Pod, from this component and host, the message cut at 1,024 characters', async () => {
    const h = recorder('node-a');
    h.events.emit(POD, { type: 'Warning', reason: 'SidecarNotStarted', message: 'x'.repeat(2000) });
    await h.events.flushed();
    const [event] = h.stored();
    assert.match(event!.metadata.name, /^job-pod\./);
    assert.equal(event!.metadata.namespace, 'ns');
    assert.deepEqual(event!.involvedObject, { apiVersion: 'v1', kind: 'Pod', namespace: 'ns', name: 'job-pod', uid: 'uid-1' });
    assert.equal(event!.type, 'Warning');
    assert.equal(event!.reason, 'SidecarNotStarted');
    assert.equal(event!.message.length, 1024);
    assert.deepEqual(event!.source, { component: 'sidecar-terminator-agent', host: 'node-a' });
    assert.equal(event!.reportingInstance, 'node-a');
    assert.equal(event!.count, 1);
    // Without a host (the controller), the component reports.
    const controller = recorder();
    controller.events.emit(POD, { type: 'Normal', reason: 'R', message: 'm' });
    await controller.events.flushed();
    assert.equal(controller.stored()[0]?.reportingInstance, 'sidecar-terminator-agent');
  });

  it('does not deduplicate: the same reason on the same Pod twice is two Events', async () => {
    const h = recorder();
    for (let i = 0; i < 2; i++) h.events.emit(POD, { type: 'Normal', reason: 'StoppingSidecars', message: 'same' });
    await h.events.flushed();
    assert.deepEqual(h.stored().map((e) => e.reason), ['StoppingSidecars', 'StoppingSidecars']);
  });

  it('R47: sends in the background, four at a time; flushed() waits for them all', async () => {
    const h = recorder();
    const hold = holdCreates(h.api);
    for (let i = 0; i < 10; i++) h.events.emit(POD, { type: 'Normal', reason: `R${i}`, message: 'm' });
    await flush();
    assert.equal(hold.underWay(), 4);
    let flushed = false;
    const flushing = h.events.flushed().then(() => (flushed = true));
    await flush();
    assert.equal(flushed, false);
    hold.release();
    await flushing;
    assert.equal(h.stored().length, 10);
    // In the order emitted.
    assert.deepEqual(h.api.calls.map((c) => (c.body as Event).reason), Array.from({ length: 10 }, (_, i) => `R${i}`));
  });

  // The controller keeps more waiting (crr/main.ts CONTROLLER_EVENTS_WAITING): a wave's worth.
  for (const maxWaiting of [undefined, 1_100]) {
    const kept = maxWaiting ?? MAX_WAITING_EVENTS;
    it(`R48: keeps at most ${kept} waiting (maxWaiting ${String(maxWaiting)}): the rest are dropped, with a warning every 100`, async () => {
      const h = recorder(undefined, maxWaiting);
      const hold = holdCreates(h.api);
      for (let i = 0; i < kept + 250; i++) h.events.emit(POD, { type: 'Normal', reason: 'R', message: String(i) });
      // Four went out at once; `kept` wait; 246 were dropped.
      hold.release();
      await h.events.flushed();
      assert.equal(h.stored().length, kept + 4);
      assert.deepEqual(h.warnings.map((w) => [w.message, w.meta.dropped]), [
        ['events backlog full, dropping events', 1], ['events backlog full, dropping events', 101], ['events backlog full, dropping events', 201],
      ]);
    });
  }

  for (const [name, fault] of [['403', 403], ['429', 429], ['500', 500], ['no answer', networkError()]] as const) {
    it(`an Event the API server does not take (${name}) is logged, never thrown; the next ones go out`, async () => {
      const h = recorder();
      h.api.inject({ method: 'create' }, fault);
      h.events.emit(POD, { type: 'Warning', reason: 'Lost', message: 'm' });
      h.events.emit(POD, { type: 'Normal', reason: 'Kept', message: 'm' });
      await h.events.flushed();
      assert.deepEqual(h.stored().map((e) => e.reason), ['Kept']);
      assert.deepEqual(h.warnings.map((w) => [w.message, w.meta.reason, w.meta.pod]), [['could not record event', 'Lost', 'ns/job-pod']]);
    });
  }

  it('flushed() resolves at once when nothing is under way', async () => {
    const h = recorder();
    await h.events.flushed();
    assert.deepEqual(h.api.calls, []);
  });
});

describe('EventRecorder: urgent writes first', () => {
  it('holds events back while an urgent write is in flight, then sends them all', async () => {
    const api = new FakeKubeApi();
    const log = { warn: () => {} } as unknown as Logger;
    const urgent = new UrgentWrites();
    const events = new EventRecorder(api, 'sidecar-terminator-agent', log, { host: 'node-a', urgent });
    let finish!: () => void;
    const writing = urgent.run(() => new Promise<void>((resolve) => (finish = resolve)));
    events.emit(POD, { type: 'Normal', reason: 'Killing', message: 'one' });
    events.emit(POD, { type: 'Normal', reason: 'Killing', message: 'two' });
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(api.calls, [], 'nothing sent during the urgent write');
    finish();
    await writing;
    await events.flushed();
    assert.deepEqual(api.list<Event>(EVENTS).map((e) => e.message), ['one', 'two']);
    assert.equal(urgent.busy(), false);
  });

  it('an urgent write that fails still releases the events', async () => {
    const api = new FakeKubeApi();
    const urgent = new UrgentWrites();
    const events = new EventRecorder(api, 'sidecar-terminator-agent', { warn: () => {} } as unknown as Logger, { urgent });
    const failing = urgent.run(() => Promise.reject(new Error('HTTP 500')));
    events.emit(POD, { type: 'Normal', reason: 'Killing', message: 'after' });
    await assert.rejects(failing, /HTTP 500/);
    await events.flushed();
    assert.equal(api.list<Event>(EVENTS).length, 1);
  });
});
