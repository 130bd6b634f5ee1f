// The I/O around decideLifecycle() and decideReadiness(), against the fake API server
// (test/support/fake-api.ts) and the real event recorder: a request that does not match its Pod is
// completed without being executed (one Warning per Pod however many come); a Pod gone (404) or a
// failed read; admission, unlabelling and deletion against stale copies (409) and requests already
// gone (404); the readiness gate's finalizer through a deletion.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { EventRecorder } from '../common/events.ts';
import { isConflict } from '../common/kube/errors.ts';
import { FakeKubeApi, networkError } from '../test/support/fake-api.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import { createLogger } from '../common/log.ts';
import { RequestsController } from './requests-controller.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest, CRRStatus } from '../api/container-recreate-request.ts';
import {
  API_VERSION, KIND, LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID, READINESS_CONDITION, READINESS_FINALIZER, requestPath,
} from '../api/container-recreate-request.ts';

const NOW = Date.parse('2026-01-01T00:10:00Z');
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();
const POD_PATH = podPath('ns', 'job-pod');
const POD: V1Pod = {
  apiVersion: 'v1', kind: 'Pod',
  metadata: { namespace: 'ns', name: 'job-pod', uid: 'uid-1' },
  spec: { nodeName: 'node-a', containers: [{ name: 'app' }, { name: 'proxy' }] },
  status: { phase: 'Running', containerStatuses: [{ name: 'proxy', containerID: 'containerd://p1', restartCount: 0, ready: true, image: 'x', imageID: 'x' }] },
};
const ADMITTED = { [LABEL_NODE_NAME]: 'node-a', [LABEL_POD_UID]: 'uid-1', [LABEL_ACTIVE]: 'true' };

function request(name: string, o: { labels?: Record<string, string>; pinned?: boolean; status?: CRRStatus; ttl?: number; unreadySeconds?: number } = {}): ContainerRecreateRequest {
  return {
    apiVersion: API_VERSION, kind: KIND,
    metadata: { namespace: 'ns', name, creationTimestamp: ago(5), ...(o.labels ? { labels: o.labels } : {}) },
    spec: {
      podName: 'job-pod',
      containers: [{ name: 'proxy', ...(o.pinned === false ? {} : { statusContext: { containerID: 'containerd://p1', restartCount: 0 } }) }],
      ...(o.ttl !== undefined ? { ttlSecondsAfterFinished: o.ttl } : {}),
      ...(o.unreadySeconds ? { strategy: { unreadyGracePeriodSeconds: o.unreadySeconds } } : {}),
    },
    ...(o.status ? { status: o.status } : {}),
  };
}

function harness(requests: ContainerRecreateRequest[] = []) {
  const api = new FakeKubeApi({ now: () => NOW });
  api.set(POD_PATH, POD);
  for (const r of requests) api.set(requestPath('ns', r.metadata.name), r);
  /** What the watch holds: what the API has now, unless a test pins a stale copy. */
  const cache: { requests?: ContainerRecreateRequest[] } = {};
  const recorder = new EventRecorder(api, 'sidecar-terminator', createLogger('test', 'error'));
  const actions: string[] = [];
  const controller = new RequestsController({
    client: api, events: recorder, log: createLogger('test', 'error'),
    cachedRequest: (ns, name) => (cache.requests ?? api.list<ContainerRecreateRequest>(requestPath(ns))).find((r) => r.metadata.name === name),
    onAction: (action) => actions.push(action),
    now: () => NOW,
  });
  const events = async () => {
    await recorder.flushed();
    return api.list<{ type: string; reason: string; involvedObject: { name: string; uid: string } }>(resourcePath('v1', 'events', 'ns'));
  };
  const stored = (name: string) => api.object<ContainerRecreateRequest>(requestPath('ns', name));
  /** Pins the cache to the requests as the API has them now. */
  const freeze = () => (cache.requests = api.list<ContainerRecreateRequest>(requestPath('ns')));
  return { api, controller, cache, events, stored, freeze, actions };
}

describe('RequestsController: requests that do not match their Pod (R29)', () => {
  it('completes each without executing it, with one RequestRefused Warning on the Pod', async () => {
    const forged = [
      request('forged-1', { labels: { ...ADMITTED, [LABEL_NODE_NAME]: 'other-node' } }),
      request('forged-2', { labels: { ...ADMITTED, [LABEL_NODE_NAME]: 'other-node' } }),
      request('forged-3', { labels: { ...ADMITTED, [LABEL_NODE_NAME]: 'elsewhere' } }),
    ];
    const h = harness(forged);
    for (const r of forged) await h.controller.reconcile(`ns/${r.metadata.name}`);
    assert.equal(h.api.lines({ method: 'patch' }).length, 3);
    for (const r of forged) {
      const status = h.stored(r.metadata.name!)?.status;
      assert.equal(status?.phase, 'Completed');
      assert.match(status?.message ?? '', /does not match the node of Pod job-pod \(node-a\): request not executed/);
    }
    const events = await h.events();
    assert.deepEqual(events.map((e) => `${e.type} ${e.reason}`), [`Warning ${EVENT_REASONS.requestRefused}`]);
    assert.deepEqual(events[0]?.involvedObject.name, 'job-pod');
    assert.deepEqual(events[0]?.involvedObject.uid, 'uid-1');
  });

  it('a request that matches its Pod is left to the agent: no write, no event', async () => {
    const h = harness([request('ours', { labels: ADMITTED })]);
    await h.controller.reconcile('ns/ours');
    assert.deepEqual(h.api.lines({ method: 'patch' }), []);
    assert.deepEqual(await h.events(), []);
  });
});

describe('RequestsController: the API server\'s answers', () => {
  it('the Pod is gone (404): the request is completed, without a Warning', async () => {
    const h = harness([request('r1', { labels: ADMITTED })]);
    h.api.remove(POD_PATH);
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.api.lines({ method: 'get' }), [`GET ${POD_PATH} 404`]);
    assert.equal(h.stored('r1')?.status?.phase, 'Completed');
    assert.equal(h.stored('r1')?.status?.message, 'Pod job-pod no longer exists');
    assert.deepEqual(await h.events(), []);
  });

  it('a Pod read that fails (500, no answer) fails the reconcile, for the queue to retry: nothing written', async () => {
    for (const fault of [500, networkError()]) {
      const h = harness([request('r1')]);
      h.api.inject({ method: 'get', path: POD_PATH }, fault);
      await assert.rejects(h.controller.reconcile('ns/r1'));
      assert.deepEqual(h.api.lines({ method: 'patch' }), []);
    }
  });

  it('R28: admission from a stale copy: 409, not retried from that copy; decided again from the fresh request (the watch brings it), it labels and pins it', async () => {
    const h = harness([request('r1', { pinned: false })]);
    h.freeze();
    const latest = h.stored('r1')!;
    h.api.set(requestPath('ns', 'r1'), { ...latest, metadata: { ...latest.metadata, annotations: { note: 'edited' } } });
    assert.equal(await h.controller.reconcile('ns/r1'), undefined);
    assert.deepEqual(h.api.lines({ method: 'patch' }).map((l) => l.split(' ').at(-1)), ['409']);
    h.cache.requests = undefined;
    await h.controller.reconcile('ns/r1');
    const admitted = h.stored('r1')!;
    assert.deepEqual(admitted.metadata.labels, ADMITTED);
    assert.deepEqual(admitted.spec.containers, [{ name: 'proxy', statusContext: { containerID: 'containerd://p1', restartCount: 0 } }]);
    assert.equal(admitted.metadata.annotations?.note, 'edited');
    assert.deepEqual(h.actions, ['admit', 'admit']);
  });

  it('R31: a completed request loses its active label (merge patch, null)', async () => {
    const h = harness([request('r1', { labels: ADMITTED, status: { phase: 'Completed', completionTime: ago(1) }, ttl: 600 })]);
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.stored('r1')?.metadata.labels, { [LABEL_NODE_NAME]: 'node-a', [LABEL_POD_UID]: 'uid-1' });
  });

  const expired = () => request('r1', { labels: { [LABEL_POD_UID]: 'uid-1' }, status: { phase: 'Completed', completionTime: ago(700) }, ttl: 600 });

  it('R31: past its TTL: deleted, with the uid precondition', async () => {
    const h = harness([expired()]);
    const { uid } = h.stored('r1')!.metadata;
    await h.controller.reconcile('ns/r1');
    assert.equal(h.stored('r1'), undefined);
    assert.deepEqual(h.api.calls.filter((c) => c.method === 'delete').map((c) => c.body), [{ preconditions: { uid } }]);
  });

  it('past its TTL but already deleted (404): nothing to do, no error', async () => {
    const h = harness([expired()]);
    h.freeze();
    h.api.remove(requestPath('ns', 'r1'));
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.api.lines({ method: 'delete' }), [`DELETE ${requestPath('ns', 'r1')} 404`]);
  });

  it('past its TTL, but replaced by a new request of that name: 409, the new one is kept, nothing retried from the stale copy', async () => {
    const h = harness([expired()]);
    h.freeze();
    h.api.remove(requestPath('ns', 'r1'));
    h.api.set(requestPath('ns', 'r1'), request('r1', { labels: ADMITTED }));
    assert.equal(await h.controller.reconcile('ns/r1'), undefined);
    assert.equal(h.stored('r1')?.metadata.labels?.[LABEL_ACTIVE], 'true');
  });
});

describe('RequestsController: Pods read only when needed, and only Pods', () => {
  it('a completed request: no Pod read (a resync of every request reads no Pod)', async () => {
    const h = harness([request('r1', { labels: { [LABEL_POD_UID]: 'uid-1' }, status: { phase: 'Completed', completionTime: ago(1) }, ttl: 600 })]);
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.api.lines({ method: 'get' }), []);
  });

  for (const podName of ['.', '..']) {
    it(`R27: podName ${JSON.stringify(podName)} (stored before the CRD's pattern): completed without any read`, async () => {
      const r = request('dots');
      r.spec.podName = podName;
      const h = harness([r]);
      await h.controller.reconcile('ns/dots');
      assert.deepEqual(h.api.lines({ method: 'get' }), []);
      assert.match(h.stored('dots')?.status?.message ?? '', /is not a valid Pod name: request not executed/);
    });
  }

  it('a Pod read answered with something else than a Pod (a PodList): an error, nothing written', async () => {
    const h = harness([request('r1', { labels: ADMITTED })]);
    h.api.set(POD_PATH, { apiVersion: 'v1', kind: 'PodList', metadata: { name: 'job-pod', namespace: 'ns' }, items: [] } as V1Pod);
    await assert.rejects(h.controller.reconcile('ns/r1'), /expected a Pod, got PodList/);
    assert.deepEqual(h.api.lines({ method: 'patch' }), []);
  });
});

describe('RequestsController: the readiness gate through a deletion (R33)', () => {
  it('our finalizer is added and removed without touching the others, which the cache does not keep', async () => {
    const r = request('r1', { labels: ADMITTED, unreadySeconds: 5 });
    r.metadata.finalizers = ['example.com/keep-me'];
    const h = harness([r]);
    const stored = h.stored('r1')!;
    // The cache holds the request as the controller keeps it: our finalizer only.
    h.cache.requests = [{ ...stored, metadata: { ...stored.metadata, finalizers: undefined } }];
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.stored('r1')?.metadata.finalizers, ['example.com/keep-me', READINESS_FINALIZER]);
    const done = h.stored('r1')!;
    h.api.set(requestPath('ns', 'r1'), { ...done, status: { phase: 'Completed', completionTime: ago(1) } });
    const completed = h.stored('r1')!;
    h.cache.requests = [{ ...completed, metadata: { ...completed.metadata, finalizers: [READINESS_FINALIZER] } }];
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.stored('r1')?.metadata.finalizers, ['example.com/keep-me']);
  });

  it('the readiness patch carries the Pod\'s uid: a Pod recreated under the name since it was read is not touched (409)', async () => {
    const h = harness([request('r1', { labels: ADMITTED, unreadySeconds: 5 })]);
    await h.controller.reconcile('ns/r1');
    const patches = () => h.api.calls.filter((c) => c.method === 'patch' && c.path === `${POD_PATH}/status`);
    // A controller that read the Pod before its replacement: the write must not reach the new one.
    const stale = h.api.object<V1Pod>(POD_PATH)!;
    const controller = new RequestsController({
      client: { get: async () => stale as never, patch: h.api.patch.bind(h.api), delete: h.api.delete.bind(h.api) },
      events: new EventRecorder(h.api, 'x', createLogger('test', 'error')), log: createLogger('test', 'error'),
      cachedRequest: (ns, name) => h.api.object<ContainerRecreateRequest>(requestPath(ns, name)),
      now: () => NOW,
    });
    h.api.remove(POD_PATH);
    h.api.set(POD_PATH, { ...POD, metadata: { ...POD.metadata, uid: 'uid-2' } });
    await assert.rejects(controller.reconcile('ns/r1'), (err) => isConflict(err));
    assert.deepEqual(patches().map((c) => (c.body as { metadata?: { uid?: string } }).metadata?.uid), ['uid-1']);
    assert.equal(h.api.object<V1Pod>(POD_PATH)?.status?.conditions, undefined);
  });

  it('finalizer first, Pod not-ready; deleted: Pod ready again, then the finalizer off and the request gone', async () => {
    const h = harness([request('r1', { labels: ADMITTED, unreadySeconds: 5 })]);
    const condition = () => h.api.object<V1Pod>(POD_PATH)?.status?.conditions?.find((c) => c.type === READINESS_CONDITION)?.status;
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.stored('r1')?.metadata.finalizers, [READINESS_FINALIZER]);
    await h.controller.reconcile('ns/r1');
    assert.equal(condition(), 'False');
    // Someone deletes the request while it runs: the finalizer holds it.
    await h.api.delete(requestPath('ns', 'r1'));
    assert.ok(h.stored('r1')?.metadata.deletionTimestamp);
    await h.controller.reconcile('ns/r1');
    assert.equal(condition(), 'True');
    assert.ok(h.stored('r1'), 'still held by the finalizer');
    await h.controller.reconcile('ns/r1');
    assert.equal(h.stored('r1'), undefined);
    await h.controller.reconcile('ns/r1');
    assert.deepEqual(h.api.lines({ method: 'patch' }).map((l) => l.split(' ').slice(1).join(' ')), [
      `${requestPath('ns', 'r1')} 200`, `${POD_PATH}/status 200`, `${POD_PATH}/status 200`, `${requestPath('ns', 'r1')} 200`,
    ]);
    // The Pod's other status is left as it was.
    assert.equal(h.api.object<V1Pod>(POD_PATH)?.status?.containerStatuses?.length, 1);
  });
});
