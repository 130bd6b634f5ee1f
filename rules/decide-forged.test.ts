// Requests that take our names but are not ours for the Pod: never counted as ours, never blocking.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, FAST_RETRY, main, makePod, NODE, NOW, reasons, request, sidecar, UID } from '../test/support/pods.ts';
import { firstFreeNumber } from './decide.ts';
import type { ExistingRequest } from './requests.ts';
import { attemptsSpanMs, DEFAULT_OPTIONS, MAX_REQUEST_ATTEMPTS, MAX_REQUEST_NAME_NUMBER, requestName } from './requests.ts';

const done = (...sidecars: ContainerSpec[]) => makePod({ containers: [main('app', exited(0)), ...sidecars] });
const stillRunning = done(sidecar('proxy'));

const wrongNode = { podUid: UID, nodeName: 'node-2' };
const wrongUid = { podUid: 'another-uid', nodeName: NODE };

describe('R30: forged requests: our name, not our Pod', () => {
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
    { name: 'a taken later name is not counted: the first free one after ours', requests: [request({ attempt: 7, completed: false, containers: ['proxy'], labels: wrongNode })], attempt: 1 },
    {
      name: 'the first name and the last of the old range taken (-<uid>, -<uid>-1000): the Pod is not given up',
      requests: [request({ completed: false, containers: ['proxy'], labels: wrongNode }), request({ attempt: 1000, completed: false, containers: ['proxy'], labels: wrongNode })],
      attempt: 2,
    },
    {
      name: 'a run of taken names is skipped',
      requests: [1, 2, 3].map((attempt) => request({ attempt, completed: false, containers: ['proxy'], labels: wrongUid })),
      attempt: 4,
    },
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

  it('our own retry backs off by our own requests, not by the names others took, and skips a taken name', () => {
    const ours = request({ attempt: 1, containers: ['proxy'], completedAgoMs: 0 });
    const forged = [2, 3, 900].map((attempt) => request({ attempt, containers: ['proxy'], labels: wrongNode }));
    const decision = expectKind(decideFor(stillRunning, 'real', [ours, ...forged], { options: FAST_RETRY }), 'createRequest');
    assert.equal(decision.attempt, 4);
    assert.equal(decision.retryOf, requestName(UID, 1));
    assert.equal(decision.delayMs, 10_000);
    assert.match(decision.events.find((e) => e.reason === EVENT_REASONS.retrying)?.message ?? '', /still running; retrying with .*-4 \(attempt 4/);
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

describe('R11, R30: attempts are capped by our own requests only', () => {
  it(`names past ${MAX_REQUEST_ATTEMPTS} are ours too: taken names never end them`, () => {
    const taken = [1, MAX_REQUEST_ATTEMPTS].map((attempt) => request({ attempt, containers: ['proxy'], labels: wrongNode }));
    const ours = request({ attempt: MAX_REQUEST_ATTEMPTS - 1, containers: ['proxy'], completedAgoMs: 120_000 });
    assert.equal(expectKind(decideFor(stillRunning, 'real', [...taken, ours], { options: FAST_RETRY }), 'createRequest').attempt, MAX_REQUEST_ATTEMPTS + 1);
  });

  const fullyLabelled = Array.from({ length: MAX_REQUEST_ATTEMPTS }, (_, i) => request({ attempt: i + 1, containers: ['proxy'], completedAgoMs: 120_000 }));
  const mainsFinishedAgo = (ms: number) => makePod({ containers: [main('app', exited(0), { finishedAgoMs: ms }), sidecar('proxy')] });

  it(`${MAX_REQUEST_ATTEMPTS} requests of ours that did not stop the sidecar: not handled, one Warning`, () => {
    const decision = expectKind(decideFor(mainsFinishedAgo(attemptsSpanMs(FAST_RETRY)), 'real', fullyLabelled, { options: FAST_RETRY }), 'notHandled');
    assert.equal(decision.reason, 'attemptsExhausted');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
    assert.match(decision.events[0]?.message ?? '', new RegExp(`${MAX_REQUEST_ATTEMPTS} ContainerRecreateRequests did not stop sidecar "proxy"`));
  });

  describe(`${MAX_REQUEST_ATTEMPTS} in our names and labels end nothing before ours could have been made (their backoff since the mains finished)`, () => {
    const span = attemptsSpanMs(FAST_RETRY);
    const rows: Array<{ name: string; finishedAgoMs: number; givenUp: boolean }> = [
      { name: 'made at once, 10 s after the mains finished', finishedAgoMs: 10_000, givenUp: false },
      { name: 'a second short of the backoff of that many attempts', finishedAgoMs: span - 1000, givenUp: false },
      { name: 'the backoff of that many attempts passed: they may be ours', finishedAgoMs: span, givenUp: true },
    ];
    for (const row of rows) {
      it(`${row.name}: ${row.givenUp ? 'not handled' : 'the next request'}`, () => {
        const decision = decideFor(mainsFinishedAgo(row.finishedAgoMs), 'real', fullyLabelled, { options: FAST_RETRY });
        if (row.givenUp) assert.equal(expectKind(decision, 'notHandled').reason, 'attemptsExhausted');
        else assert.equal(expectKind(decision, 'createRequest').attempt, MAX_REQUEST_ATTEMPTS + 1);
      });
    }

    it('the backoff they add is bounded by retryMaxDelaySeconds', () => {
      const decision = expectKind(decideFor(mainsFinishedAgo(10_000), 'real', fullyLabelled), 'createRequest');
      assert.equal(decision.delayMs, (DEFAULT_OPTIONS.retryMaxDelaySeconds * 1000) - 120_000);
    });

    it('the span: the sum of the backoffs before attempts 2..MAX_REQUEST_ATTEMPTS', () => {
      assert.equal(attemptsSpanMs({ ...DEFAULT_OPTIONS, retryBaseDelaySeconds: 10, retryMaxDelaySeconds: 60 }), (10 + 20 + 40 + 60 * (MAX_REQUEST_ATTEMPTS - 4)) * 1000);
      assert.equal(attemptsSpanMs({ ...DEFAULT_OPTIONS, retryBaseDelaySeconds: 0, retryMaxDelaySeconds: 0 }), 0);
    });
  });

  it(`the name -${MAX_REQUEST_NAME_NUMBER} taken by a request labelled as ours: numbering starts again at the lowest free name`, () => {
    const ours = request({ attempt: 1, containers: ['proxy'], completedAgoMs: 120_000 });
    const top = { ...request({ attempt: MAX_REQUEST_NAME_NUMBER, containers: ['proxy'], completedAgoMs: 60_000 }), creationTimeMs: NOW - 60_000 };
    const decision = expectKind(decideFor(stillRunning, 'real', [ours, top], { options: FAST_RETRY }), 'createRequest');
    assert.equal(decision.attempt, 2);
    // The request made after the one at the top counts as the latest, so the next one follows it.
    const second = { ...request({ attempt: 2, containers: ['proxy'], completedAgoMs: 30_000 }), creationTimeMs: NOW - 30_000 };
    assert.equal(expectKind(decideFor(stillRunning, 'real', [ours, top, second], { options: FAST_RETRY }), 'createRequest').attempt, 3);
    const active = { ...second, completed: false, phase: 'Recreating' as const };
    assert.equal(expectKind(decideFor(stillRunning, 'real', [ours, top, active]), 'wait').reason, 'requestActive');
  });

  it('the first free name: after the latest, else from the lowest, else none', () => {
    const rows: Array<[after: number, taken: number[], max: number, free: number | undefined]> = [
      [0, [], 5, 1],
      [2, [3, 4], 5, 5],
      [5, [1, 2], 5, undefined],
      [0, [1, 2, 3, 4, 5], 5, undefined],
    ];
    for (const [after, taken, max, free] of rows) assert.equal(firstFreeNumber(after, new Set(taken), max), free, `after ${after}, taken ${taken.join(',')}`);
  });
});
