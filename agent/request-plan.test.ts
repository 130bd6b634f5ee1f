import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_REQUEUE_MS } from '../common/queue.ts';
import { boundedDelayMs } from '../rules/decision.ts';
import { awaitsAdmission, blockingRequest, KUBELET_SEES_PHASE_MS, leftoverStops, graceSecondsOf, hookRefusal, kubeletRestarts, ownerRefusal, planRequest, sameStatus } from './request-plan.ts';
import type { RequestInputs, RequestPlan, RuntimeView } from './request-plan.ts';
import type { AgentContainerSpec, AgentContainerStatus, AgentPod } from './pod.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRContainer, CRRStatus, CRRStrategy } from '../api/container-recreate-request.ts';
import { LABEL_AFTER_PHASE, LABEL_POD_UID, MAX_STRATEGY_SECONDS } from '../api/container-recreate-request.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerOwner, RuntimeContainer } from './runtime/types.ts';
import { runtimeContainerID } from '../api/container-id.ts';

const NOW = Date.parse('2026-01-01T00:10:00Z');
const CREATED = '2026-01-01T00:09:00Z';
const UID_LABEL = 'crr.sidecar-terminator.dev/pod-uid';

function status(name: string, over: Partial<AgentContainerStatus> = {}): AgentContainerStatus {
  return { name, containerID: `containerd://${name}-1`, restartCount: 0, ready: true, state: 'running', startedAtMs: NOW - 60_000, ...over };
}

function pod(over: Partial<AgentPod> = {}): AgentPod {
  return {
    namespace: 'ns', name: 'job-pod', uid: 'uid-1', nodeName: 'node-a', phase: 'Running', restartPolicy: 'Never',
    terminationGracePeriodSeconds: 30, deleting: false,
    containers: [{ name: 'main' }, { name: 'proxy', preStop: { exec: { command: ['/bin/drain'] } }, ports: [{ name: 'admin', containerPort: 15000 }] }],
    statuses: [status('main', { state: 'terminated', exitCode: 0 }), status('proxy')],
    ...over,
  };
}

function crr(names: string[], strategy: CRRStrategy = {}, states?: ContainerRecreateState[]): ContainerRecreateRequest {
  return {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
    metadata: { name: 'r1', namespace: 'ns', creationTimestamp: CREATED, labels: { [UID_LABEL]: 'uid-1' } },
    spec: { podName: 'job-pod', containers: names.map((name) => ({ name, statusContext: { containerID: `containerd://${name}-1`, restartCount: 0 } })), strategy },
    status: states ? { phase: 'Recreating', containerRecreateStates: states } : undefined,
  };
}

/** kubelet's labels on the Pod's own container `name`. */
function owner(name: string, over: Partial<ContainerOwner> = {}): ContainerOwner {
  return { podUid: 'uid-1', podNamespace: 'ns', podName: 'job-pod', container: name, ...over };
}

/** The runtime's view of `containerd://<id>` (by default `<name>-1`, what status() reports), with kubelet's labels. */
function running(name: string, over: Partial<RuntimeContainer> = {}, id = `${name}-1`): RuntimeView {
  return { containerID: `containerd://${id}`, container: { id: runtimeContainerID(id), state: 'running', startedAtNs: 1n, finishedAtNs: 0n, owner: owner(name), ...over } };
}
function exited(name: string, exitCode: number, id = `${name}-1`): RuntimeView {
  return running(name, { state: 'exited', exitCode, finishedAtNs: 2n }, id);
}

function input(over: Partial<RequestInputs>): RequestInputs {
  return { crr: crr(['proxy']), pod: pod(), nodeName: 'node-a', runtime: new Map([['proxy', running('proxy')]]), nowMs: NOW, ...over };
}

function withSpec(request: ContainerRecreateRequest, spec: Partial<ContainerRecreateRequest['spec']>): ContainerRecreateRequest {
  return { ...request, spec: { ...request.spec, ...spec } };
}

function allMessages(plan: RequestPlan): string {
  return [plan.status.message, ...(plan.status.containerRecreateStates ?? []).map((s) => s.message)].join(' ');
}

describe('planRequest: one container', () => {
  const cases: { name: string; in: Partial<RequestInputs>; phase: string; container?: Partial<ContainerRecreateState>; stops: string[]; message?: RegExp }[] = [
    { name: 'running container is stopped, isKilled recorded before the stop', in: {}, phase: 'Recreating', container: { phase: 'Recreating', isKilled: true }, stops: ['containerd://proxy-1'] },
    { name: 'exited after the stop, Never: Succeeded with exit code', in: { crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]), runtime: new Map([['proxy', exited('proxy', 143)]]) }, phase: 'Completed', container: { phase: 'Succeeded', exitCode: 143, isKilled: true }, stops: [] },
    { name: 'R55: exited after this process\'s own stop, begun before the request: Succeeded, recorded as killed', in: { runtime: new Map([['proxy', { ...exited('proxy', 0), stoppedHere: true as const }]]) }, phase: 'Completed', container: { phase: 'Succeeded', exitCode: 0, isKilled: true }, stops: [] },
    { name: 'exited 0, OnFailure: Succeeded', in: { pod: pod({ restartPolicy: 'OnFailure' }), runtime: new Map([['proxy', exited('proxy', 0)]]) }, phase: 'Completed', container: { phase: 'Succeeded', exitCode: 0 }, stops: [] },
    { name: 'exited 143, OnFailure: kubelet restarts it, Recreating', in: { pod: pod({ restartPolicy: 'OnFailure' }), runtime: new Map([['proxy', exited('proxy', 143)]]) }, phase: 'Recreating', container: { phase: 'Recreating', exitCode: 143 }, stops: [] },
    { name: 'exited, Always: Recreating until the new one runs', in: { pod: pod({ restartPolicy: 'Always' }), runtime: new Map([['proxy', exited('proxy', 0)]]) }, phase: 'Recreating', container: { phase: 'Recreating' }, stops: [] },
    { name: 'container missing on the node: Pending with message', in: { runtime: new Map([['proxy', { containerID: 'containerd://proxy-1' }]]) }, phase: 'Recreating', container: { phase: 'Pending' }, stops: [], message: /container containerd:\/\/proxy-1 not found on node node-a/ },
    { name: 'runtime down: state unknown, nothing stopped', in: { runtime: new Map([['proxy', { containerID: 'containerd://proxy-1', error: 'connect ENOENT' }]]) }, phase: 'Recreating', container: { phase: 'Pending' }, stops: [], message: /runtime: connect ENOENT/ },
    { name: 'unknown container: Failed, request completes (failurePolicy Fail)', in: { crr: crr(['nope']) }, phase: 'Completed', container: { phase: 'Failed' }, stops: [], message: /no container nope/ },
    { name: 'already Succeeded is final', in: { crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Succeeded', isKilled: true, exitCode: 0 }]) }, phase: 'Completed', container: { phase: 'Succeeded' }, stops: [] },
    { name: 'Pod on another node: completed with message', in: { pod: pod({ nodeName: 'node-b' }) }, phase: 'Completed', stops: [], message: /runs on node node-b, not node-a/ },
    { name: 'Pod replaced (uid differs): completed', in: { pod: pod({ uid: 'uid-2' }) }, phase: 'Completed', stops: [], message: /was replaced/ },
    { name: 'Pod being deleted: completed', in: { pod: pod({ deleting: true }) }, phase: 'Completed', stops: [], message: /being deleted/ },
    { name: 'deadline passed: completed, nothing stopped', in: { crr: { ...crr(['proxy']), spec: { ...crr(['proxy']).spec, activeDeadlineSeconds: 30 } } }, phase: 'Completed', stops: [], message: /activeDeadlineSeconds/ },
    { name: 'queued behind an older request: Pending', in: { queuedBehind: 'r0' }, phase: 'Pending', stops: [], message: /waiting for r0/ },
    // The deadline counts from creationTimestamp, the API server's: measured on its clock, whatever the node's says.
    {
      name: 'a node clock 10 minutes ahead: a 300 s deadline not yet passed on the API server\'s clock, the container stopped',
      in: { crr: withSpec(crr(['proxy']), { activeDeadlineSeconds: 300 }), nowMs: NOW + 600_000, apiNowMs: NOW }, phase: 'Recreating', stops: ['containerd://proxy-1'],
    },
    {
      name: 'a node clock 10 minutes behind: a 30 s deadline passed on the API server\'s clock ends the request',
      in: { crr: withSpec(crr(['proxy']), { activeDeadlineSeconds: 30 }), nowMs: NOW - 600_000, apiNowMs: NOW }, phase: 'Completed', stops: [], message: /activeDeadlineSeconds/,
    },
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
      if (c.phase === 'Completed') assert.equal(plan.status.completionTime, new Date(c.in.nowMs ?? NOW).toISOString());
    });
  }
});

describe('planRequest: recreated containers (R41)', () => {
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
    const plan = planRequest(input({ pod: withPod, crr: crr(['proxy'], { forceRecreate: true }), runtime: new Map([['proxy', running('proxy', {}, 'proxy-2')]]) }));
    assert.deepEqual(plan.stops.map((s) => s.containerID), ['containerd://proxy-2']);
    assert.equal(plan.stops[0]?.resumed, false);
  });
  it('forceRecreate waits while the runtime has not shown the recreated container running', () => {
    const plan = planRequest(input({ pod: withPod, crr: crr(['proxy'], { forceRecreate: true }), runtime: new Map() }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.status.containerRecreateStates?.[0]?.phase, 'Recreating');
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
  const allRunning = new Map([['a', running('a')], ['b', running('b')], ['c', running('c')]]);

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

describe('planRequest: unreadyGracePeriodSeconds (R33)', () => {
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

describe('planRequest: a request labelled after-phase (R23)', () => {
  const afterPhase = (request: ContainerRecreateRequest): ContainerRecreateRequest =>
    ({ ...request, metadata: { ...request.metadata, labels: { ...request.metadata.labels, [LABEL_AFTER_PHASE]: 'true' } } });
  it('begins no stop while the Pod is not terminal: the controller sets the phase first', () => {
    const plan = planRequest(input({ crr: afterPhase(crr(['proxy'])) }));
    assert.deepEqual(plan.stops, []);
    assert.match(plan.status.containerRecreateStates?.[0]?.message ?? '', /waiting for the Pod's phase/);
    assert.equal(plan.requeueAfterMs, 5_000);
  });
  it('once the Pod shows its phase, gives kubelet a moment to see it (by the API server\'s clock), then stops', () => {
    const set = (agoMs: number) => pod({ phase: 'Succeeded', phaseSetBySidecarTerminator: true, phaseSetAtMs: NOW - agoMs });
    const early = planRequest(input({ crr: afterPhase(crr(['proxy'])), pod: set(500) }));
    assert.deepEqual(early.stops, []);
    assert.equal(early.requeueAfterMs, KUBELET_SEES_PHASE_MS - 500);
    assert.equal(planRequest(input({ crr: afterPhase(crr(['proxy'])), pod: set(KUBELET_SEES_PHASE_MS) })).stops.length, 1);
    assert.equal(planRequest(input({ crr: afterPhase(crr(['proxy'])), pod: pod({ phase: 'Failed' }) })).stops.length, 1, 'a phase of kubelet\'s own: nothing to wait for');
  });
});

describe('kubeletRestarts (R41, with R7\'s restartAfterExit)', () => {
  const running = (restartPolicy: AgentPod['restartPolicy'], restart?: AgentContainerSpec['restart']) =>
    ({ phase: 'Running' as const, restartPolicy, containers: [{ name: 'proxy', ...(restart ? { restart } : {}) }] });
  const table: [string, ReturnType<typeof running>, number | undefined, boolean][] = [
    ['Always, exit 0', running('Always'), 0, true],
    ['Always, exit 1', running('Always'), 1, true],
    ['OnFailure, exit 0', running('OnFailure'), 0, false],
    ['OnFailure, exit 143', running('OnFailure'), 143, true],
    ['OnFailure, exit code unknown', running('OnFailure'), undefined, true],
    ['Never, exit 0', running('Never'), 0, false],
    ['Never, exit 137', running('Never'), 137, false],
    ['OnFailure Pod, container policy Never, exit 143', running('OnFailure', { policy: 'Never', rules: [] }), 143, false],
    ['Never Pod, container policy OnFailure, exit 143', running('Never', { policy: 'OnFailure', rules: [] }), 143, true],
    ['Never Pod, a Restart rule matching 143', running('Never', { policy: 'Never', rules: [{ action: 'Restart', operator: 'In', values: [143] }] }), 143, true],
    ['Never Pod, a Restart rule not matching 0', running('Never', { policy: 'Never', rules: [{ action: 'Restart', operator: 'In', values: [143] }] }), 0, false],
    ['Never Pod, a RestartAllContainers rule matching', running('Never', { policy: 'Never', rules: [{ action: 'RestartAllContainers', operator: 'In', values: [143] }] }), 143, true],
  ];
  for (const [title, pod, code, expected] of table) {
    it(`${title} → ${expected}`, () => assert.equal(kubeletRestarts(pod, 'proxy', code), expected));
  }
});

describe('planRequest: only the Pod status names the container acted on (R36)', () => {
  const forged = (containerID: string): ContainerRecreateRequest =>
    withSpec(crr(['proxy']), { containers: [{ name: 'proxy', statusContext: { containerID, restartCount: 0 } }] });
  // Another namespace's container, which the agent could stop: the creator knows its ID.
  const victim = 'containerd://victim-in-other-ns';
  const victimView: RuntimeView = { containerID: victim, container: { id: runtimeContainerID('victim-in-other-ns'), state: 'running', startedAtNs: 1n, finishedAtNs: 0n, owner: owner('app', { podNamespace: 'other', podName: 'victim', podUid: 'uid-v' }) } };

  const notStarted: { name: string; statuses: AgentContainerStatus[] }[] = [
    { name: 'Pod status has the container without an ID', statuses: [status('main'), status('proxy', { containerID: undefined, state: 'waiting', ready: false })] },
    { name: 'Pod status has no entry for the container yet', statuses: [status('main')] },
  ];
  for (const c of notStarted) {
    it(`forged statusContext of another Pod's container, ${c.name}: Pending, nothing stopped`, () => {
      const plan = planRequest(input({ crr: forged(victim), pod: pod({ statuses: c.statuses }), runtime: new Map([['proxy', victimView]]) }));
      assert.deepEqual(plan.stops, []);
      assert.equal(plan.status.phase, 'Recreating');
      assert.equal(plan.status.containerRecreateStates?.[0]?.phase, 'Pending');
      assert.equal(plan.status.containerRecreateStates?.[0]?.isKilled, false);
      assert.match(allMessages(plan), /container proxy has not started yet \(no container ID in the Pod status\)/);
    });
  }
  it('not started: looked at again when the deadline passes, then completed by it', () => {
    const request = withSpec(forged(victim), { activeDeadlineSeconds: 300 });
    const notYet = pod({ statuses: [status('main')] });
    const plan = planRequest(input({ crr: request, pod: notYet }));
    assert.equal(plan.requeueAfterMs, 240_001);
    const later = planRequest(input({ crr: request, pod: notYet, nowMs: NOW + 240_001 }));
    assert.equal(later.status.phase, 'Completed');
    assert.match(later.status.message ?? '', /activeDeadlineSeconds \(300s\) passed/);
    assert.deepEqual(later.stops, []);
  });
  it('forged statusContext while the Pod status has an ID: never the forged ID; counts as another attempt', () => {
    const plan = planRequest(input({ crr: forged(victim), runtime: new Map([['proxy', running('proxy')]]) }));
    assert.deepEqual(plan.stops, []);
    assert.ok(!JSON.stringify(plan).includes('victim-in-other-ns'));
  });
  it('forged statusContext with forceRecreate: stops the Pod status\'s own container, verified by its labels', () => {
    const plan = planRequest(input({ crr: withSpec(forged(victim), { strategy: { forceRecreate: true } }) }));
    assert.deepEqual(plan.stops.map((s) => s.containerID), ['containerd://proxy-1']);
  });
  it('a runtime view of any other ID than the Pod status\'s is not used', () => {
    const plan = planRequest(input({ runtime: new Map([['proxy', victimView]]) }));
    assert.deepEqual(plan.stops, []);
    assert.match(allMessages(plan), /containerd:\/\/proxy-1 not found on node/);
  });
  it('a view whose container has another ID than it was asked for is not used', () => {
    const plan = planRequest(input({ runtime: new Map([['proxy', running('proxy', { id: runtimeContainerID('proxy-9') })]]) }));
    assert.deepEqual(plan.stops, []);
  });
  it('hook and ports come from the Pod spec, never from the request', () => {
    const request = crr(['proxy']);
    const hostile = { name: 'proxy', statusContext: { containerID: 'containerd://proxy-1', restartCount: 0 }, preStop: { exec: { command: ['sh', '-c', 'rm -rf /'] } }, ports: [{ name: 'admin', containerPort: 22 }] };
    const plan = planRequest(input({ crr: withSpec(request, { containers: [hostile as CRRContainer] }) }));
    assert.deepEqual(plan.stops[0]?.preStop, { exec: { command: ['/bin/drain'] } });
    assert.deepEqual(plan.stops[0]?.ports, [{ name: 'admin', containerPort: 15000 }]);
  });
});

describe('planRequest: runtime labels must name the request\'s Pod and container (R37)', () => {
  const mismatches: { name: string; owner: Partial<ContainerOwner>; says: RegExp }[] = [
    { name: 'another namespace', owner: { podNamespace: 'other' }, says: /belongs to Pod other\/job-pod \(uid uid-1\) container proxy by its kubelet labels/ },
    { name: 'another Pod (uid)', owner: { podUid: 'uid-9' }, says: /belongs to Pod ns\/job-pod \(uid uid-9\) container proxy/ },
    { name: 'another Pod (name)', owner: { podName: 'someone-else' }, says: /belongs to Pod ns\/someone-else \(uid uid-1\)/ },
    { name: 'another container of the same Pod', owner: { container: 'main' }, says: /belongs to Pod ns\/job-pod \(uid uid-1\) container main/ },
  ];
  for (const c of mismatches) {
    it(`${c.name}: refused, nothing stopped, a Warning planned`, () => {
      const plan = planRequest(input({ runtime: new Map([['proxy', running('proxy', { owner: owner('proxy', c.owner) })]]) }));
      assert.deepEqual(plan.stops, []);
      assert.equal(plan.status.phase, 'Completed');
      assert.equal(plan.refusal?.reason, 'runtime-owner-mismatch');
      const message = plan.status.message ?? '';
      assert.match(message, /^refused: container containerd:\/\/proxy-1, which the Pod status reports for container proxy, /);
      assert.match(message, c.says);
      assert.match(message, /but the request named Pod ns\/job-pod \(uid uid-1\) container proxy; nothing was executed$/);
      assert.partialDeepStrictEqual(plan.status.containerRecreateStates?.[0], { name: 'proxy', phase: 'Failed', message });
      assert.deepEqual(plan.events, [{ type: 'Warning', reason: EVENT_REASONS.requestRefused, message: `Request r1 ${message}` }]);
    });
  }
  it('a container without kubelet labels (a Docker container not created by kubelet): refused', () => {
    const plan = planRequest(input({ runtime: new Map([['proxy', running('proxy', { owner: undefined })]]) }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.status.phase, 'Completed');
    assert.equal(plan.refusal?.reason, 'runtime-owner-missing');
    assert.match(plan.status.message ?? '', /^refused: container containerd:\/\/proxy-1, which the Pod status reports for container proxy, has no kubelet labels \(io\.kubernetes\.pod\.uid, .*\), so it was not created by kubelet for any Pod; the request named Pod ns\/job-pod \(uid uid-1\) container proxy; nothing was executed$/);
    assert.equal(plan.events[0]?.reason, EVENT_REASONS.requestRefused);
  });
  it('one forged container refuses the whole request: the good one is not stopped either', () => {
    const two = pod({ containers: [{ name: 'a' }, { name: 'b' }], statuses: [status('a'), status('b')] });
    const runtime = new Map([['a', running('a')], ['b', running('b', { owner: owner('b', { podNamespace: 'kube-system' }) })]]);
    const plan = planRequest(input({ pod: two, crr: crr(['a', 'b'], { orderedRecreate: true }), runtime }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.status.phase, 'Completed');
    assert.deepEqual(plan.status.containerRecreateStates?.map((s) => s.phase), ['Pending', 'Failed']);
  });
  it('also on the forceRecreate path', () => {
    const recreated = pod({ statuses: [status('main'), status('proxy', { containerID: 'containerd://proxy-2', restartCount: 1 })] });
    const runtime = new Map([['proxy', running('proxy', { owner: owner('proxy', { podNamespace: 'other' }) }, 'proxy-2')]]);
    const plan = planRequest(input({ pod: recreated, crr: crr(['proxy'], { forceRecreate: true }), runtime }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.refusal?.reason, 'runtime-owner-mismatch');
  });
  it('also when the container already exited (the Pod status is forged either way)', () => {
    const plan = planRequest(input({ runtime: new Map([['proxy', { ...exited('proxy', 0), container: { ...exited('proxy', 0).container!, owner: undefined } }]]) }));
    assert.equal(plan.refusal?.reason, 'runtime-owner-missing');
  });
  it('ownerRefusal: the Pod\'s own container passes', () => {
    assert.equal(ownerRefusal(pod(), 'proxy', 'containerd://proxy-1', running('proxy').container!), undefined);
  });
});

describe('planRequest: request labels and node (R35)', () => {
  const noLabel = crr(['proxy']);
  noLabel.metadata.labels = {};
  const cases: { name: string; in: Partial<RequestInputs>; reason: string; message: RegExp }[] = [
    { name: 'pod-uid label of another Pod', in: { pod: pod({ uid: 'uid-2' }) }, reason: 'pod-uid-mismatch', message: /^refused: request ns\/r1 is for Pod uid uid-1, but Pod ns\/job-pod has uid uid-2 \(job-pod was replaced\); nothing was executed$/ },
    { name: 'Pod on another node', in: { pod: pod({ nodeName: 'node-b' }) }, reason: 'other-node', message: /^refused: Pod ns\/job-pod runs on node node-b, not node-a; nothing was executed$/ },
  ];
  for (const c of cases) {
    it(`${c.name}: refused, nothing stopped, a Warning planned`, () => {
      const plan = planRequest(input(c.in));
      assert.equal(plan.status.phase, 'Completed');
      assert.deepEqual(plan.stops, []);
      assert.equal(plan.refusal?.reason, c.reason);
      assert.match(plan.status.message ?? '', c.message);
      assert.equal(plan.events.length, 1);
      assert.equal(plan.events[0]?.type, 'Warning');
      assert.equal(plan.events[0]?.reason, EVENT_REASONS.requestRefused);
    });
  }
  it('a request waiting behind another is refused too', () => {
    const plan = planRequest(input({ pod: pod({ uid: 'uid-2' }), queuedBehind: 'r0', runtime: new Map() }));
    assert.equal(plan.refusal?.reason, 'pod-uid-mismatch');
  });
  it('a request without a pod-uid label (or an empty one) awaits admission by the controller: not planned at all', () => {
    assert.equal(awaitsAdmission(noLabel), true);
    assert.equal(awaitsAdmission({ ...noLabel, metadata: { ...noLabel.metadata, labels: { [LABEL_POD_UID]: '' } } }), true);
    assert.equal(awaitsAdmission(crr(['proxy'])), false);
  });
  it('completions that are no refusal plan no event', () => {
    const plan = planRequest(input({ pod: pod({ deleting: true }) }));
    assert.equal(plan.refusal, undefined);
    assert.deepEqual(plan.events, []);
  });
});

describe('planRequest: a terminal Pod restarts nothing (R41)', () => {
  const table: { phase: AgentPod['phase']; policy: AgentPod['restartPolicy']; code: number; expect: string }[] = [
    { phase: 'Succeeded', policy: 'OnFailure', code: 143, expect: 'Succeeded' },
    { phase: 'Failed', policy: 'OnFailure', code: 137, expect: 'Succeeded' },
    { phase: 'Succeeded', policy: 'Always', code: 0, expect: 'Succeeded' },
    { phase: 'Running', policy: 'OnFailure', code: 143, expect: 'Recreating' },
  ];
  for (const c of table) {
    it(`${c.phase} Pod, ${c.policy}, exit ${c.code}: ${c.expect}`, () => {
      const states: ContainerRecreateState[] = [{ name: 'proxy', phase: 'Recreating', isKilled: true }];
      const plan = planRequest(input({ pod: pod({ phase: c.phase, restartPolicy: c.policy }), crr: crr(['proxy'], {}, states), runtime: new Map([['proxy', exited('proxy', c.code)]]) }));
      assert.deepEqual(plan.stops, []);
      assert.partialDeepStrictEqual(plan.status.containerRecreateStates?.[0], { phase: c.expect, exitCode: c.code });
      assert.equal(plan.status.phase, c.expect === 'Succeeded' ? 'Completed' : 'Recreating');
    });
  }
  it('a container restarted before the Pod finished and exited since: Succeeded', () => {
    const p = pod({ phase: 'Succeeded', restartPolicy: 'OnFailure', statuses: [status('main'), status('proxy', { containerID: 'containerd://proxy-2', restartCount: 1, state: 'terminated', exitCode: 143, ready: false })] });
    const plan = planRequest(input({ pod: p, crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]), runtime: new Map() }));
    assert.equal(plan.status.phase, 'Completed');
    assert.partialDeepStrictEqual(plan.status.containerRecreateStates?.[0], { phase: 'Succeeded', exitCode: 143 });
  });
  it('a running container of a terminal Pod is still stopped', () => {
    const plan = planRequest(input({ pod: pod({ phase: 'Succeeded', restartPolicy: 'OnFailure' }) }));
    assert.deepEqual(plan.stops.map((s) => s.containerID), ['containerd://proxy-1']);
  });
});

describe('planRequest: resuming a stop an earlier agent began (R40)', () => {
  it('first stop: hook and ports from the Pod spec, not resumed', () => {
    const plan = planRequest(input({}));
    assert.deepEqual(plan.stops, [{ name: 'proxy', containerID: 'containerd://proxy-1', graceSeconds: 30, resumed: false, preStop: { exec: { command: ['/bin/drain'] } }, ports: [{ name: 'admin', containerPort: 15000 }] }]);
  });
  it('isKilled recorded, still running: the stop is resumed without the hook', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.deepEqual(plan.stops, [{ name: 'proxy', containerID: 'containerd://proxy-1', graceSeconds: 30, resumed: true }]);
    assert.equal(plan.status.containerRecreateStates?.[0]?.isKilled, true);
  });
  it('isKilled recorded and exited (the old agent finished before it went): Succeeded, no stop', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]), runtime: new Map([['proxy', exited('proxy', 143)]]) }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.status.phase, 'Completed');
    assert.partialDeepStrictEqual(plan.status.containerRecreateStates?.[0], { phase: 'Succeeded', exitCode: 143, isKilled: true });
  });
  it('this agent\'s own stop returned and the runtime still says running: looked at again after the wait, not stopped again now', () => {
    const request = crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]);
    const plan = planRequest(input({ crr: request, runtime: new Map([['proxy', { ...running('proxy'), recheckInMs: 4_000 }]]) }));
    assert.deepEqual(plan.stops, []);
    assert.equal(plan.requeueAfterMs, 4_000);
    assert.equal(sameStatus(request.status, plan.status), true);
  });
  it('the wait over (no recheck left), still running: stopped again, as a resumed stop (no hook)', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]), runtime: new Map([['proxy', running('proxy')]]) }));
    assert.deepEqual(plan.stops.map((s) => s.resumed), [true]);
  });
  it('a resumed stop does not wait for unreadyGracePeriodSeconds again', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], { unreadyGracePeriodSeconds: 10 }, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.equal(plan.stops[0]?.resumed, true);
  });
});

describe('planRequest: a stop under way in this agent (R39): nothing new until it returns', () => {
  const stopping = (name: string): RuntimeView => ({ containerID: `containerd://${name}-1`, stopping: true });
  const ordered = (over: Partial<ContainerRecreateState> = {}): ContainerRecreateState => ({ name: 'proxy', phase: 'Recreating', isKilled: true, ...over });

  it('the state its stop order recorded, unchanged: no stop, no write', () => {
    const request = crr(['proxy'], {}, [ordered()]);
    const plan = planRequest(input({ crr: request, runtime: new Map([['proxy', stopping('proxy')]]) }));
    assert.deepEqual(plan.stops, []);
    assert.equal(sameStatus(request.status, plan.status), true);
  });
  it('a hook\'s record is kept', () => {
    const request = crr(['proxy'], {}, [ordered({ preStopContainerID: 'containerd://proxy-1' })]);
    const plan = planRequest(input({ crr: request, runtime: new Map([['proxy', stopping('proxy')]]) }));
    assert.equal(sameStatus(request.status, plan.status), true);
  });
  it('isKilled not recorded (its write failed after the stop was sent): recorded now', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Pending', isKilled: false }]), runtime: new Map([['proxy', stopping('proxy')]]) }));
    assert.deepEqual(plan.stops, []);
    assert.deepEqual(plan.status.containerRecreateStates, [ordered()]);
  });
  it('a forced stop of a recreated container under way: the same', () => {
    const request = crr(['proxy'], { forceRecreate: true }, [ordered()]);
    const recreated = pod({ statuses: [status('main', { state: 'terminated', exitCode: 0 }), status('proxy', { containerID: 'containerd://proxy-2' })] });
    const plan = planRequest(input({ crr: request, pod: recreated, runtime: new Map([['proxy', { containerID: 'containerd://proxy-2', stopping: true }]]) }));
    assert.equal(sameStatus(request.status, plan.status), true);
  });
});

describe('sameStatus (R39): a status is written only when it changes', () => {
  const recorded = { phase: 'Recreating', containerRecreateStates: [{ name: 'proxy', phase: 'Recreating', isKilled: true }] } as const;
  /** As a plan builds it: its keys in its own order, a field left undefined (never sent). */
  const planned: CRRStatus = { phase: 'Recreating', containerRecreateStates: [{ name: 'proxy', phase: 'Recreating', isKilled: true, exitCode: undefined }] };
  const rows: { name: string; served: object | undefined; same: boolean }[] = [
    { name: 'the same data, keys sorted as the API server sends a custom resource', served: { containerRecreateStates: [{ isKilled: true, name: 'proxy', phase: 'Recreating' }], phase: 'Recreating' }, same: true },
    { name: 'another completionTime only (every plan sets it anew)', served: { ...recorded, completionTime: '2026-01-01T00:00:00Z' }, same: true },
    { name: 'a message more', served: { ...recorded, containerRecreateStates: [{ ...recorded.containerRecreateStates[0], message: 'x' }] }, same: false },
    { name: 'isKilled not recorded', served: { ...recorded, containerRecreateStates: [{ ...recorded.containerRecreateStates[0], isKilled: false }] }, same: false },
    { name: 'another phase', served: { ...recorded, phase: 'Pending' }, same: false },
    { name: 'no status yet', served: undefined, same: false },
  ];
  for (const row of rows) {
    it(`${row.name}: ${row.same ? 'nothing to write' : 'written'}`, () => {
      assert.equal(sameStatus(row.served as CRRStatus | undefined, planned), row.same);
    });
  }
});

describe('hookRefusal (R38): which preStop hooks the agent runs', () => {
  const rows: { name: string; hook: object; httpHooks?: boolean; refused?: RegExp }[] = [
    { name: 'exec', hook: { exec: { command: ['/bin/drain'] } } },
    { name: 'exec without a command', hook: { exec: {} }, refused: /exec preStop hook has no command/ },
    { name: 'httpGet', hook: { httpGet: { port: 8080 } } },
    { name: 'httpGet with HTTP hooks turned off', hook: { httpGet: { port: 8080 } }, httpHooks: false, refused: /HTTP preStop hooks are turned off .*--prestop-http-hooks=false/ },
    { name: 'exec with HTTP hooks turned off', hook: { exec: { command: ['/bin/drain'] } }, httpHooks: false },
    { name: 'sleep', hook: { sleep: { seconds: 6 } } },
    { name: 'tcpSocket: kubelet runs it only as a probe', hook: { tcpSocket: { port: 22 } }, refused: /tcpSocket preStop hook is not run: kubelet runs tcpSocket only as a probe/ },
    { name: 'a kind a later release adds', hook: { grpc: { port: 9000 } }, refused: /kind "grpc" is unknown to this agent/ },
    { name: 'an unknown kind beside a known one', hook: { exec: { command: ['/x'] }, future: {} }, refused: /kind "future" is unknown/ },
    { name: 'no action at all', hook: {}, refused: /names no action/ },
  ];
  for (const row of rows) {
    it(`${row.name}: ${row.refused ? 'not run' : 'run'}`, () => {
      const refusal = hookRefusal(row.hook, row.httpHooks ?? true);
      if (row.refused) assert.match(refusal ?? '', row.refused);
      else assert.equal(refusal, undefined);
    });
  }
});

describe('planRequest: stop signal and hooks as kubelet has them (R38)', () => {
  const withSidecar = (over: Partial<AgentPod['containers'][number]>) =>
    pod({ containers: [{ name: 'main' }, { name: 'proxy', ...over }] });

  it('the Pod spec\'s stopSignal goes with the stop, a resumed one too', () => {
    const sig = withSidecar({ stopSignal: 'SIGUSR1' });
    assert.equal(planRequest(input({ pod: sig })).stops[0]?.stopSignal, 'SIGUSR1');
    const resumed = planRequest(input({ pod: sig, crr: crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]) }));
    assert.deepEqual(resumed.stops, [{ name: 'proxy', containerID: 'containerd://proxy-1', graceSeconds: 30, resumed: true, stopSignal: 'SIGUSR1' }]);
  });
  it('R39: a sleep hook is run (before the stop), and recorded with isKilled', () => {
    const plan = planRequest(input({ pod: withSidecar({ preStop: { sleep: { seconds: 6 } } }) }));
    assert.deepEqual(plan.stops[0]?.preStop, { sleep: { seconds: 6 } });
    assert.deepEqual(plan.status.containerRecreateStates, [{ name: 'proxy', phase: 'Recreating', isKilled: true, preStopContainerID: 'containerd://proxy-1' }]);
  });
  for (const [name, hook, httpHooks] of [
    ['tcpSocket', { tcpSocket: { port: 22 } }, true],
    ['an unknown kind', { grpc: { port: 9000 } }, true],
    ['httpGet with HTTP hooks off', { httpGet: { port: 8080 } }, false],
  ] as const) {
    it(`${name}: no hook, the reason for the Pod's event, the stop goes on, nothing recorded as started`, () => {
      const plan = planRequest(input({ pod: withSidecar({ preStop: hook as object }), httpHooks }));
      assert.equal(plan.stops.length, 1);
      assert.equal(plan.stops[0]?.preStop, undefined);
      assert.match(plan.stops[0]?.preStopNotRun ?? '', /not run/);
      assert.equal(plan.status.containerRecreateStates?.[0]?.preStopContainerID, undefined);
    });
  }
  it('R39: a hook another request already started for this container is not run again; the stop goes on', () => {
    const plan = planRequest(input({ preStopsStarted: new Set(['containerd://proxy-1']) }));
    assert.deepEqual(plan.stops, [{ name: 'proxy', containerID: 'containerd://proxy-1', graceSeconds: 30, resumed: false }]);
    assert.equal(plan.status.containerRecreateStates?.[0]?.preStopContainerID, undefined);
  });
  it('another container\'s started hook does not count: a recreated container gets its own', () => {
    const plan = planRequest(input({ preStopsStarted: new Set(['containerd://proxy-0']) }));
    assert.deepEqual(plan.stops[0]?.preStop, { exec: { command: ['/bin/drain'] } });
  });
  it('R39: the record stays on the request whatever the container does since (exited, deadline)', () => {
    const started: ContainerRecreateState = { name: 'proxy', phase: 'Recreating', isKilled: true, preStopContainerID: 'containerd://proxy-1' };
    const exitedPlan = planRequest(input({ crr: crr(['proxy'], {}, [started]), runtime: new Map([['proxy', exited('proxy', 143)]]) }));
    assert.equal(exitedPlan.status.containerRecreateStates?.[0]?.preStopContainerID, 'containerd://proxy-1');
    const resumedPlan = planRequest(input({ crr: crr(['proxy'], {}, [started]) }));
    assert.equal(resumedPlan.status.containerRecreateStates?.[0]?.preStopContainerID, 'containerd://proxy-1');
    const late = withSpec(crr(['proxy'], {}, [started]), { activeDeadlineSeconds: 30 });
    assert.equal(planRequest(input({ crr: late })).status.containerRecreateStates?.[0]?.preStopContainerID, 'containerd://proxy-1');
  });
});

describe('bounds', () => {
  it('grace (R38): the strategy\'s, else the Pod\'s, capped at MAX_STRATEGY_SECONDS', () => {
    assert.equal(graceSecondsOf(5, 30), 5);
    assert.equal(graceSecondsOf(undefined, 30), 30);
    assert.equal(graceSecondsOf(0, 30), 0);
    assert.equal(graceSecondsOf(10 ** 12, 30), MAX_STRATEGY_SECONDS);
    assert.equal(graceSecondsOf(undefined, Number.MAX_SAFE_INTEGER), MAX_STRATEGY_SECONDS);
    assert.equal(graceSecondsOf(-5, 30), 0);
  });
  it('a Pod grace period of years is capped in the stop order', () => {
    const plan = planRequest(input({ pod: pod({ terminationGracePeriodSeconds: 10 ** 9 }) }));
    assert.equal(plan.stops[0]?.graceSeconds, MAX_STRATEGY_SECONDS);
    assert.ok(plan.stops[0]!.graceSeconds * 1000 < 2 ** 31 - 1);
  });
  it('a strategy grace period past the CRD maximum is capped too', () => {
    const plan = planRequest(input({ crr: crr(['proxy'], { terminationGracePeriodSeconds: 10 ** 7 }) }));
    assert.equal(plan.stops[0]?.graceSeconds, MAX_STRATEGY_SECONDS);
  });
  it('the requeue delay, bounded as the controller\'s (boundedDelayMs): NaN waits the longest', () => {
    assert.equal(boundedDelayMs(undefined), undefined);
    assert.equal(boundedDelayMs(1_500.2), 1_501);
    assert.equal(boundedDelayMs(-5), 0);
    assert.equal(boundedDelayMs(10 ** 15), MAX_REQUEUE_MS);
    assert.equal(boundedDelayMs(Number.NaN), MAX_REQUEUE_MS);
    assert.ok(MAX_REQUEUE_MS <= 3_600_000);
  });
  const recreatedPod = pod({ restartPolicy: 'Always', statuses: [status('main'), status('proxy', { containerID: 'containerd://proxy-2', restartCount: 1, startedAtMs: NOW - 1_000 })] });
  const recreating = [{ name: 'proxy', phase: 'Recreating' as const, isKilled: true }];
  const requeues: { name: string; in: Partial<RequestInputs> }[] = [
    { name: 'minStartedSeconds far past the CRD maximum', in: { pod: recreatedPod, crr: crr(['proxy'], { minStartedSeconds: 10 ** 9 }, recreating) } },
    { name: 'a recreated container started in the future (clock skew)', in: { pod: pod({ restartPolicy: 'Always', statuses: [status('main'), status('proxy', { containerID: 'containerd://proxy-2', restartCount: 1, startedAtMs: NOW + 10 ** 12 })] }), crr: crr(['proxy'], { minStartedSeconds: 10 }, recreating) } },
    { name: 'not-ready since the far future', in: { crr: crr(['proxy'], { unreadyGracePeriodSeconds: 10 ** 9 }), pod: pod({ readiness: { status: 'False', sinceMs: NOW + 10 ** 12 } }) } },
    { name: 'a deadline of years', in: { crr: withSpec(crr(['proxy'], {}, recreating), { activeDeadlineSeconds: 10 ** 9 }), runtime: new Map([['proxy', exited('proxy', 1)]]), pod: pod({ restartPolicy: 'Always' }) } },
  ];
  for (const c of requeues) {
    it(`requeueAfterMs is capped: ${c.name}`, () => {
      const plan = planRequest(input(c.in));
      assert.notEqual(plan.status.phase, 'Completed');
      assert.ok(plan.requeueAfterMs !== undefined, 'a requeue was planned');
      assert.ok(plan.requeueAfterMs! > 0 && plan.requeueAfterMs! <= MAX_REQUEUE_MS, `requeueAfterMs ${plan.requeueAfterMs}`);
    });
  }
});

describe('kubeletRestarts in a terminal Pod', () => {
  for (const phase of ['Succeeded', 'Failed'] as const) {
    for (const policy of ['Always', 'OnFailure', 'Never'] as const) {
      it(`${phase}, ${policy}, exit 143 → false`, () => assert.equal(kubeletRestarts({ phase, restartPolicy: policy, containers: [{ name: 'proxy' }] }, 'proxy', 143), false));
    }
  }
  it('Running, OnFailure, exit 143 → true', () => assert.equal(kubeletRestarts({ phase: 'Running', restartPolicy: 'OnFailure', containers: [{ name: 'proxy' }] }, 'proxy', 143), true));
});

describe('blockingRequest (R34): a request waits only behind an older one holding one of its containers', () => {
  const named = (name: string, request: ContainerRecreateRequest): ContainerRecreateRequest => ({ ...request, metadata: { ...request.metadata, name } });
  const ours = named('sidecar-termination-uid-1', crr(['proxy']));
  const stale = (strategy: CRRStrategy = {}, states?: ContainerRecreateState[]): ContainerRecreateRequest => {
    const r = named('user', crr(['proxy'], strategy, states));
    return { ...r, spec: { ...r.spec, containers: [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-0', restartCount: 0 } }] } };
  };
  const cases: { name: string; older: ContainerRecreateRequest[]; pod?: AgentPod; want: string | undefined }[] = [
    { name: 'no older request', older: [], want: undefined },
    { name: 'an older one for the same container, not yet done with it', older: [named('user', crr(['proxy']))], want: 'user' },
    { name: 'an older one for the same container, stopping it (isKilled)', older: [named('user', crr(['proxy'], {}, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]))], want: 'user' },
    { name: 'an older one for other containers only', older: [named('user', crr(['main']))], want: undefined },
    { name: 'an older one whose container is final', older: [named('user', crr(['proxy'], {}, [{ name: 'proxy', phase: 'Succeeded', isKilled: true }]))], want: undefined },
    { name: 'an older one not pinned yet (no statusContext): acts on nothing', older: [{ ...named('user', crr(['proxy'])), spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] } }], want: undefined },
    { name: 'the attack: stale statusContext, minStartedSeconds 3600, no deadline: only waits, holds nothing', older: [stale({ minStartedSeconds: 3600 }, [{ name: 'proxy', phase: 'Recreating', isKilled: false }])], want: undefined },
    { name: 'a stale statusContext with forceRecreate, not yet killed: will stop the new one, holds it', older: [stale({ forceRecreate: true })], want: 'user' },
    { name: 'a stale statusContext with forceRecreate, already killed: holds nothing', older: [stale({ forceRecreate: true }, [{ name: 'proxy', phase: 'Recreating', isKilled: true }])], want: undefined },
    { name: 'a higher restart count than the statusContext counts as recreated', older: [named('user', crr(['proxy'], { minStartedSeconds: 3600 }))], pod: pod({ statuses: [status('main', { state: 'terminated', exitCode: 0 }), status('proxy', { restartCount: 1 })] }), want: undefined },
    { name: 'the first holder of several', older: [named('a', crr(['main'])), named('b', crr(['main', 'proxy'])), named('c', crr(['proxy']))], want: 'b' },
    { name: 'an older ordered one stuck on an earlier container (never recreated): has not reached this one, holds nothing', older: [named('user', crr(['main', 'proxy'], { orderedRecreate: true }, [{ name: 'main', phase: 'Recreating', isKilled: true }]))], want: undefined },
    { name: 'an older ordered one not yet started: holds its first container only', older: [named('user', crr(['main', 'proxy'], { orderedRecreate: true }))], want: undefined },
    { name: 'an older ordered one past its earlier containers: holds this one', older: [named('user', crr(['main', 'proxy'], { orderedRecreate: true }, [{ name: 'main', phase: 'Succeeded', isKilled: true }]))], want: 'user' },
    { name: 'an older ordered one that began on this container: holds it', older: [named('user', crr(['main', 'proxy'], { orderedRecreate: true }, [{ name: 'main', phase: 'Recreating', isKilled: true }, { name: 'proxy', phase: 'Recreating', isKilled: true }]))], want: 'user' },
    { name: 'an older one, not ordered, stuck on an earlier container: holds every container it names', older: [named('user', crr(['main', 'proxy'], {}, [{ name: 'main', phase: 'Recreating', isKilled: true }]))], want: 'user' },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(blockingRequest(ours, c.older, c.pod ?? pod()), c.want));
  }

  it('the attack, planned: our request stops the sidecar while the stale one waits on', () => {
    const user = stale({ minStartedSeconds: 3600 });
    const userPlan = planRequest(input({ crr: user }));
    assert.equal(userPlan.status.phase, 'Recreating');
    assert.deepEqual(userPlan.stops, []);
    const waitingUser = { ...user, status: userPlan.status };
    assert.equal(blockingRequest(ours, [waitingUser], pod()), undefined);
    assert.deepEqual(planRequest(input({ crr: ours })).stops.map((s) => s.containerID), ['containerd://proxy-1']);
  });
});

describe('leftoverStops (R45): what still runs once the controller set the phase', () => {
  // Two ignore-exit-code sidecars that ignore SIGTERM, one with a hook; the phase set by the controller.
  const finished = (over: Partial<AgentPod> = {}) => pod({
    phase: 'Succeeded', phaseSetBySidecarTerminator: true, terminationGracePeriodSeconds: 12,
    containers: [{ name: 'main' }, { name: 'proxy' }, { name: 'hooked', preStop: { exec: { command: ['/bin/drain'] } } }],
    statuses: [status('main', { state: 'terminated', exitCode: 0 }), status('proxy'), status('hooked')],
    ...over,
  });
  const views = new Map([['proxy', running('proxy')], ['hooked', running('hooked')]]);
  const cases: { name: string; pod: AgentPod; runtime?: Map<string, RuntimeView>; want: string[] }[] = [
    { name: 'Succeeded by the controller: the hookless one is stopped, the hooked one left to kubelet', pod: finished(), want: ['containerd://proxy-1'] },
    { name: 'Failed by the controller: the same', pod: finished({ phase: 'Failed' }), want: ['containerd://proxy-1'] },
    { name: 'a hook too large to keep in the cache still counts as a hook: left to kubelet', pod: finished({ containers: [{ name: 'main' }, { name: 'proxy', preStopNotKept: true }, { name: 'hooked', preStop: { exec: { command: ['/bin/drain'] } } }] }), want: [] },
    { name: 'Running: nothing (requests do the stopping)', pod: finished({ phase: 'Running' }), want: [] },
    { name: 'terminal, but not by the controller (kubelet\'s own phase): nothing', pod: finished({ phaseSetBySidecarTerminator: false }), want: [] },
    { name: 'being deleted: kubelet is stopping it already', pod: finished({ deleting: true }), want: [] },
    { name: 'the runtime says it exited meanwhile: nothing', pod: finished(), runtime: new Map([['proxy', exited('proxy', 137)]]), want: [] },
    { name: 'the runtime answered about another container ID: nothing', pod: finished(), runtime: new Map([['proxy', running('proxy', {}, 'other')]]), want: [] },
    { name: 'kubelet labels of another Pod on it (a forged status): nothing', pod: finished(), runtime: new Map([['proxy', running('proxy', { owner: owner('proxy', { podUid: 'victim' }) })]]), want: [] },
    { name: 'R40: this agent\'s stop of it returned, the runtime still says running: nothing until the wait is over', pod: finished(), runtime: new Map([['proxy', { ...running('proxy'), recheckInMs: 5_000 }]]), want: [] },
    { name: 'the runtime could not be asked: nothing', pod: finished(), runtime: new Map([['proxy', { containerID: 'containerd://proxy-1', error: 'down' }]]), want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(leftoverStops(c.pod, c.runtime ?? views).map((o) => o.containerID), c.want));
  }

  it('bounded by the Pod\'s grace period, no hook, nothing resumed', () => {
    assert.deepEqual(leftoverStops(finished(), views), [{ name: 'proxy', containerID: 'containerd://proxy-1', graceSeconds: 12, resumed: false }]);
    assert.equal(leftoverStops(finished({ terminationGracePeriodSeconds: 10 ** 9 }), views)[0]?.graceSeconds, MAX_STRATEGY_SECONDS);
  });
});
