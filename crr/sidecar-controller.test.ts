// The I/O around decide(), against a fake API: what reaches the API server and the Pod's events.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EventRecorder, PodEvent as RecordedEvent, PodRef } from '../common/events.ts';
import type { KubeClient } from '../common/kube/client.ts';
import { KubeApiError } from '../common/kube/client.ts';
import { createLogger } from '../common/log.ts';
import { createControllerMetrics } from './metrics.ts';
import { EXISTS_RECHECK_MS, isRejection, REJECTED_RETRY_MS, SidecarController } from './sidecar-controller.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { exited, main, makePod, NOW, sidecar, UID } from '../rules/fixtures.ts';
import { projectPod } from '../rules/projection.ts';
import { requestName } from '../rules/requests.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID } from '../api/container-recreate-request.ts';

const metrics = createControllerMetrics();
const log = createLogger('test', 'error');

function harness(create: (body: ContainerRecreateRequest) => Promise<unknown>, requests: ContainerRecreateRequest[] = []) {
  const created: ContainerRecreateRequest[] = [];
  const events: RecordedEvent[] = [];
  const client = {
    create: async (_path: string, body: ContainerRecreateRequest) => {
      created.push(body);
      return create(body);
    },
    patch: async () => ({}),
  } as unknown as KubeClient;
  const recorder = { emit: (_pod: PodRef, event: RecordedEvent) => events.push(event) } as unknown as EventRecorder;
  let pod = projectPod(makePod({ containers: [main('app', exited(0)), sidecar('proxy')] }));
  const controller = new SidecarController({
    client,
    cachedPod: () => ({ pod, receivedAtMs: NOW }),
    requestsForPod: () => requests,
    nodeKind: async () => 'real',
    events: recorder,
    metrics,
    options: { activeDeadlineSeconds: 300, ttlSecondsAfterFinished: 600, retryBaseDelaySeconds: 10, retryMaxDelaySeconds: 300, sidecarStartTimeoutSeconds: 120 },
    log,
    now: () => NOW,
  });
  return { controller, created, events, setPod: (p: typeof pod) => (pod = p) };
}

const apiError = (code: number, message: string) =>
  new KubeApiError(code, 'POST', '/apis/x', JSON.stringify({ kind: 'Status', message, reason: 'Invalid' }));

describe('isRejection', () => {
  const rows: Array<[number | undefined, boolean]> = [
    [400, true], [403, true], [404, true], [422, true], [409, false], [429, false], [500, false], [503, false], [undefined, false],
  ];
  for (const [code, want] of rows) it(`${code}: ${want}`, () => assert.equal(isRejection(code), want));
});

describe('SidecarController: creating a request', () => {
  it('creates it and emits the Normal event once', async () => {
    const h = harness(async () => ({}));
    await h.controller.reconcile('ns/job-pod');
    assert.equal(h.created.length, 1);
    assert.deepEqual(h.events.map((e) => e.reason), [EVENT_REASONS.stopping]);
  });

  it('a request the API rejects as invalid: one Warning with its message, a long requeue, no hot loop', async () => {
    const h = harness(async () => { throw apiError(422, 'spec.activeDeadlineSeconds: Invalid value: 999999'); });
    const first = await h.controller.reconcile('ns/job-pod');
    assert.deepEqual(first, { requeueAfterMs: REJECTED_RETRY_MS });
    assert.deepEqual(h.events.map((e) => [e.type, e.reason]), [['Warning', EVENT_REASONS.requestRejected]]);
    assert.match(h.events[0]?.message ?? '', /rejected ContainerRecreateRequest sidecar-termination-.* for sidecar "proxy": spec\.activeDeadlineSeconds: Invalid value: 999999\. Trying again in 300s/);
    // The next try gives no second Warning.
    assert.deepEqual(await h.controller.reconcile('ns/job-pod'), { requeueAfterMs: REJECTED_RETRY_MS });
    assert.equal(h.events.length, 1);
  });

  it('a conflict (the agent was first) is not an error and says nothing; looked at again soon', async () => {
    const h = harness(async () => { throw apiError(409, 'already exists'); });
    assert.deepEqual(await h.controller.reconcile('ns/job-pod'), { requeueAfterMs: EXISTS_RECHECK_MS });
    assert.deepEqual(h.events, []);
  });

  for (const code of [429, 500]) {
    it(`a ${code} is thrown, for the queue's own backoff`, async () => {
      const h = harness(async () => { throw apiError(code, 'busy'); });
      await assert.rejects(h.controller.reconcile('ns/job-pod'), /busy/);
      assert.deepEqual(h.events, []);
    });
  }

  it('a request that took our name for another node: skipped, the next name is created', async () => {
    const forged: ContainerRecreateRequest = {
      apiVersion: 'sidecar-terminator.dev/v1alpha1',
      kind: 'ContainerRecreateRequest',
      metadata: { name: requestName(UID, 1), namespace: 'ns', labels: { [LABEL_NODE_NAME]: 'node-2', [LABEL_POD_UID]: UID, [LABEL_ACTIVE]: 'true' } },
      spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] },
    };
    const h = harness(async () => ({}), [forged]);
    await h.controller.reconcile('ns/job-pod');
    assert.deepEqual(h.created.map((r) => r.metadata.name), [requestName(UID, 2)]);
    assert.deepEqual(h.events.map((e) => e.reason), [EVENT_REASONS.stopping]);
  });

  it('a wait with a requeue time is requeued', async () => {
    const h = harness(async () => ({}));
    h.setPod(projectPod(makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'waiting', [], { id: null })] })));
    assert.deepEqual(await h.controller.reconcile('ns/job-pod'), { requeueAfterMs: 110_000 });
    assert.deepEqual(h.events.map((e) => e.reason), [EVENT_REASONS.sidecarNotStarted]);
  });
});

describe('SidecarController: remembered events are bounded by the Pods', () => {
  it('forget drops a Pod; its events may go out again for a new one of that name', async () => {
    const h = harness(async () => { throw apiError(422, 'invalid'); });
    await h.controller.reconcile('ns/job-pod');
    assert.equal(h.controller.rememberedPods(), 1);
    h.controller.forget('ns/job-pod');
    assert.equal(h.controller.rememberedPods(), 0);
    await h.controller.reconcile('ns/job-pod');
    assert.equal(h.events.length, 2);
  });
});
