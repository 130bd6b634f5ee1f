// The I/O around decideLifecycle(), against a fake API: a request that does not match its Pod is
// completed without being executed, and its Pod gets one Warning however many such requests come.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import type { EventRecorder, PodEvent, PodRef } from '../common/events.ts';
import type { KubeClient } from '../common/kube/client.ts';
import { createLogger } from '../common/log.ts';
import { RequestsController } from './requests-controller.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { API_VERSION, KIND, LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID } from '../api/container-recreate-request.ts';

const POD: V1Pod = {
  metadata: { namespace: 'ns', name: 'job-pod', uid: 'uid-1' },
  spec: { nodeName: 'node-a', containers: [{ name: 'app' }, { name: 'proxy' }] },
  status: { phase: 'Running', containerStatuses: [{ name: 'proxy', containerID: 'containerd://p1', restartCount: 0, ready: true, image: 'x', imageID: 'x' }] },
};

function request(name: string, node: string): ContainerRecreateRequest {
  return {
    apiVersion: API_VERSION, kind: KIND,
    metadata: { namespace: 'ns', name, resourceVersion: '1', creationTimestamp: new Date().toISOString(), labels: { [LABEL_NODE_NAME]: node, [LABEL_POD_UID]: 'uid-1', [LABEL_ACTIVE]: 'true' } },
    spec: { podName: 'job-pod', containers: [{ name: 'proxy', statusContext: { containerID: 'containerd://p1', restartCount: 0 } }] },
  };
}

function harness(requests: ContainerRecreateRequest[]) {
  const patches: { path: string; body: { status?: { phase?: string; message?: string } } }[] = [];
  const events: { pod: PodRef; event: PodEvent }[] = [];
  const client = {
    get: async () => POD,
    patch: async (path: string, body: (typeof patches)[number]['body']) => {
      patches.push({ path, body });
      return {};
    },
  } as unknown as KubeClient;
  const recorder = { emit: (pod: PodRef, event: PodEvent) => events.push({ pod, event }) } as unknown as EventRecorder;
  const controller = new RequestsController({
    client, events: recorder, log: createLogger('test', 'error'),
    cachedRequest: (_ns, name) => requests.find((r) => r.metadata.name === name),
  });
  return { controller, patches, events };
}

describe('RequestsController: requests that do not match their Pod', () => {
  it('completes each without executing it, with one RequestRefused Warning on the Pod', async () => {
    const forged = [request('forged-1', 'other-node'), request('forged-2', 'other-node'), request('forged-3', 'elsewhere')];
    const h = harness(forged);
    for (const r of forged) await h.controller.reconcile(`ns/${r.metadata.name}`);
    assert.equal(h.patches.length, 3);
    for (const p of h.patches) {
      assert.match(p.path, /\/status$/);
      assert.equal(p.body.status?.phase, 'Completed');
      assert.match(p.body.status?.message ?? '', /does not match the node of Pod job-pod \(node-a\): request not executed/);
    }
    assert.equal(h.events.length, 1);
    assert.equal(h.events[0]?.event.reason, EVENT_REASONS.requestRefused);
    assert.equal(h.events[0]?.event.type, 'Warning');
    assert.deepEqual(h.events[0]?.pod, { namespace: 'ns', name: 'job-pod', uid: 'uid-1' });
  });

  it('a request that matches its Pod is left to the agent: no write, no event', async () => {
    const h = harness([request('ours', 'node-a')]);
    await h.controller.reconcile('ns/ours');
    assert.deepEqual(h.patches, []);
    assert.deepEqual(h.events, []);
  });
});
