// The agent's node cache (R43, R45, R48): its two watches, the readers the fast path and the Reconciler
// use, and its subscribers told in the order they subscribed.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID, requestPath } from '../api/container-recreate-request.ts';
import { podPath } from '../common/kube/paths.ts';
import { createLogger } from '../common/log.ts';
import { FakeKubeApi } from '../test/support/fake-api.ts';
import { main, makePod, NODE, sidecar, UID, WHEN_JOB_EXIT } from '../test/support/pods.ts';
import type { AgentMetrics } from './metrics.ts';
import { NodeCache } from './node-cache.ts';
import { clusterPolicyPath, namespacedPolicyPath } from '../api/sidecar-policy.ts';

const metrics = { watchRestarts: { inc: () => {} } } as unknown as AgentMetrics;

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(cond(), 'condition not reached');
}

const activeRequest = (name: string, node = NODE): ContainerRecreateRequest => ({
  apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
  metadata: { name, namespace: 'ns', labels: { [LABEL_NODE_NAME]: node, [LABEL_ACTIVE]: 'true', [LABEL_POD_UID]: UID } },
  spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] },
}) as ContainerRecreateRequest;

describe('NodeCache (R43, R45)', () => {
  it('holds the node\'s Pods and active requests, found as the Reconciler and the fast path read them, and tells its subscribers in order', async () => {
    const api = new FakeKubeApi();
    api.set(podPath('ns', 'job-pod'), makePod({ containers: [main('main', { exit: 0 }), sidecar('proxy', 'running', [WHEN_JOB_EXIT])] }));
    api.set(podPath('ns', 'elsewhere'), { ...makePod({ containers: [main('main')], nodeName: 'node-2' }), metadata: { name: 'elsewhere', namespace: 'ns', uid: 'other' } });
    api.set(requestPath('ns', 'r1'), activeRequest('r1'));
    api.set(requestPath('ns', 'r2'), activeRequest('r2', 'node-2'));
    const cache = new NodeCache({ client: api, nodeName: NODE, metrics, log: createLogger('test', 'error') });
    const told: string[] = [];
    cache.onPodChange.add((namespace, name) => told.push(`first ${namespace}/${name}`));
    cache.onPodChange.add((namespace, name, cached) => told.push(`second ${namespace}/${name} ${cached.pod.uid}`));
    cache.onPodGone.add((namespace, name) => told.push(`gone ${namespace}/${name}`));
    cache.onRequestChange.add((r) => told.push(`request ${r.metadata.name}`));
    assert.equal(cache.notReadyReason(), 'pod watch not synced');
    cache.start();
    try {
      await until(() => cache.notReadyReason() === undefined);
      assert.equal(cache.agentPod('ns', 'job-pod')?.uid, UID);
      assert.equal(cache.agentPod('ns', 'elsewhere'), undefined, 'another node\'s Pod');
      assert.equal(cache.sidecarPod('ns', 'job-pod')?.uid, UID);
      assert.equal(cache.sidecarPodOfContainer('containerd://proxy-id')?.uid, UID);
      assert.deepEqual(cache.requests('ns').map((r) => r.metadata.name), ['r1']);
      assert.deepEqual(cache.activeRequests('ns', UID).map((r) => r.metadata.name), ['r1']);
      assert.deepEqual(cache.activeRequests('other', UID), []);
      assert.equal(cache.hasRequests('ns', 'job-pod'), true);
      assert.equal(cache.hasRequests('ns', 'elsewhere'), false);
      await until(() => told.length === 3);
      assert.deepEqual(told.filter((t) => t.includes('job-pod')), ['first ns/job-pod', `second ns/job-pod ${UID}`]);
      assert.ok(told.includes('request r1'));
      api.remove(podPath('ns', 'job-pod'));
      await until(() => told.includes('gone ns/job-pod'));
    } finally {
      cache.stop();
    }
  });
});

describe('NodeCache: sidecar policies (R54)', () => {
  it('a Job Pod nothing marks is told again with its rules\' projection once a policy matches its container, from the cache: the node\'s Pods are not listed', async () => {
    const api = new FakeKubeApi();
    api.set(podPath('ns', 'job-pod'), makePod({ containers: [main('main', { exit: 0 }), main('mesh-proxy')] }));
    const cache = new NodeCache({ client: api, nodeName: NODE, metrics, log: createLogger('test', 'error') });
    const told: string[] = [];
    cache.onPodChange.add((namespace, name, cached) => told.push(`${namespace}/${name} ${cached.termination?.containers.map((c) => c.policy?.policy ?? '-').join(',') ?? 'none'}`));
    cache.start();
    try {
      await until(() => cache.notReadyReason() === undefined && told.length === 1);
      assert.deepEqual(told, ['ns/job-pod none']);
      assert.equal(cache.sidecarPod('ns', 'job-pod'), undefined, 'nothing marks it yet');
      const lists = () => api.lines({ method: 'get' }).filter((l) => l.startsWith(`GET ${podPath()} `)).length;
      const listed = lists();
      api.set(clusterPolicyPath('mesh'), { kind: 'ClusterSidecarPolicy', metadata: { name: 'mesh' }, spec: { mode: 'Enforce', containers: [{ name: 'mesh-*' }] } });
      await until(() => told.length === 2);
      assert.deepEqual(told[1], 'ns/job-pod -,ClusterSidecarPolicy/mesh');
      assert.equal(cache.sidecarPodOfContainer('containerd://mesh-proxy-id')?.containers[1]?.policy?.policy, 'ClusterSidecarPolicy/mesh');
      assert.equal(lists(), listed, 'from the cache, with no list');
    } finally {
      cache.stop();
    }
  });

  it('keeps a namespace\'s SidecarPolicies in full only while the namespace has Pods on the node: read with one list of that namespace when its first Pod comes', async () => {
    const api = new FakeKubeApi();
    api.set(namespacedPolicyPath('other', 'shippers'), { kind: 'SidecarPolicy', metadata: { name: 'shippers', namespace: 'other' }, spec: { mode: 'Enforce', containers: [{ name: 'shipper' }] } });
    const cache = new NodeCache({ client: api, nodeName: NODE, metrics, log: createLogger('test', 'error') });
    cache.start();
    const podIn = (namespace: string, name: string) => {
      const pod = makePod({ containers: [main('main', { exit: 0 }), main('shipper')] });
      return { ...pod, metadata: { ...pod.metadata, namespace, name, uid: `${namespace}-${name}` } };
    };
    const namespaceLists = () => api.lines({ method: 'get' }).filter((l) => l.startsWith(`GET ${namespacedPolicyPath('other')} `)).length;
    try {
      await until(() => cache.notReadyReason() === undefined);
      api.set(podPath('other', 'job'), podIn('other', 'job'));
      await until(() => cache.sidecarPod('other', 'job')?.containers[1]?.policy?.policy === 'SidecarPolicy/other/shippers');
      assert.equal(namespaceLists(), 1);
      api.remove(podPath('other', 'job'));
      await until(() => cache.agentPod('other', 'job') === undefined);
      api.set(podPath('other', 'again'), podIn('other', 'again'));
      await until(() => cache.sidecarPod('other', 'again')?.containers[1]?.policy !== undefined);
      assert.equal(namespaceLists(), 2, 'dropped when the namespace had no Pod here, read again when it has one');
    } finally {
      cache.stop();
    }
  });
});
