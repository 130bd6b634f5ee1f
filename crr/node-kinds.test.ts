// Rule R22 (docs/design.md), the I/O around nodeKindOf: the controller's watches of nodes, of the
// nodes its selector names and of the agent Pods, against the fake API server.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { FakeKubeApi } from '../test/support/fake-api.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import { FlagError } from '../common/flags.ts';
import { createLogger } from '../common/log.ts';
import type { Logger } from '../common/log.ts';
import { checkSelectors, NodeKinds } from './node-kinds.ts';

const NAMESPACE = 'st';
const AGENT_LABELS = { 'app.kubernetes.io/name': 'sidecar-terminator', 'app.kubernetes.io/component': 'agent' };
const HOUR = 3_600_000;

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await sleep(5);
  }
  assert.fail(`timed out: ${what}`);
}

/** An agent Pod whose container runs (ready or not: `ready`), or waits to be created. */
function agentPod(name: string, node: string, running: boolean, labels: Record<string, string> = AGENT_LABELS, ready = running) {
  return {
    metadata: { name, namespace: NAMESPACE, labels },
    spec: { nodeName: node },
    status: {
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: new Date(0).toISOString() }],
      containerStatuses: [{ name: 'agent', ready, restartCount: 0, image: 'x', imageID: '', state: running ? { running: {} } : { waiting: { reason: 'ContainerCreating' } } }],
    },
  };
}

describe('NodeKinds: the watches behind R22', () => {
  let kinds: NodeKinds | undefined;
  afterEach(() => kinds?.stop());

  it('virtual by label, agentless by selector at once, agentless by absence only after the wait, real with a running agent', async () => {
    let nowMs = 10 * HOUR;
    const api = new FakeKubeApi({ now: () => nowMs - HOUR }); // every object created an hour ago
    api.set(resourcePath('v1', 'nodes', undefined, 'with-agent'), { metadata: {} });
    api.set(resourcePath('v1', 'nodes', undefined, 'virtual'), { metadata: { labels: { type: 'virtual-kubelet' } } });
    api.set(resourcePath('v1', 'nodes', undefined, 'fargate'), { metadata: { labels: { 'eks.amazonaws.com/compute-type': 'fargate' } } });
    api.set(resourcePath('v1', 'nodes', undefined, 'no-agent'), { metadata: {} });
    api.set(resourcePath('v1', 'nodes', undefined, 'unready-agent'), { metadata: {} });
    api.set(resourcePath('v1', 'nodes', undefined, 'stuck-agent'), { metadata: {} });
    api.set(podPath(NAMESPACE, 'agent-a'), agentPod('agent-a', 'with-agent', true));
    // Running but not ready (its fast path not confined, a watch resyncing): it still carries out requests.
    api.set(podPath(NAMESPACE, 'agent-u'), agentPod('agent-u', 'unready-agent', true, AGENT_LABELS, false));
    // Created an hour ago and never started (the hostPath refused): no agent.
    api.set(podPath(NAMESPACE, 'agent-s'), agentPod('agent-s', 'stuck-agent', false));
    // Not an agent: a ready Pod of another component on the node without one.
    api.set(podPath(NAMESPACE, 'controller-x'), agentPod('controller-x', 'no-agent', true, { ...AGENT_LABELS, 'app.kubernetes.io/component': 'controller' }));
    kinds = new NodeKinds({
      client: api, log: createLogger('test', 'error'), onRestart: () => {},
      agentlessNodeSelector: 'eks.amazonaws.com/compute-type=fargate', agentlessAfterSeconds: 120,
      agentNamespace: NAMESPACE, agentPodSelector: 'app.kubernetes.io/name=sidecar-terminator,app.kubernetes.io/component=agent',
      now: () => nowMs,
    });
    kinds.start();
    await until(() => kinds!.isSynced(), 'synced');

    assert.equal(await kinds.kindOf('with-agent'), 'real');
    assert.equal(await kinds.kindOf('virtual'), 'virtual');
    assert.equal(await kinds.kindOf('fargate'), 'agentless');
    assert.equal(await kinds.kindOf('no-agent'), 'real', 'the controller just started: it waits');
    nowMs += 120_000;
    assert.equal(await kinds.kindOf('no-agent'), 'agentless', 'no agent Pod for the whole wait');
    assert.equal(await kinds.kindOf('unready-agent'), 'real', 'a running agent, ready or not');
    assert.equal(await kinds.kindOf('stuck-agent'), 'agentless', 'an agent Pod that never ran, for the whole wait');

    // A rollout on with-agent: the old Pod goes, the next comes later.
    api.remove(podPath(NAMESPACE, 'agent-a'));
    // Both sides are in this process: the watch event is handled within a few turns of the event loop.
    await sleep(100);
    nowMs += 60_000;
    assert.equal(await kinds.kindOf('with-agent'), 'real', 'an agent gone a minute ago: a blip');
    nowMs += 61_000;
    assert.equal(await kinds.kindOf('with-agent'), 'agentless', 'no agent since it went, for the whole wait');
    api.set(podPath(NAMESPACE, 'agent-b'), agentPod('agent-b', 'with-agent', true));
    await until(async () => (await kinds!.kindOf('with-agent')) === 'real', 'the next agent ready');
  });

  it('an invalid selector stops the controller at start-up with the API server\'s message; other errors are left to the watch', async () => {
    const api = new FakeKubeApi();
    const flags = { agentlessNodeSelector: 'a=b=c', agentNamespace: NAMESPACE, agentPodSelector: 'app=agent' };
    api.inject({ method: 'get', path: resourcePath('v1', 'nodes') }, 400);
    // A bad flag, found by the API server: exit code 2, as for any bad flag.
    await assert.rejects(checkSelectors(api, flags), (err: unknown) =>
      err instanceof FlagError && /--agentless-node-selector "a=b=c" is not a valid label selector/.test(err.message));
    api.inject({ method: 'get', path: podPath(NAMESPACE) }, 400);
    await assert.rejects(checkSelectors(api, { ...flags, agentlessNodeSelector: '', agentPodSelector: 'x==' }), /--agent-pod-selector "x==" is not a valid label selector/);
    api.inject({ method: 'get', path: resourcePath('v1', 'nodes') }, 503);
    await checkSelectors(api, { ...flags, agentlessNodeSelector: 'pool=fargate' });
    await checkSelectors(api, { ...flags, agentlessNodeSelector: '', agentPodSelector: '' }); // none: nothing asked
    assert.equal(api.calls.length, 4);
  });

  it('R22: a selector that matches no agent Pod at all (an overlay relabelled the agent): no node turns agentless, however long; the controller says what is wrong', async () => {
    let nowMs = 10 * HOUR;
    const api = new FakeKubeApi({ now: () => nowMs - HOUR });
    api.set(resourcePath('v1', 'nodes', undefined, 'node-a'), { metadata: {} });
    api.set(podPath(NAMESPACE, 'agent-a'), agentPod('agent-a', 'node-a', true, { 'app.kubernetes.io/name': 'platform-sidecar-terminator', 'app.kubernetes.io/component': 'agent' }));
    const errors: { message: string; fields: Record<string, unknown> }[] = [];
    const log = { ...createLogger('test', 'error'), error: (message: string, fields: Record<string, unknown>) => errors.push({ message, fields }) } as unknown as Logger;
    kinds = new NodeKinds({
      client: api, log, onRestart: () => {}, agentlessNodeSelector: '', agentlessAfterSeconds: 120,
      agentNamespace: NAMESPACE, agentPodSelector: 'app.kubernetes.io/name=sidecar-terminator,app.kubernetes.io/component=agent',
      now: () => nowMs,
    });
    kinds.start();
    await until(() => kinds!.isSynced(), 'synced');
    for (let minutes = 0; minutes <= 30; minutes += 3) {
      assert.equal(await kinds.kindOf('node-a'), 'real', `${minutes} minutes on`);
      nowMs += 3 * 60_000;
    }
    assert.ok(errors.length >= 2 && errors.length <= 7, `reported every 5 minutes while it lasts: ${errors.length}`);
    assert.match(errors[0]!.message, /no agent Pod matches --agent-pod-selector/);
    assert.deepEqual(errors[0]!.fields, { agentNamespace: NAMESPACE, agentPodSelector: 'app.kubernetes.io/name=sidecar-terminator,app.kubernetes.io/component=agent' });
  });
});
