// e2e group: shared
// A namespace's own requests and Jobs against the Pod's own termination, on the real cluster
// (issue 24, items 4, 8 and 9):
// - a user request with a stale statusContext, minStartedSeconds 3600 and no deadline, created
//   before the mains exit, does not hold up our request for the sidecar: the Job completes at once;
// - requests the agent refuses give the Pod one RequestRefused Warning, however many there are;
// - ignore-exit-code sidecars that ignore SIGTERM: the Job completes at once, and the sidecars are
//   stopped within the grace period after the phase was set, not at kubelet's next sync.
// (On a virtual node, an ignore-exit-code sidecar whose quick-exit container cannot start:
// e2e/virtual-node.test.ts.)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import * as k8s from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../api/container-recreate-request.ts';
import { CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { IGNORE_EXIT_MARK, SIDECAR_MARK, container, podEvents, stopOnTerm } from './support/jobs.ts';
import { KUBELET_SEES_PHASE_MS } from '../agent/request-plan.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus, toDate } from './support/workloads.ts';

const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
let namespace = '';

async function createRequest(name: string, podName: string, containers: object[], spec: object = {}): Promise<void> {
  await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace, plural: PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest', metadata: { name }, spec: { podName, containers, ...spec } },
  });
}

async function warnings(pod: V1Pod, reason: string): Promise<string[]> {
  return (await podEvents(pod)).filter((e) => e.includes(` ${reason}: `));
}

/** The main's exit, and the end of a sidecar, as the Pod status shows them. */
function finished(pod: V1Pod, name: string): Date {
  const at = toDate(containerStatus(pod, name)?.state?.terminated?.finishedAt);
  assert.ok(at, `${name} terminated: ${JSON.stringify(containerStatus(pod, name)?.state)}`);
  return at;
}

describe('security: requests and Job outcomes a namespace can cause', { timeout: 900_000 }, () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'queue');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('a stale user request (statusContext of a gone container, minStartedSeconds 3600, no deadline) does not hold our stop of the sidecar', async () => {
    await jobs.runJob(namespace, 'held', { restartPolicy: 'Never', containers: [container('main', 'sleep 12'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'held').catch(() => undefined);
      return p && containerStatus(p, 'proxy')?.state?.running ? p : undefined;
    }, { description: 'the sidecar running', timeoutMs: 60_000 });
    // Pinned to a container that is not the current one: to the agent, one recreated since, whose
    // new container must run an hour before the request is done.
    const stale = { containerID: 'containerd://0000000000000000000000000000000000000000000000000000000000000000', restartCount: 0 };
    await createRequest('user-stale', pod.metadata!.name!, [{ name: 'proxy', statusContext: stale }], { strategy: { minStartedSeconds: 3600 } });
    await waitFor(async () => (await jobs.readRequest(namespace, 'user-stale'))?.status?.phase === 'Recreating', { description: 'the user request waiting on the agent', timeoutMs: 30_000 });

    const { job, type } = await jobs.finishedJob(namespace, 'held', 60_000);
    const done = await jobs.onlyPod(namespace, 'held');
    console.log(`# ${jobs.timeline('behind a stale user request', job, done, 'main', 'proxy')}`);
    assert.equal(type, 'Complete');
    const lagMs = finished(done, 'proxy').getTime() - finished(done, 'main').getTime();
    assert.ok(lagMs < 15_000, `the sidecar stopped ${lagMs} ms after the main (not held behind the user request)`);
    // The agent writes the outcome once it has seen the exit, which may be after the Job ended.
    const ours = await waitFor(async () => {
      const request = (await jobs.requestsFor(done)).find((r) => r.metadata.name !== 'user-stale');
      return request?.status?.phase === 'Completed' ? request : undefined;
    }, { description: 'our request completed', timeoutMs: 30_000 }).catch(async () => (await jobs.requestsFor(done)).find((r) => r.metadata.name !== 'user-stale'));
    assert.equal(ours?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(ours?.status));
  });

  it('requests the agent refuses: each completed as refused, one RequestRefused Warning for the Pod', async () => {
    // A victim container elsewhere, and a Pod whose (lying) status names it: the agent refuses every
    // request for that Pod when the runtime's labels name another Pod.
    const victimNs = await createTestNamespace(core, 'queue-victim');
    try {
      await core.createNamespacedPod({ namespace: victimNs, body: { metadata: { name: 'victim' }, spec: { nodeName: clusterEnv().nodeName, terminationGracePeriodSeconds: 5, containers: [container('app', 'while true; do sleep 1; done')] } } });
      const victim = await waitFor(async () => {
        const p = await core.readNamespacedPod({ namespace: victimNs, name: 'victim' });
        return p.status?.containerStatuses?.[0]?.state?.running ? p : undefined;
      }, { description: 'the victim running', timeoutMs: 60_000 });
      const victimID = victim.status!.containerStatuses![0]!.containerID!;
      const image = 'sidecar-terminator.local/not-there:1';
      await core.createNamespacedPod({ namespace, body: { metadata: { name: 'liar' }, spec: { nodeName: clusterEnv().nodeName, containers: [container('app', 'sleep 3600', { image })] } } });
      await waitFor(async () => (await core.readNamespacedPod({ namespace, name: 'liar' })).status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImageNeverPull',
        { description: 'the liar Pod settled (its image is never pulled)', timeoutMs: 60_000 });
      await core.patchNamespacedPodStatus({ namespace, name: 'liar', body: { status: { containerStatuses: [{
        name: 'app', image, imageID: '', ready: false, restartCount: 0, started: true, containerID: victimID, state: { running: { startedAt: new Date() } },
      }] } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
      const names = ['refused-1', 'refused-2', 'refused-3', 'refused-4'];
      await Promise.all(names.map((name) => createRequest(name, 'liar', [{ name: 'app' }])));
      for (const name of names) {
        const done = await jobs.completedRequest(namespace, name, 60_000);
        assert.match(done.status?.message ?? '', /refused: .*nothing was executed/, JSON.stringify(done.status));
      }
      await sleep(5_000); // the recorder sends in the background
      const pod = await core.readNamespacedPod({ namespace, name: 'liar' });
      const refused = await warnings(pod, EVENT_REASONS.requestRefused);
      assert.equal(refused.length, 1, refused.join('\n'));
      assert.ok(victim.status?.containerStatuses?.[0]?.state?.running);
      const now = await core.readNamespacedPod({ namespace: victimNs, name: 'victim' });
      assert.equal(now.status?.containerStatuses?.[0]?.containerID, victimID, 'the victim was not stopped');
    } finally {
      await deleteTestNamespace(core, victimNs);
    }
  });

  it('ignore-exit-code sidecars that ignore SIGTERM: the Job completes, and they are stopped by their request within the grace period after the phase is set', async () => {
    const grace = 5;
    const deaf = "trap '' TERM; echo started; while true; do sleep 1; done";
    await jobs.runJob(namespace, 'deaf', {
      restartPolicy: 'Never',
      grace,
      containers: [
        container('main', 'sleep 2'),
        container('log', deaf, { env: [SIDECAR_MARK, IGNORE_EXIT_MARK] }),
        container('metrics', deaf, { env: [SIDECAR_MARK, IGNORE_EXIT_MARK] }),
      ],
    });
    const { type } = await jobs.finishedJob(namespace, 'deaf', 60_000);
    assert.equal(type, 'Complete');
    // Read once the phase is terminal too: once in CI, on 1.27 under load, the Pod showed Running
    // with both sidecars terminated, after the Job had completed (not seen when run alone, twice).
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'deaf');
      const ended = p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';
      return ended && ['log', 'metrics'].every((n) => containerStatus(p, n)?.state?.terminated) ? p : undefined;
    }, { description: 'both sidecars terminated, and the phase terminal', timeoutMs: 120_000 });
    assert.equal(pod.status?.phase, 'Succeeded');
    const phaseSetAt = toDate(pod.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED)?.lastTransitionTime);
    assert.ok(phaseSetAt, 'the phase was set by sidecar-terminator');
    for (const name of ['log', 'metrics']) {
      const state = containerStatus(pod, name)!.state!.terminated!;
      const afterMs = finished(pod, name).getTime() - phaseSetAt.getTime();
      console.log(`# ${name}: exit ${state.exitCode}, ${afterMs} ms after the phase was set (grace ${grace} s)`);
      // Conditions carry whole seconds: one more second of slack on either side; and kubelet is given
      // KUBELET_SEES_PHASE_MS to see the phase before their stops begin (R23).
      assert.ok(afterMs <= (grace + 3) * 1000 + KUBELET_SEES_PHASE_MS, `${name} ran ${afterMs} ms after the phase was set`);
      assert.equal(state.exitCode, 137, 'killed at the end of the grace period (it ignores SIGTERM)');
    }
    // The agent did it, through the request that asked them, begun once the phase was set (R23), not
    // kubelet at a sync of its own (85 s after on 1.33; about 3 s on 1.37).
    const ev = await podEvents(pod);
    for (const name of ['log', 'metrics']) {
      assert.ok(ev.some((e) => e.startsWith(`Normal Killing: Stopping container ${name} (request `)), ev.join('\n'));
    }
  });
});
