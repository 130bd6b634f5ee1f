// e2e group: serial — it kills the node's agent, which every other file's Jobs wait on.
// The agent killed in the middle of its work (SIGKILL through the runtime, kubelet starting it
// again), on the real cluster: it resumes from the request's status and never repeats what it did.
// - A stop under way (a container that ignores SIGTERM, so the stop lasts its grace period): the
//   request completes, and the container was restarted once.
// - A preStop hook under way when a request's deadline passed: the next request for the same
//   container stops it without running its hook again. The test asserts what the sidecar saw, from
//   its own log.
// - A rollout of the agent in the middle of a stop with a hook (R40, R42): the new agent finishes
//   it, with no stop, hook or event repeated.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { AGENT, NAMESPACE, agentPod, crash, deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { container, podEvents } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { createRequest, loopPod, runningPod } from './support/requests.ts';
import { sleep, waitFor } from './support/wait.ts';

const { core } = clients();
let namespace: string;

describe('the agent killed in the middle of a request', () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'agent-crash');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('finishes a request after the agent is killed in the middle of its stop, restarting the container once', async () => {
    // The container ignores SIGTERM, so the stop lasts the whole grace period: the agent dies in it.
    await runningPod(namespace, loopPod('crash', 'Always', "trap '' TERM"));
    await createRequest(namespace, 'agent-crash', { podName: 'crash', containers: [{ name: 'worker' }], strategy: { terminationGracePeriodSeconds: 8 } });
    await waitFor(async () => (await jobs.readRequest(namespace, 'agent-crash'))?.status?.containerRecreateStates?.[0]?.isKilled, { description: 'stop under way (isKilled recorded)' });
    await crash(await agentPod());
    const done = await jobs.completedRequest(namespace, 'agent-crash', 90_000);
    assert.equal(done.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(done.status));
    // Let a wrongly repeated stop show itself before counting restarts.
    await sleep(5_000);
    const pod = await core.readNamespacedPod({ namespace, name: 'crash' });
    assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 1);
    assert.equal(pod.status?.containerStatuses?.[0]?.lastState?.terminated?.exitCode, 137);
  });

  it('a hook runs once per container: a request that passed its deadline while the agent was down, then the next request for the same container', async (t) => {
    // A long exec hook: the agent is still in it when the first request's 3 s deadline passes.
    const hook = { exec: { command: ['sh', '-c', 'echo "hook ran" > /proc/1/fd/1; sleep 20'] } };
    await runningPod(namespace, {
      metadata: { name: 'once' },
      spec: {
        nodeName: clusterEnv().nodeName, restartPolicy: 'Never', terminationGracePeriodSeconds: 30,
        containers: [container('proxy', `trap 'echo "got SIGTERM"; exit 0' TERM\necho ready\nwhile :; do sleep 1 & wait $!; done`, { lifecycle: { preStop: hook } })],
      },
    });
    const sidecarLog = () => timestampedLogs(namespace, 'once', 'proxy');

    await createRequest(namespace, 'first', { podName: 'once', containers: [{ name: 'proxy' }], activeDeadlineSeconds: 3 });
    await waitFor(() => firstLine(sidecarLog(), /^hook ran$/), { description: 'the hook began', timeoutMs: 30_000 });
    const first = await jobs.completedRequest(namespace, 'first', 30_000);
    assert.match(first.status?.message ?? '', /activeDeadlineSeconds/, `the first request ended by its deadline: ${JSON.stringify(first.status)}`);
    // The agent dies in the hook: the stop it would send after it is never sent.
    await crash(await agentPod());
    await sleep(2_000);
    assert.ok((await core.readNamespacedPod({ namespace, name: 'once' })).status?.containerStatuses?.[0]?.state?.running, 'the container still runs');

    await createRequest(namespace, 'second', { podName: 'once', containers: [{ name: 'proxy' }], activeDeadlineSeconds: 120 });
    const second = await jobs.completedRequest(namespace, 'second', 90_000);
    const lines = await waitFor(() => {
      const l = sidecarLog();
      return firstLine(l, /^got SIGTERM$/) ? l : undefined;
    }, { description: 'the sidecar got SIGTERM', timeoutMs: 30_000 }).catch(() => sidecarLog());
    t.diagnostic(showLines(lines));
    t.diagnostic(`second request: ${JSON.stringify(second.status)}`);
    assert.equal(lines.filter((l) => /^hook ran$/.test(l.text)).length, 1, `the hook ran more than once:\n${showLines(lines)}`);
    assert.ok(firstLine(lines, /^got SIGTERM$/), 'the second request stopped the container');
    assert.equal(second.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(second.status));
  });

  it('R40, R42: an agent rolled out in the middle of a stop finishes it; the next one repeats no stop, hook or event', async () => {
    await runningPod(namespace, {
      metadata: { name: 'rolling' },
      spec: {
        nodeName: clusterEnv().nodeName, restartPolicy: 'Never', terminationGracePeriodSeconds: 10,
        containers: [container('app', "trap 'sleep 3; exit 0' TERM; while true; do sleep 1; done", {
          lifecycle: { preStop: { exec: { command: ['sh', '-c', 'echo HOOK > /proc/1/fd/1; sleep 3'] } } },
        })],
      },
    });
    const before = (await agentPod()).metadata!.name!;
    await createRequest(namespace, 'rollout', { podName: 'rolling', containers: [{ name: 'app' }] });
    await waitFor(async () => (await jobs.readRequest(namespace, 'rollout'))?.status?.containerRecreateStates?.[0]?.isKilled, { description: 'stop under way', timeoutMs: 30_000 });
    kubectl('-n', NAMESPACE, 'rollout', 'restart', `daemonset/${AGENT}`);
    kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=120s');
    assert.notEqual((await agentPod()).metadata!.name, before);
    const done = await jobs.completedRequest(namespace, 'rollout', 60_000);
    assert.equal(done.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.equal(done.status?.containerRecreateStates?.[0]?.exitCode, 0, 'stopped by SIGTERM, not killed');
    await sleep(5_000); // room for a wrongly repeated stop to show
    const pod = await core.readNamespacedPod({ namespace, name: 'rolling' });
    const hooks = timestampedLogs(namespace, 'rolling', 'app').filter((l) => l.text === 'HOOK');
    assert.equal(hooks.length, 1, 'the hook ran once');
    const killings = (await podEvents(pod)).filter((e) => e.includes(` ${EVENT_REASONS.killing}: `));
    assert.equal(killings.length, 1, (await podEvents(pod)).join('\n'));
  });
});
