// The controller's cluster cache (R6, R48): every request, indexed by the Pod uids it names; the Pods
// the sidecar rules may concern; its subscribers told in the order they subscribed.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_POD_UID, requestPath } from '../api/container-recreate-request.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import { createLogger } from '../common/log.ts';
import { FakeKubeApi } from '../test/support/fake-api.ts';
import { main, makePod, sidecar, UID, WHEN_JOB_EXIT } from '../test/support/pods.ts';
import type { ControllerMetrics } from './metrics.ts';
import { ClusterCache } from './cluster-cache.ts';
import { clusterPolicyPath, namespacedPolicyPath } from '../api/sidecar-policy.ts';

const metrics = { watchRestarts: { inc: () => {} } } as unknown as ControllerMetrics;

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(cond(), 'condition not reached');
}

const request = (name: string): ContainerRecreateRequest => ({
  apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
  metadata: { name, namespace: 'ns', labels: { [LABEL_POD_UID]: UID } },
  spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] },
}) as ContainerRecreateRequest;

/** A Job's Pod with a marked sidecar, a service's Pod (restartPolicy Always), and one request. */
function cluster(): FakeKubeApi {
  const api = new FakeKubeApi();
  api.set(podPath('ns', 'job-pod'), makePod({ containers: [main('main', { exit: 0 }), sidecar('proxy', 'running', [WHEN_JOB_EXIT])] }));
  api.set(podPath('ns', 'service'), { ...makePod({ containers: [main('main')], restartPolicy: 'Always' }), metadata: { name: 'service', namespace: 'ns', uid: 'other' } });
  api.set(requestPath('ns', 'r1'), request('r1'));
  return api;
}

describe('ClusterCache (R6, R48)', () => {
  it('keeps the requests and the Pods of interest, found as the controllers read them, and tells its subscribers in order', async () => {
    const api = cluster();
    const cache = new ClusterCache({ client: api, metrics, log: createLogger('test', 'error') });
    const told: string[] = [];
    cache.onRequestChange.add((key) => told.push(`request ${key}`));
    cache.onRequestChange.add((_key, r) => told.push(`its Pod ${r.spec.podName}`));
    cache.onPodChange.add((key) => told.push(`pod ${key}`));
    cache.onPodGone.add((key) => told.push(`gone ${key}`));
    cache.start();
    try {
      await until(() => cache.isSynced());
      assert.equal(cache.request('ns', 'r1')?.metadata.name, 'r1');
      assert.equal(cache.pod('ns/job-pod')?.pod.uid, UID);
      assert.equal(cache.pod('ns/service'), undefined, 'restartPolicy Always');
      assert.deepEqual(cache.requestsForPod('ns', UID).map((r) => r.metadata.name), ['r1']);
      assert.deepEqual([...cache.requestKeys()], ['ns/r1']);
      assert.deepEqual([...cache.podKeys()], ['ns/job-pod']);
      await until(() => told.length === 3);
      assert.deepEqual(told.filter((t) => !t.startsWith('pod')), ['request ns/r1', 'its Pod job-pod']);
      api.remove(podPath('ns', 'job-pod'));
      await until(() => told.includes('gone ns/job-pod'));
    } finally {
      cache.stop();
    }
  });
});

describe('ClusterCache: sidecar policies (R54)', () => {
  const podLists = (api: FakeKubeApi) => api.lines({ method: 'get' }).filter((l) => l.startsWith(`GET ${podPath()} `)).length;

  it('a Job Pod kept by no marker is decided once a policy matches its container, from the cache: no Pod is listed; a status write changes nothing', async () => {
    const api = new FakeKubeApi();
    api.set(podPath('ns', 'job-pod'), makePod({ containers: [main('main', { exit: 0 }), main('mesh-proxy')] }));
    const cache = new ClusterCache({ client: api, metrics, log: createLogger('test', 'error') });
    let changes = 0;
    const told: string[] = [];
    cache.policyStore.onChange.add(() => changes++);
    cache.onPodChange.add((key) => told.push(key));
    cache.start();
    try {
      await until(() => cache.isSynced());
      assert.equal(cache.pod('ns/job-pod'), undefined, 'nothing marks it yet');
      assert.deepEqual([...cache.podKeys()], []);
      const listed = podLists(api);
      const policy = { apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ClusterSidecarPolicy', metadata: { name: 'mesh', generation: 1 }, spec: { containers: [{ name: 'mesh-*' }] } };
      api.set(clusterPolicyPath('mesh'), policy);
      await until(() => changes === 1);
      assert.deepEqual(cache.policies.forNamespace('ns').map((p) => p.name), ['mesh']);
      assert.ok(cache.pod('ns/job-pod'), 'of interest at once');
      await until(() => told.includes('ns/job-pod'));
      assert.equal(podLists(api), listed, 'decided from the cache, with no list');
      api.set(clusterPolicyPath('mesh'), { ...policy, status: { matchedPods: 1 } });
      await until(() => cache.policyStore.all()[0]?.status.matchedPods === 1);
      assert.equal(changes, 1, 'a status write is no change of policies');
      api.set(namespacedPolicyPath('ns', 'bad'), { ...policy, kind: 'SidecarPolicy', metadata: { name: 'bad', namespace: 'ns' }, spec: { containers: [{}] } });
      await until(() => cache.policyStore.all().length === 2);
      const bad = cache.policyStore.all().find((p) => p.name === 'bad')!;
      assert.equal(bad.parsed.valid, false, 'kept, for its status to say why');
      assert.deepEqual(cache.policies.forNamespace('ns').map((p) => p.name), ['mesh']);
    } finally {
      cache.stop();
    }
  });

  it('a namespaced policy\'s change has its own namespace\'s Pods decided again, no other\'s; a finished Pod nothing marks is not kept', async () => {
    const api = new FakeKubeApi();
    const unmarked = (namespace: string, name: string, phase?: string) => {
      const pod = makePod({ containers: [main('main', { exit: 0 }), main('shipper')] });
      return { ...pod, metadata: { ...pod.metadata, namespace, name, uid: `${namespace}-${name}` }, status: { ...pod.status, ...(phase ? { phase } : {}) } };
    };
    api.set(podPath('a', 'job'), unmarked('a', 'job'));
    api.set(podPath('b', 'job'), unmarked('b', 'job'));
    api.set(podPath('a', 'done'), unmarked('a', 'done', 'Succeeded'));
    const cache = new ClusterCache({ client: api, metrics, log: createLogger('test', 'error') });
    const told: string[] = [];
    cache.onPodChange.add((key) => told.push(key));
    cache.start();
    try {
      await until(() => cache.isSynced());
      const listed = podLists(api);
      for (const shipper of ['ship*', 'shipper', 'shipp?r']) {
        api.set(namespacedPolicyPath('a', 'shippers'), { kind: 'SidecarPolicy', metadata: { name: 'shippers', namespace: 'a' }, spec: { containers: [{ name: shipper }] } });
      }
      await until(() => told.length > 0);
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(told, ['a/job'], 'three edits in a moment: one decision, of its own namespace\'s Pod');
      assert.equal(cache.pod('b/job'), undefined);
      assert.equal(cache.pod('a/done'), undefined, 'finished: no policy can concern it');
      assert.equal(podLists(api), listed);
    } finally {
      cache.stop();
    }
  });

  it('a namespace\'s new labels have its kept Pods decided again at once; other edits of it, and other namespaces, do not', async () => {
    const api = cluster();
    const nsPath = resourcePath('v1', 'namespaces', undefined, 'ns');
    api.set(nsPath, { metadata: { name: 'ns', labels: { team: 'a' } } });
    api.set(resourcePath('v1', 'namespaces', undefined, 'other'), { metadata: { name: 'other', labels: {} } });
    const cache = new ClusterCache({ client: api, metrics, log: createLogger('test', 'error') });
    const told: string[] = [];
    cache.onPodChange.add((key) => told.push(key));
    cache.start();
    try {
      await until(() => cache.isSynced() && told.length > 0);
      // The namespaces first seen are a change of their scope too: let it pass.
      await new Promise((r) => setTimeout(r, 300));
      told.length = 0;
      api.set(nsPath, { metadata: { name: 'ns', labels: { team: 'a' }, annotations: { note: 'x' } } });
      api.set(resourcePath('v1', 'namespaces', undefined, 'other'), { metadata: { name: 'other', labels: { team: 'b' } } });
      api.set(nsPath, { metadata: { name: 'ns', labels: { team: 'b' } } });
      await until(() => told.length === 1);
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(told, ['ns/job-pod']);
    } finally {
      cache.stop();
    }
  });
});
