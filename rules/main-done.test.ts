// R7: a main is done when its current state is terminated and kubelet will not start it again,
// following kubelet's own choice (Pod policy, container policy and rules, restart-all, probe kills).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container, V1ContainerRestartRule, V1Pod } from '@kubernetes/client-node';
import type { PodSpec, StateSpec } from '../test/support/pods.ts';
import { exited, main, makePod, sidecar } from '../test/support/pods.ts';
import type { NotDoneReason } from './main-done.ts';
import { exitSettlesRestart, mainsDone, mainsSucceeded, mainVerdict, probeKillRestarts, restartAfterExit } from './main-done.ts';
import { projectPod } from './projection.ts';

const restartOn = (operator: string, values: number[]): V1ContainerRestartRule => ({ action: 'Restart', exitCodes: { operator, values } });
const restartAllOn = (operator: string, values: number[]): V1ContainerRestartRule => ({ action: 'RestartAllContainers', exitCodes: { operator, values } });
const LIVENESS = { livenessProbe: { exec: { command: ['true'] } } };
const STARTUP = { startupProbe: { exec: { command: ['true'] } } };

/** A Pod with main `app` in `state`, a running sidecar, and `extra` merged into the main's spec. */
function podWith(state: StateSpec, extra: Partial<V1Container> = {}, spec: Partial<PodSpec> = {}, edit?: (pod: V1Pod) => void): V1Pod {
  const pod = makePod({ containers: [main('app', state), sidecar('proxy')], ...spec });
  Object.assign(pod.spec!.containers[0]!, extra);
  edit?.(pod);
  return pod;
}

describe('R7: is the main done? (kubelet will not start it again)', () => {
  const rows: Array<{ name: string; pod: V1Pod; notDone?: NotDoneReason }> = [
    // Pod-level policy alone: what kubelet has always done.
    { name: 'Never, exit 0', pod: podWith(exited(0)) },
    { name: 'Never, exit 1: a failed main is final', pod: podWith(exited(1)) },
    { name: 'OnFailure, exit 0', pod: podWith(exited(0), {}, { restartPolicy: 'OnFailure' }) },
    { name: 'OnFailure, exit 1: restarted', pod: podWith(exited(1), {}, { restartPolicy: 'OnFailure' }), notDone: 'restarted' },
    { name: 'running', pod: podWith('running'), notDone: 'notTerminated' },
    { name: 'waiting (a restart in backoff is reported so)', pod: podWith('waiting', {}, { restartPolicy: 'OnFailure' }), notDone: 'notTerminated' },
    { name: 'no status yet', pod: podWith('noStatus'), notDone: 'noStatus' },
    {
      name: 'a duplicated status entry that is running hides nothing',
      pod: podWith(exited(0), {}, {}, (p) => p.status!.containerStatuses!.push({ ...p.status!.containerStatuses![0]!, state: { running: {} } })),
      notDone: 'notTerminated',
    },
    // Container-level policy and rules (ContainerRestartRules).
    { name: 'Never Pod, a Restart rule In [42] matched by 42: restarted', pod: podWith(exited(42), { restartPolicy: 'Never', restartPolicyRules: [restartOn('In', [42])] }), notDone: 'restarted' },
    { name: 'Never Pod, a Restart rule In [42], exit 0: done', pod: podWith(exited(0), { restartPolicy: 'Never', restartPolicyRules: [restartOn('In', [42])] }) },
    { name: 'Never Pod, a Restart rule In [42], exit 1: its own policy Never, done', pod: podWith(exited(1), { restartPolicy: 'Never', restartPolicyRules: [restartOn('In', [42])] }) },
    { name: 'Never Pod, a Restart rule NotIn [0, 1], exit 3: restarted', pod: podWith(exited(3), { restartPolicy: 'Never', restartPolicyRules: [restartOn('NotIn', [0, 1])] }), notDone: 'restarted' },
    { name: 'Never Pod, a Restart rule NotIn [0, 1], exit 1: done', pod: podWith(exited(1), { restartPolicy: 'Never', restartPolicyRules: [restartOn('NotIn', [0, 1])] }) },
    { name: 'OnFailure Pod, container policy Never: a failed main is final (the rule stops the restart)', pod: podWith(exited(1), { restartPolicy: 'Never' }, { restartPolicy: 'OnFailure' }) },
    {
      name: 'OnFailure Pod, container policy Never, a Restart rule In [2], exit 2: restarted',
      pod: podWith(exited(2), { restartPolicy: 'Never', restartPolicyRules: [restartOn('In', [2])] }, { restartPolicy: 'OnFailure' }),
      notDone: 'restarted',
    },
    { name: 'Never Pod, container policy OnFailure, exit 1: restarted', pod: podWith(exited(1), { restartPolicy: 'OnFailure' }), notDone: 'restarted' },
    { name: 'Never Pod, container policy Always, exit 0: restarted', pod: podWith(exited(0), { restartPolicy: 'Always' }), notDone: 'restarted' },
    {
      name: 'rules without a container policy are not read (the API server refuses them anyway)',
      pod: podWith(exited(42), { restartPolicyRules: [restartOn('In', [42])] }),
    },
    {
      name: 'the first matching rule decides',
      pod: podWith(exited(42), { restartPolicy: 'Never', restartPolicyRules: [{ action: 'SomeFutureAction', exitCodes: { operator: 'In', values: [42] } }, restartOn('In', [42])] }),
    },
    {
      name: 'a rule with an unknown operator is skipped',
      pod: podWith(exited(42), { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'Above', values: [1] } }] }),
    },
    { name: 'a rule without exit codes is skipped', pod: podWith(exited(42), { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart' }] }) },
    { name: 'an unknown container policy falls back to the Pod\'s', pod: podWith(exited(1), { restartPolicy: 'Sometimes' }, { restartPolicy: 'OnFailure' }), notDone: 'restarted' },
    // Restarting every container (RestartAllContainers).
    { name: 'the main\'s own RestartAllContainers rule matched: the Pod starts over', pod: podWith(exited(7), { restartPolicy: 'Never', restartPolicyRules: [restartAllOn('In', [7])] }), notDone: 'podRestarting' },
    {
      name: 'a sidecar\'s exit matched a RestartAllContainers rule: the done main runs again',
      pod: podWith(exited(0), {}, {}, (p) => {
        Object.assign(p.spec!.containers[1]!, { restartPolicy: 'Never', restartPolicyRules: [restartAllOn('NotIn', [0])] });
        p.status!.containerStatuses![1]!.state = { terminated: { exitCode: 143 } };
      }),
      notDone: 'podRestarting',
    },
    {
      name: 'the AllContainersRestarting condition is True: nothing is done',
      pod: podWith(exited(0), {}, {}, (p) => { p.status!.conditions = [{ type: 'AllContainersRestarting', status: 'True' }]; }),
      notDone: 'podRestarting',
    },
    {
      name: 'terminated with kubelet\'s reason RestartingAllContainers (ended for the restart): runs again',
      pod: podWith(exited(137), {}, {}, (p) => { p.status!.containerStatuses![0]!.state!.terminated!.reason = 'RestartingAllContainers'; }),
      notDone: 'podRestarting',
    },
    {
      name: 'the AllContainersRestarting condition is False: done',
      pod: podWith(exited(0), {}, {}, (p) => { p.status!.conditions = [{ type: 'AllContainersRestarting', status: 'False' }]; }),
    },
    {
      name: 'an init container\'s exit matched its RestartAllContainers rule: the Pod starts over',
      pod: podWith(exited(0), {}, {}, (p) => {
        p.spec!.initContainers = [{ name: 'init', image: 'i', restartPolicy: 'Never', restartPolicyRules: [restartAllOn('In', [0])] }];
        p.status!.initContainerStatuses = [{ name: 'init', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } }];
      }),
      notDone: 'podRestarting',
    },
    // A probe kill is reported by kubelet only as what it then did: a new attempt, or a final exit.
    { name: 'OnFailure, liveness probe, exit 0 reported: kubelet did not restart it, done', pod: podWith(exited(0), LIVENESS, { restartPolicy: 'OnFailure' }) },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const verdict = mainVerdict(projectPod(row.pod), 'app');
      assert.deepEqual(verdict, row.notDone ? { done: false, reason: row.notDone } : { done: true });
    });
  }

  it('mainsDone: every main, and at least one', () => {
    assert.equal(mainsDone(projectPod(podWith(exited(0))), ['app']), true);
    assert.equal(mainsDone(projectPod(podWith(exited(0))), []), false);
    const two = projectPod(makePod({ containers: [main('a', exited(0)), main('b', 'running'), sidecar('p')] }));
    assert.equal(mainsDone(two, ['a', 'b']), false);
  });

  it('mainsSucceeded: done, and exit 0 in every entry', () => {
    assert.equal(mainsSucceeded(projectPod(podWith(exited(0))), ['app']), true);
    assert.equal(mainsSucceeded(projectPod(podWith(exited(1))), ['app']), false);
    // Exit 0 that kubelet restarts (container policy Always) is no success yet.
    assert.equal(mainsSucceeded(projectPod(podWith(exited(0), { restartPolicy: 'Always' })), ['app']), false);
    assert.equal(mainsSucceeded(projectPod(podWith(exited(0))), []), false);
  });
});

describe('R7: kubelet\'s choice after an exit', () => {
  const container = (extra: Partial<V1Container>) => projectPod(podWith('running', extra)).containers[0];
  const rows: Array<[string, ReturnType<typeof container>, string, number, string]> = [
    ['Pod Always', container({}), 'Always', 0, 'container'],
    ['an unknown Pod policy is Always', container({}), 'Whatever', 0, 'container'],
    ['Pod Never', container({}), 'Never', 9, 'none'],
    ['container OnFailure beats Pod Never', container({ restartPolicy: 'OnFailure' }), 'Never', 9, 'container'],
    ['container Never beats Pod Always', container({ restartPolicy: 'Never' }), 'Always', 9, 'none'],
    ['RestartAllContainers rule', container({ restartPolicy: 'Never', restartPolicyRules: [restartAllOn('In', [9])] }), 'Never', 9, 'allContainers'],
    ['no container at all: the Pod policy', undefined, 'OnFailure', 1, 'container'],
  ];
  for (const [name, c, policy, code, want] of rows) it(name, () => assert.equal(restartAfterExit(c, policy, code), want));
});

describe('R7, R43: probe kills, and what a runtime exit alone can say', () => {
  const rows: Array<{ name: string; pod: V1Pod; probeRestarts: boolean; exitSettles: boolean }> = [
    { name: 'Never, no probe', pod: podWith('running'), probeRestarts: false, exitSettles: true },
    { name: 'OnFailure, no probe', pod: podWith('running', {}, { restartPolicy: 'OnFailure' }), probeRestarts: false, exitSettles: true },
    { name: 'Never, liveness probe: a probe kill is final', pod: podWith('running', LIVENESS), probeRestarts: false, exitSettles: true },
    { name: 'OnFailure, liveness probe: restarted whatever its exit code', pod: podWith('running', LIVENESS, { restartPolicy: 'OnFailure' }), probeRestarts: true, exitSettles: false },
    { name: 'OnFailure, startup probe', pod: podWith('running', STARTUP, { restartPolicy: 'OnFailure' }), probeRestarts: true, exitSettles: false },
    { name: 'OnFailure, liveness probe, container policy Never', pod: podWith('running', { ...LIVENESS, restartPolicy: 'Never' }, { restartPolicy: 'OnFailure' }), probeRestarts: false, exitSettles: true },
    { name: 'Never, liveness probe, container policy OnFailure', pod: podWith('running', { ...LIVENESS, restartPolicy: 'OnFailure' }), probeRestarts: true, exitSettles: false },
    {
      name: 'Never, Restart rules on the main: its exit code says it',
      pod: podWith('running', { restartPolicy: 'Never', restartPolicyRules: [restartOn('In', [42])] }),
      probeRestarts: false,
      exitSettles: true,
    },
    {
      name: 'a RestartAllContainers rule anywhere in the Pod: kubelet\'s report is waited for',
      pod: podWith('running', {}, {}, (p) => Object.assign(p.spec!.containers[1]!, { restartPolicy: 'Never', restartPolicyRules: [restartAllOn('In', [1])] })),
      probeRestarts: false,
      exitSettles: false,
    },
    // Kubelet kills and restarts a running container whose spec changed, whatever its policy.
    {
      name: 'the main\'s image was updated in the spec, kubelet still reports the old one running: kubelet\'s report is waited for',
      pod: podWith('running', { image: 'app:2' }),
      probeRestarts: false,
      exitSettles: false,
    },
    {
      name: 'the same image in its short and its full form: settled',
      pod: podWith('running', { image: 'busybox:1.36' }, {}, (p) => { p.status!.containerStatuses![0]!.image = 'docker.io/library/busybox:1.36'; }),
      probeRestarts: false,
      exitSettles: true,
    },
    {
      name: 'kubelet has not observed the Pod\'s latest spec (generation ahead of observedGeneration)',
      pod: podWith('running', {}, {}, (p) => { p.metadata!.generation = 3; p.status!.observedGeneration = 2; }),
      probeRestarts: false,
      exitSettles: false,
    },
    {
      name: 'kubelet has observed it',
      pod: podWith('running', {}, {}, (p) => { p.metadata!.generation = 3; p.status!.observedGeneration = 3; }),
      probeRestarts: false,
      exitSettles: true,
    },
    {
      name: 'a resize of the main restarts it (resizePolicy RestartContainer): kubelet\'s report is waited for',
      pod: podWith('running', { resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }, { resourceName: 'memory', restartPolicy: 'RestartContainer' }] }),
      probeRestarts: false,
      exitSettles: false,
    },
    {
      name: 'resizes that never restart it: settled',
      pod: podWith('running', { resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }] }),
      probeRestarts: false,
      exitSettles: true,
    },
    {
      name: 'the Pod is restarting all its containers',
      pod: podWith('running', {}, {}, (p) => { p.status!.conditions = [{ type: 'AllContainersRestarting', status: 'True' }]; }),
      probeRestarts: false,
      exitSettles: false,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const pod = projectPod(row.pod);
      assert.equal(probeKillRestarts(pod.containers[0]!, pod.restartPolicy), row.probeRestarts);
      assert.equal(exitSettlesRestart(pod, 'app'), row.exitSettles);
    });
  }

  it('an unknown container never settles from a runtime exit', () => assert.equal(exitSettlesRestart(projectPod(podWith('running')), 'nope'), false));
});
