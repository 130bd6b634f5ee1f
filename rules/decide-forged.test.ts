// Requests that take our names but are not ours for the Pod: never counted as ours, never blocking.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerSpec } from './fixtures.ts';
import { decideFor, exited, expectKind, FAST_RETRY, main, makePod, NODE, reasons, request, sidecar, UID } from './fixtures.ts';
import type { ExistingRequest } from './requests.ts';
import { MAX_REQUEST_ATTEMPTS, requestName } from './requests.ts';

const done = (...sidecars: ContainerSpec[]) => makePod({ containers: [main('app', exited(0)), ...sidecars] });
const stillRunning = done(sidecar('proxy'));

const wrongNode = { podUid: UID, nodeName: 'node-2' };
const wrongUid = { podUid: 'another-uid', nodeName: NODE };

describe('forged requests: our name, not our Pod', () => {
  const rows: Array<{ name: string; requests: ExistingRequest[]; attempt: number }> = [
    { name: 'active, node label of another node', requests: [request({ completed: false, containers: ['proxy'], labels: wrongNode })], attempt: 2 },
    { name: 'active, pod-uid label of another Pod', requests: [request({ completed: false, containers: ['proxy'], labels: wrongUid })], attempt: 2 },
    { name: 'active, no labels at all (not admitted yet)', requests: [request({ completed: false, containers: ['proxy'], labels: null })], attempt: 2 },
    { name: 'only the uid label', requests: [request({ completed: false, containers: ['proxy'], labels: { nodeName: undefined } })], attempt: 2 },
    {
      name: 'completed, asking for the sidecar, with a message',
      requests: [request({ containers: ['proxy'], labels: wrongNode, message: 'forged', completedAgoMs: 0 })],
      attempt: 2,
    },
    { name: 'a taken later name is skipped', requests: [request({ attempt: 7, completed: false, containers: ['proxy'], labels: wrongNode })], attempt: 8 },
    { name: 'a suffix too large to be ours is not a name of ours', requests: [request({ name: `sidecar-termination-${UID}-99999999999999999999`, completed: false, containers: ['proxy'], labels: wrongNode })], attempt: 1 },
    { name: 'a leading zero is not a name of ours', requests: [request({ name: `sidecar-termination-${UID}-02`, completed: false, containers: ['proxy'] })], attempt: 1 },
  ];
  for (const row of rows) {
    it(`${row.name}: a new request at once, no retry Warning`, () => {
      const decision = expectKind(decideFor(stillRunning, 'real', row.requests, { options: FAST_RETRY }), 'createRequest');
      assert.equal(decision.attempt, row.attempt);
      assert.equal(decision.request.metadata.name, requestName(UID, row.attempt));
      assert.equal(decision.delayMs, 0);
      assert.equal(decision.retryOf, undefined);
      assert.deepEqual(reasons(decision), [EVENT_REASONS.stopping]);
    });
  }

  it('our own retry backs off by our own attempts, not by the names others took', () => {
    const ours = request({ attempt: 1, containers: ['proxy'], completedAgoMs: 0 });
    const forged = request({ attempt: 5, containers: ['proxy'], labels: wrongNode });
    const decision = expectKind(decideFor(stillRunning, 'real', [ours, forged], { options: FAST_RETRY }), 'createRequest');
    assert.equal(decision.attempt, 6);
    assert.equal(decision.retryOf, requestName(UID, 1));
    assert.equal(decision.delayMs, 10_000);
    assert.match(decision.events.find((e) => e.reason === EVENT_REASONS.retrying)?.message ?? '', /still running; retrying with .*-6 \(attempt 6/);
  });

  it('a forged request cannot fake a restart loop', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), sidecar('proxy', 'running', [], { restarts: 1 })] });
    const forged = request({
      containers: [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-id', restartCount: 0 }, state: { phase: 'Succeeded', exitCode: 143 } }],
      labels: wrongUid,
    });
    assert.equal(decideFor(pod, 'real', [forged]).kind, 'createRequest');
  });

  it('a forged request cannot fake an exit the agent saw', () => {
    const forged = request({
      containers: [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-id', restartCount: 0 }, state: { phase: 'Succeeded', exitCode: 0 } }],
      labels: wrongNode,
    });
    assert.equal(decideFor(stillRunning, 'real', [forged]).kind, 'createRequest');
  });

  it('our own request with matching labels still counts as active', () => {
    const ours = request({ completed: false, containers: ['proxy'] });
    assert.equal(expectKind(decideFor(stillRunning, 'real', [ours]), 'wait').reason, 'requestActive');
  });
});

describe('attempt numbers are capped', () => {
  it(`the last name, -${MAX_REQUEST_ATTEMPTS}, is still used`, () => {
    const taken = request({ attempt: MAX_REQUEST_ATTEMPTS - 1, containers: ['proxy'], labels: wrongNode });
    assert.equal(expectKind(decideFor(stillRunning, 'real', [taken]), 'createRequest').attempt, MAX_REQUEST_ATTEMPTS);
  });

  it('past it: not handled, with one Warning saying what to delete', () => {
    const taken = request({ attempt: MAX_REQUEST_ATTEMPTS, completed: false, containers: ['proxy'], labels: wrongNode });
    const decision = expectKind(decideFor(stillRunning, 'real', [taken]), 'notHandled');
    assert.equal(decision.reason, 'attemptsExhausted');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
    assert.match(decision.events[0]?.message ?? '', new RegExp(`up to ${requestName(UID, MAX_REQUEST_ATTEMPTS)} is taken.*"proxy" keeps running.*Delete`));
  });
});
