// e2e group: shared
// ContainerRecreateRequests end to end: the agent and the controller against the real
// kube-apiserver, kubelet and containerd of the local cluster (the agent killed in the middle of
// one: e2e/agent-crash.test.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import type { CRRSpec } from '../api/container-recreate-request.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import * as jobs from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { agentPod, deployProject, scrapePod } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import * as requests from './support/requests.ts';
import { loopPod } from './support/requests.ts';
import { waitFor } from './support/wait.ts';

const { core } = clients();
let namespace: string;

const runningPod = (pod: V1Pod) => requests.runningPod(namespace, pod);
const createRequest = (name: string, spec: CRRSpec) => requests.createRequest(namespace, name, spec);
const readRequest = (name: string) => jobs.readRequest(namespace, name);
const completed = (name: string, timeoutMs?: number) => jobs.completedRequest(namespace, name, timeoutMs);

async function podEvents(pod: string): Promise<string[]> {
  const list = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod}` });
  return list.items.map((e) => `${e.reason}: ${e.message}`);
}

describe('ContainerRecreateRequest on the local cluster', () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'crr');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('restarts a container of a restartPolicy Always Pod in place, then deletes the request after its TTL', async () => {
    const pod = await runningPod(loopPod('always', 'Always', "trap 'exit 0' TERM"));
    const created = Date.now();
    await createRequest('restart-always', { podName: 'always', containers: [{ name: 'worker' }], ttlSecondsAfterFinished: 3 });
    const done = await completed('restart-always');
    const state = done.status?.containerRecreateStates?.[0];
    assert.equal(state?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.equal(state?.isKilled, true);
    assert.equal(done.metadata.labels?.['crr.sidecar-terminator.dev/node-name'], clusterEnv().nodeName);
    assert.equal(done.spec.containers[0]?.statusContext?.containerID, pod.status?.containerStatuses?.[0]?.containerID);
    const after = await core.readNamespacedPod({ namespace, name: 'always' });
    assert.equal(after.status?.containerStatuses?.[0]?.restartCount, 1);
    console.log(`# request created → Completed (restarted, running again): ${Date.now() - created} ms`);
    assert.ok((await podEvents('always')).some((e) => e.startsWith(`${EVENT_REASONS.killing}: Stopping container worker`)));
    await waitFor(async () => (await readRequest('restart-always')) === undefined, { description: 'request deleted after its TTL', timeoutMs: 30_000 });
  });

  it('stops a container of a restartPolicy Never Pod and records its exit code', async () => {
    await runningPod(loopPod('never', 'Never', "trap 'exit 7' TERM"));
    const created = Date.now();
    await createRequest('stop-never', { podName: 'never', containers: [{ name: 'worker' }] });
    const done = await completed('stop-never');
    const elapsed = Date.now() - created;
    const state = done.status?.containerRecreateStates?.[0];
    assert.deepEqual({ phase: state?.phase, exitCode: state?.exitCode, isKilled: state?.isKilled }, { phase: 'Succeeded', exitCode: 7, isKilled: true });
    const pod = await core.readNamespacedPod({ namespace, name: 'never' });
    assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 0);
    const metrics = await scrapePod(await agentPod(), 9440);
    assert.match(metrics, /sidecar_terminator_agent_requests_completed_total\{outcome="succeeded"\} [1-9]/);
    console.log(`# request created → container exited, request Completed (seen by polling every 500 ms): ${elapsed} ms`);
    const stopSum = Number(/^sidecar_terminator_agent_stop_seconds_sum (\S+)/m.exec(metrics)?.[1]);
    const stopCount = Number(/^sidecar_terminator_agent_stop_seconds_count (\S+)/m.exec(metrics)?.[1]);
    const rss = Number(/^process_resident_memory_bytes (\S+)/m.exec(metrics)?.[1]);
    const pods = (await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${clusterEnv().nodeName}` })).items.length;
    console.log(`# agent: request seen → container exited, mean of ${stopCount}: ${Math.round((stopSum / stopCount) * 1000)} ms; RSS ${(rss / 1048576).toFixed(1)} MiB with ${pods} Pods on its node`);
  });

  it("runs the container's own preStop hook before the stop, through the runtime", async () => {
    // The TERM trap exits 8 only if the hook wrote its file first ("drained\n" is 8 bytes).
    const pod = loopPod('hooked', 'Never', "trap 'exit $(cat /tmp/drained 2>/dev/null | wc -c)' TERM");
    pod.spec!.containers[0]!.lifecycle = { preStop: { exec: { command: ['sh', '-c', 'echo drained > /tmp/drained'] } } };
    await runningPod(pod);
    await createRequest('with-hook', { podName: 'hooked', containers: [{ name: 'worker' }] });
    const done = await completed('with-hook');
    assert.equal(done.status?.containerRecreateStates?.[0]?.exitCode, 8, JSON.stringify(done.status));
  });

  it('reports a failing preStop hook as an event and stops the container anyway', async () => {
    const pod = loopPod('bad-hook', 'Never', "trap 'exit 0' TERM");
    pod.spec!.containers[0]!.lifecycle = { preStop: { exec: { command: ['sh', '-c', 'echo no drain for you >&2; exit 3'] } } };
    await runningPod(pod);
    await createRequest('bad-hook', { podName: 'bad-hook', containers: [{ name: 'worker' }] });
    const done = await completed('bad-hook');
    assert.equal(done.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
    const events = await podEvents('bad-hook');
    assert.ok(events.some((e) => e.startsWith(`${EVENT_REASONS.failedPreStopHook}:`) && e.includes('exited with code 3') && e.includes('no drain for you')), events.join('\n'));
  });

  it('completes a request for a container the Pod does not have, with a message', async () => {
    await runningPod(loopPod('missing', 'Always', "trap 'exit 0' TERM"));
    await createRequest('missing-container', { podName: 'missing', containers: [{ name: 'nope' }] });
    const done = await completed('missing-container');
    assert.match(done.status?.message ?? '', /has no container nope/);
    const pod = await core.readNamespacedPod({ namespace, name: 'missing' });
    assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 0);
  });

  it('completes a request for a Pod that does not exist, with a message', async () => {
    await createRequest('no-pod', { podName: 'ghost', containers: [{ name: 'worker' }] });
    const done = await completed('no-pod');
    assert.match(done.status?.message ?? '', /Pod ghost not found/);
  });

  it('rejects a malformed request and changes to an immutable spec', async () => {
    await assert.rejects(createRequest('bad-deadline', { podName: 'x', containers: [{ name: 'a' }], activeDeadlineSeconds: 1 }), /activeDeadlineSeconds/);
    await assert.rejects(createRequest('no-containers', { podName: 'x', containers: [] }), /containers/);
    await createRequest('immutable', { podName: 'ghost2', containers: [{ name: 'a' }] });
    const patch = () => kubectl('-n', namespace, 'patch', 'stcrr', 'immutable', '--type=merge', '-p', '{"spec":{"podName":"other"}}');
    assert.throws(patch, /spec.podName is immutable/);
  });

  const policies = versionFeatures().admissionPolicies;
  it('R32: keeps the node and pod-uid labels immutable once set (ValidatingAdmissionPolicy)', { skip: !policies && 'an admission policy, 1.30+; before, labels are routing only (e2e/security.test.ts)' }, async () => {
    await runningPod(loopPod('labelled', 'Always', "trap 'exit 0' TERM"));
    await createRequest('labelled', { podName: 'labelled', containers: [{ name: 'worker' }] });
    await completed('labelled');
    const relabel = () => kubectl('-n', namespace, 'label', 'stcrr', 'labelled', '--overwrite', 'crr.sidecar-terminator.dev/node-name=elsewhere');
    assert.throws(relabel, /crr.sidecar-terminator.dev\/node-name is immutable once set/);
  });

  it('marks the Pod not-ready for unreadyGracePeriodSeconds before the stop, and ready again after', async () => {
    const pod = loopPod('gated', 'Always', "trap 'exit 0' TERM");
    pod.spec!.readinessGates = [{ conditionType: 'sidecar-terminator.dev/ready' }];
    await core.createNamespacedPod({ namespace, body: pod });
    // Whoever owns the gate sets it first; here the test does.
    const setReady = async () => {
      await core.patchNamespacedPodStatus({
        namespace, name: 'gated',
        body: { status: { conditions: [{ type: 'sidecar-terminator.dev/ready', status: 'True', lastTransitionTime: new Date() }] } },
      }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
    };
    await waitFor(async () => {
      await setReady();
      const p = await core.readNamespacedPod({ namespace, name: 'gated' });
      return p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    }, { description: 'Pod ready through its gate' });

    await createRequest('unready', { podName: 'gated', containers: [{ name: 'worker' }], strategy: { unreadyGracePeriodSeconds: 3 } });
    const notReady = await waitFor(async () => {
      const p = await core.readNamespacedPod({ namespace, name: 'gated' });
      return p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'False' ? p : undefined;
    }, { description: 'Pod not ready while the request runs' });
    assert.equal(notReady.status?.containerStatuses?.[0]?.restartCount, 0, 'not-ready comes before the stop');
    const duringRequest = await readRequest('unready');
    assert.ok(duringRequest?.metadata.finalizers?.includes('sidecar-terminator.dev/restore-readiness'));

    const done = await completed('unready');
    assert.equal(done.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
    await waitFor(async () => {
      const p = await core.readNamespacedPod({ namespace, name: 'gated' });
      const gate = p.status?.conditions?.find((c) => c.type === 'sidecar-terminator.dev/ready')?.status;
      const r = await readRequest('unready');
      return gate === 'True' && !r?.metadata.finalizers?.length;
    }, { description: 'readiness restored and finalizer removed' });
    const after = await core.readNamespacedPod({ namespace, name: 'gated' });
    assert.equal(after.status?.containerStatuses?.[0]?.restartCount, 1);
  });
});
