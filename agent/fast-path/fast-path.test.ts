// FastPath's wiring (R43, R50): exits are acted on only once the API server is found to confine the
// agent's creates to its node; the request is created through the client and handed over once, with
// the sidecars' labels read ahead from the Pod updates.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventRecorder } from '../../common/events.ts';
import { KubeApiError } from '../../common/kube/client.ts';
import { createLogger } from '../../common/log.ts';
import { UrgentWrites } from '../../common/urgent-writes.ts';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { LABEL_NODE_NAME, requestPath } from '../../api/container-recreate-request.ts';
import { projectPod } from '../../rules/projection.ts';
import { requestName } from '../../rules/requests.ts';
import { FakeKubeApi } from '../../test/support/fake-api.ts';
import { main, makePod, NODE, sidecar, UID } from '../../test/support/pods.ts';
import { createAgentMetrics } from '../metrics.ts';
import { DiscoveredRuntimes } from '../runtime/discover.ts';
import { runtimeContainerID } from '../../api/container-id.ts';
import type { RuntimeContainer } from '../runtime/types.ts';
import { fakeRuntime } from '../../test/support/fake-runtime.ts';
import { AGENT_POLICY } from './confinement.ts';
import { FastPath } from './fast-path.ts';
import type { Handoff } from './handoff.ts';

const log = createLogger('test', 'error');
const POD = projectPod(makePod({ containers: [main('main'), sidecar('proxy')] }));
const PROXY: RuntimeContainer = {
  id: runtimeContainerID('proxy-id'), state: 'running', startedAtNs: 1n, finishedAtNs: 0n,
  owner: { podUid: UID, podNamespace: 'ns', podName: 'job-pod', container: 'proxy' },
};
const denied = new KubeApiError(422, 'POST', '/x', JSON.stringify({ kind: 'Status', code: 422, message: `ValidatingAdmissionPolicy '${AGENT_POLICY}' denied request` }));

function harness(confined: boolean) {
  const api = new FakeKubeApi();
  // The API server's policy: a dry run for another node is denied when the agent is confined.
  const create = api.create.bind(api);
  api.create = (async (path: string, body: unknown, query?: Record<string, unknown>) => {
    const node = (body as ContainerRecreateRequest).metadata.labels?.[LABEL_NODE_NAME];
    if (confined && query?.dryRun === 'All' && node !== NODE) throw denied;
    return create(path, body as never, query as never);
  }) as typeof api.create;
  const runtimeCalls: string[] = [];
  const runtime = fakeRuntime({
    calls: runtimeCalls,
    status: (id) => (id === PROXY.id ? PROXY : undefined),
    stop: async () => assert.fail('the fast path stops nothing'),
    exec: async () => assert.fail('the fast path runs nothing'),
  });
  const handedOver: Handoff[] = [];
  const fastPath = new FastPath({
    client: api,
    creates: new UrgentWrites(),
    nodeName: NODE,
    namespace: 'sidecar-terminator',
    cache: {
      policiesCurrent: () => true,
      sidecarPod: (namespace, name) => (namespace === POD.namespace && name === POD.name ? POD : undefined),
      sidecarPodOfContainer: (containerID) => (POD.statuses.some((s) => s.containerID === containerID) ? POD : undefined),
      activeRequests: () => [],
    },
    runtimes: new DiscoveredRuntimes([runtime]),
    // The stops are the Reconciler's (agent/reconciler.test.ts): none begun here.
    stopFirst: async () => new Set(),
    handOff: (handoff) => {
      handedOver.push(handoff);
    },
    events: new EventRecorder(api, 'sidecar-terminator-agent', log, { host: NODE }),
    metrics: createAgentMetrics(),
    log,
    workers: 2,
    requestOptions: { activeDeadlineSeconds: 300, ttlSecondsAfterFinished: 600 },
  });
  const creates = () => api.calls.filter((c) => c.method === 'create' && c.path === requestPath('ns'));
  return { api, fastPath, runtime, runtimeCalls, handedOver, creates };
}

describe('FastPath (R43, R50)', () => {
  it('not yet known to be confined: an exit is left to the controller; once confined, it creates the request and hands it over once', async () => {
    const h = harness(true);
    h.fastPath.containerExited(h.runtime, runtimeContainerID('main-id'), 0);
    await h.fastPath.idle();
    assert.deepEqual(h.creates(), []);
    assert.equal(await h.fastPath.start(), 'enabled');
    h.fastPath.containerExited(h.runtime, runtimeContainerID('main-id'), 0);
    await h.fastPath.idle();
    h.fastPath.stop();
    assert.equal(h.creates().length, 1);
    assert.deepEqual(h.handedOver.map((handoff) => handoff.request.metadata.name), [requestName(UID, 1)]);
    assert.equal(h.api.object<ContainerRecreateRequest>(requestPath('ns', requestName(UID, 1)))?.metadata.uid, h.handedOver[0]!.request.metadata.uid);
  });

  it('not confined (both dry runs admitted): exits are never acted on, and the agent is not ready', async () => {
    const h = harness(false);
    assert.equal(await h.fastPath.start(), 'not-confined');
    h.fastPath.containerExited(h.runtime, runtimeContainerID('main-id'), 0);
    await h.fastPath.idle();
    h.fastPath.stop();
    assert.deepEqual(h.creates(), []);
    assert.match(h.fastPath.notReadyReason() ?? '', /^not confined to its node/);
  });

  it('the sidecar\'s labels, read on the Pod\'s update, answer for it in the hand-off without a runtime call at the exit', async () => {
    const h = harness(true);
    await h.fastPath.start();
    h.fastPath.podChanged(POD.namespace, POD.name, POD);
    // The read is in the background: its answer is in once the runtime's promise has settled.
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(h.runtimeCalls, ['status proxy-id'], 'read once, on the update');
    h.fastPath.containerExited(h.runtime, runtimeContainerID('main-id'), 0);
    await h.fastPath.idle();
    h.fastPath.stop();
    assert.deepEqual(h.runtimeCalls, ['status proxy-id'], 'not asked again at the exit');
    const answer = await h.handedOver[0]?.answers.get(`containerd://proxy-id` as never);
    assert.equal(answer?.container.owner?.container, 'proxy');
  });
});
