import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { planRequest, kubeletRestarts } from './decide.ts';
import type { RequestInputs, RuntimeView } from './decide.ts';
import type { AgentContainerStatus, AgentPod } from './pod.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRStrategy } from '../crr/types.ts';
import type { RuntimeContainer } from './runtime/types.ts';

const NOW = Date.parse('2026-01-01T00:10:00Z');
const CREATED = '2026-01-01T00:09:00Z';

function status(name: string, over: Partial<AgentContainerStatus> = {}): AgentContainerStatus {
  return { name, containerID: `containerd://${name}-1`, restartCount: 0, ready: true, state: 'running', startedAtMs: NOW - 60_000, ...over };
}

function pod(over: Partial<AgentPod> = {}): AgentPod {
  return {
    namespace: 'ns', name: 'job-pod', uid: 'uid-1', nodeName: 'node-a', restartPolicy: 'Never',
    terminationGracePeriodSeconds: 30, deleting: false,
    containers: [{ name: 'main' }, { name: 'proxy', preStop: { exec: { command: ['/bin/drain'] } } }],
    statuses: [status('main', { state: 'terminated', exitCode: 0 }), status('proxy')],
    ...over,
  };
}

function crr(names: string[], strategy: CRRStrategy = {}, states?: ContainerRecreateState[]): ContainerRecreateRequest {
  return {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
    metadata: { name: 'r1', namespace: 'ns', creationTimestamp: CREATED, labels: { 'crr.sidecar-terminator.dev/pod-uid': 'uid-1' } },
    spec: { podName: 'job-pod', containers: names.map((name) => ({ name, statusContext: { containerID: `containerd://${name}-1`, restartCount: 0 } })), strategy },
    status: states ? { phase: 'Recreating', containerRecreateStates: states } : undefined,
  };
}

function running(id: string): RuntimeView {
  return { container: { id, state: 'running', startedAtNs: 1n, finishedAtNs: 0n } };
}
function exited(id: string, exitCode: number): RuntimeView {
  const c: RuntimeContainer = { id, state: 'exited', exitCode, startedAtNs: 1n, finishedAtNs: 2n };
  return { container: c };
}

function input(over: Partial<RequestInputs>): RequestInputs {
  return { crr: crr(['proxy']), pod: pod(), nodeName: 'node-a', runtime: new Map([['proxy', running('proxy-1')]]), nowMs: NOW, ...over };
}

describe('planRequest: one container', () => {
  const cases: { name: string; in: Partial<RequestInputs>; phase: string; container?: Partial<ContainerRecreateState>; stops: string[]; message?: RegExp }[] = [
    { name: 'running container is stopped, isKilled recorded before the stop', in: {}, phase: 'Recreating', container: { phase: 'Recreating', isKilled: true }, stops: ['containerd://proxy-1'] },
    { name: 'exited after the stop, Never: Succeeded with exit code', in: { crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]), runtime: new Map([['proxy', exited('proxy-1', 143)]]) }, phase: 'Completed', container: { phase: 'Succeeded', exitCode: 143, isKilled: true }, stops: [] },
    { name: 'exited 0, OnFailure: Succeeded', in: { pod: pod({ restartPolicy: 'OnFailure' }), runtime: new Map([['proxy', exited('proxy-1', 0)]]) }, phase: 'Completed', container: { phase: 'Succeeded', exitCode: 0 }, stops: [] },
    { name: 'exited 143, OnFailure: kubelet restarts it, Recreating', in: { pod: pod({ restartPolicy: 'OnFailure' }), runtime: new Map([['proxy', exited('proxy-1', 143)]]) }, phase: 'Recreating', container: { phase: 'Recreating', exitCode: 143 }, stops: [] },
    { name: 'exited, Always: Recreating until the new one runs', in: { pod: pod({ restartPolicy: 'Always' }), runtime: new Map([['proxy', exited('proxy-1', 0)]]) }, phase: 'Recreating', container: { phase: 'Recreating' }, stops: [] },
    { name: 'container missing on the node: Pending with message', in: { runtime: new Map([['proxy', {}]]) }, phase: 'Recreating', container: { phase: 'Pending' }, stops: [], message: /not found on node node-a/ },
    { name: 'runtime down: state unknown, nothing stopped', in: { runtime: new Map([['proxy', { error: 'connect ENOENT' }]]) }, phase: 'Recreating', container: { phase: 'Pending' }, stops: [], message: /runtime: connect ENOENT/ },
    { name: 'unknown container: Failed, request completes (failurePolicy Fail)', in: { crr: crr(['nope']) }, phase: 'Completed', container: { phase: 'Failed' }, stops: [], message: /no container nope/ },
    { name: 'already Succeeded is final', in: { crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Succeeded', isKilled: true, exitCode: 0 }]) }, phase: 'Completed', container: { phase: 'Succeeded' }, stops: [] },
    { name: 'Pod on another node: completed with message', in: { pod: pod({ nodeName: 'node-b' }) }, phase: 'Completed', stops: [], message: /runs on node node-b, not node-a/ },
    { name: 'Pod replaced (uid differs): completed', in: { pod: pod({ uid: 'uid-2' }) }, phase: 'Completed', stops: [], message: /was replaced/ },
    { name: 'Pod being deleted: completed', in: { pod: pod({ deleting: true }) }, phase: 'Completed', stops: [], message: /being deleted/ },
    { name: 'deadline passed: completed, nothing stopped', in: { crr: { ...crr(['proxy']), spec: { ...crr(['proxy']).spec, activeDeadlineSeconds: 30 } } }, phase: 'Completed', stops: [], message: /activeDeadlineSeconds/ },
    { name: 'queued behind an older request: Pending', in: { queuedBehind: 'r0' }, phase: 'Pending', stops: [], message: /waiting for r0/ },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const plan = planRequest(input(c.in));
      assert.equal(plan.status.phase, c.phase);
      assert.deepEqual(plan.stops.map((s) => s.containerID), c.stops);
      if (c.container) assert.partialDeepStrictEqual(plan.status.containerRecreateStates?.[0], c.container);
      if (c.message) {
        const text = [plan.status.message, ...(plan.status.containerRecreateStates ?? []).map((s) => s.message)].join(' ');
        assert.match(text, c.message);
      }
      if (c.phase === 'Completed') assert.equal(plan.status.completionTime, new Date(NOW).toISOString());
    });
  }
});

describe('planRequest: recreated containers', () => {
  const recreated = status('proxy', { containerID: 'containerd://proxy-2', restartCount: 1, startedAtMs: NOW - 5_000 });
  const withPod = pod({ restartPolicy: 'Always', statuses: [status('main'), recreated] });

  it('a recreated, running, ready container counts as Succeeded', () => {
    const plan = planRequest(input({ pod: withPod, crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.equal(plan.status.phase, 'Completed');
    assert.equal(plan.status.containerRecreateStates?.[0]?.phase, 'Succeeded');
  });
  it('not yet older than minStartedSeconds: Recreating, looked at again when it will be', () => {
    const plan = planRequest(input({ pod: withPod, crr: crr(['proxy'], { minStartedSeconds: 10 }, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.equal(plan.status.containerRecreateStates?.[0]?.phase, 'Recreating');
    assert.ok(plan.requeueAfterMs !== undefined && plan.requeueAfterMs > 4_000 && plan.requeueAfterMs <= 5_001);
  });
  it('not ready: Recreating', () => {
    const notReady = pod({ restartPolicy: 'Always', statuses: [status('main'), { ...recreated, ready: false }] });
    const plan = planRequest(input({ pod: notReady, crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.equal(plan.status.containerRecreateStates?.[0]?.phase, 'Recreating');
    assert.deepEqual(plan.stops, []);
  });
  it('forceRecreate stops a recreated container once, by its new ID', () => {
    const plan = planRequest(input({ pod: withPod, crr: crr(['proxy'], { forceRecreate: true }) }));
    assert.deepEqual(plan.stops.map((s) => s.containerID), ['containerd://proxy-2']);
  });
  it('forceRecreate does not stop again once isKilled is recorded (agent restart after the stop)', () => {
    const plan = planRequest(input({ pod: withPod, crr: crr(['proxy'], { forceRecreate: true }, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.status.phase, 'Completed');
  });
  it('a higher restart count with the same ID also counts as recreated', () => {
    const p = pod({ restartPolicy: 'Always', statuses: [status('main'), status('proxy', { restartCount: 1 })] });
    const plan = planRequest(input({ pod: p, crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.deepEqual(plan.stops, []);
  });
});

describe('planRequest: several containers', () => {
  const three = pod({
    containers: [{ name: 'a' }, { name: 'b' }, { name: 'c' }],
    statuses: [status('a'), status('b'), status('c')],
  });
  const allRunning = new Map([['a', running('a-1')], ['b', running('b-1')], ['c', running('c-1')]]);

  it('stops all in parallel by default, with the Pod grace period and the Pod preStop', () => {
    const plan = planRequest(input({ pod: three, crr: crr(['a', 'b', 'c']), runtime: allRunning }));
    assert.deepEqual(plan.stops.map((s) => s.name), ['a', 'b', 'c']);
    assert.ok(plan.stops.every((s) => s.graceSeconds === 30));
  });
  it('orderedRecreate stops only the first not yet done', () => {
    const plan = planRequest(input({ pod: three, crr: crr(['a', 'b', 'c'], { orderedRecreate: true }), runtime: allRunning }));
    assert.deepEqual(plan.stops.map((s) => s.name), ['a']);
    assert.deepEqual(plan.status.containerRecreateStates?.map((s) => s.phase), ['Recreating', 'Pending', 'Pending']);
  });
  it('orderedRecreate moves on once the previous one Succeeded', () => {
    const states: ContainerRecreateState[] = [{ name: 'a', phase: 'Succeeded', isKilled: true }];
    const plan = planRequest(input({ pod: three, crr: crr(['a', 'b', 'c'], { orderedRecreate: true }, states), runtime: allRunning }));
    assert.deepEqual(plan.stops.map((s) => s.name), ['b']);
  });
  it('strategy grace period wins over the Pod one', () => {
    const plan = planRequest(input({ pod: three, crr: crr(['a'], { terminationGracePeriodSeconds: 5 }), runtime: allRunning }));
    assert.equal(plan.stops[0]?.graceSeconds, 5);
  });
  it('failurePolicy Fail: a failed container completes the request and stops nothing more', () => {
    const states: ContainerRecreateState[] = [{ name: 'a', phase: 'Failed', isKilled: true, message: 'stop: deadline exceeded' }];
    const plan = planRequest(input({ pod: three, crr: crr(['a', 'b', 'c'], {}, states), runtime: allRunning }));
    assert.equal(plan.status.phase, 'Completed');
    assert.deepEqual(plan.stops, []);
    assert.match(plan.status.message ?? '', /a: stop: deadline exceeded/);
  });
  it('failurePolicy Ignore: carries on with the others', () => {
    const states: ContainerRecreateState[] = [{ name: 'a', phase: 'Failed', isKilled: true, message: 'boom' }];
    const plan = planRequest(input({ pod: three, crr: crr(['a', 'b', 'c'], { failurePolicy: 'Ignore' }, states), runtime: allRunning }));
    assert.equal(plan.status.phase, 'Recreating');
    assert.deepEqual(plan.stops.map((s) => s.name), ['b', 'c']);
  });
  it('completes when every container is final, naming the failed ones', () => {
    const states: ContainerRecreateState[] = [
      { name: 'a', phase: 'Failed', isKilled: true, message: 'boom' },
      { name: 'b', phase: 'Succeeded', isKilled: true },
      { name: 'c', phase: 'Succeeded', isKilled: true },
    ];
    const plan = planRequest(input({ pod: three, crr: crr(['a', 'b', 'c'], { failurePolicy: 'Ignore' }, states), runtime: allRunning }));
    assert.equal(plan.status.phase, 'Completed');
    assert.equal(plan.status.message, 'a: boom');
  });
});

describe('planRequest: unreadyGracePeriodSeconds', () => {
  const strategy = { unreadyGracePeriodSeconds: 10 };
  it('waits for the Pod to be marked not-ready', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], strategy) }));
    assert.deepEqual(plan.stops, []);
    assert.match(plan.status.containerRecreateStates?.[0]?.message ?? '', /not-ready/);
  });
  it('waits out the grace after the Pod became not-ready', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], strategy), pod: pod({ readiness: { status: 'False', sinceMs: NOW - 4_000 } }) }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.requeueAfterMs, 6_000);
  });
  it('stops once the grace has passed', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], strategy), pod: pod({ readiness: { status: 'False', sinceMs: NOW - 10_000 } }) }));
    assert.equal(plan.stops.length, 1);
  });
});

describe('kubeletRestarts', () => {
  const table: [AgentPod['restartPolicy'], number, boolean][] = [
    ['Always', 0, true], ['Always', 1, true], ['OnFailure', 0, false], ['OnFailure', 143, true], ['Never', 0, false], ['Never', 137, false],
  ];
  for (const [policy, code, expected] of table) {
    it(`${policy} exit ${code} → ${expected}`, () => assert.equal(kubeletRestarts(policy, code), expected));
  }
});
