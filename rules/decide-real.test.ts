// Rules R10–R14 (docs/design.md): real nodes, stopping sidecars through ContainerRecreateRequests.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LABEL_ACTIVE, LABEL_CREATED_BY, LABEL_NODE_NAME, LABEL_POD_UID } from '../api/container-recreate-request.ts';
import { ANNOTATION_SIDECARS, EVENT_REASONS } from '../api/names.ts';
import {
  decideFor,
  exited,
  expectKind,
  FAST_RETRY,
  imageSidecar,
  main,
  makePod,
  NOW,
  reasons,
  request,
  sidecar,
  UID,
} from '../test/support/pods.ts';
import { projectPod } from './projection.ts';
import { buildTerminationRequest, DEFAULT_OPTIONS, requestName } from './requests.ts';

const done = (...sidecars: Parameters<typeof makePod>[0]['containers']) => makePod({ containers: [main('app', exited(0)), ...sidecars] });

describe('R10–R13: creating the request', () => {
  it('creates sidecar-termination-<uid> for the running sidecar, with a Normal event naming both', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy'))), 'createRequest');
    assert.equal(decision.attempt, 1);
    assert.equal(decision.delayMs, 0);
    assert.deepEqual(decision.containers, ['proxy']);
    assert.equal(decision.request.metadata.name, `sidecar-termination-${UID}`);
    assert.equal(decision.retryOf, undefined);
    const [event] = decision.events;
    assert.equal(decision.events.length, 1);
    assert.equal(event?.type, 'Normal');
    assert.equal(event?.reason, EVENT_REASONS.stopping);
    assert.match(event?.message ?? '', new RegExp(`"proxy".*sidecar-termination-${UID}`));
  });

  it('two mains and three sidecars, one already exited: only the running ones are requested', () => {
    const pod = makePod({
      containers: [main('a', exited(0)), sidecar('s1'), main('b', exited(0)), sidecar('s2', exited(0)), sidecar('s3')],
    });
    const decision = expectKind(decideFor(pod), 'createRequest');
    assert.deepEqual(decision.containers, ['s1', 's3']);
    assert.deepEqual(decision.request.spec.containers.map((c) => c.name), ['s1', 's3']);
  });

  it('annotation-marked sidecar with no env is stopped', () => {
    const pod = makePod({ containers: [main('app', exited(0)), main('istio-proxy')], annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy' } });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['istio-proxy']);
  });

  it('both markers on a real node: stopped through a request', () => {
    const pod = done({ name: 'proxy', state: 'running', env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'TRUE' }, { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: 'exit0:1' }] });
    assert.deepEqual(expectKind(decideFor(pod, 'real'), 'createRequest').containers, ['proxy']);
  });

  it('a sidecar without a container ID yet is waited for (a while), not failed', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy', 'waiting', [], { id: null }))), 'wait');
    assert.equal(decision.reason, 'sidecarNotStarted');
    assert.deepEqual(decision.containers, ['proxy']);
    assert.equal(decision.requeueAfterMs, 110_000);
  });

  it('... and requested as soon as it has one', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy', 'running'))), 'createRequest');
    assert.deepEqual(decision.containers, ['proxy']);
  });

  it('sidecars with an ID go now; the one without is named as waited for', () => {
    const decision = expectKind(decideFor(done(sidecar('a'), sidecar('b', 'waiting', [], { id: null }))), 'createRequest');
    assert.deepEqual(decision.containers, ['a']);
    assert.deepEqual(decision.waitingForContainerId, ['b']);
    assert.match(decision.events.at(-1)?.message ?? '', /Waiting for "b"/);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarNotStarted, EVENT_REASONS.stopping]);
  });

  it('the late sidecar gets its own request once it has an ID, without backoff or retry warning', () => {
    const pod = done(sidecar('a', exited(0)), sidecar('b'));
    const decision = expectKind(decideFor(pod, 'real', [request({ attempt: 1, containers: ['a'] })]), 'createRequest');
    assert.equal(decision.attempt, 2);
    assert.deepEqual(decision.containers, ['b']);
    assert.equal(decision.delayMs, 0);
    assert.equal(decision.retryOf, undefined);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.stopping]);
  });

  it('an active request for the Pod: nothing to do', () => {
    for (const phase of ['', 'Pending', 'Recreating'] as const) {
      const active = { ...request({ attempt: 1, completed: false, containers: ['proxy'] }), phase };
      const decision = expectKind(decideFor(done(sidecar('proxy')), 'real', [active]), 'wait');
      assert.equal(decision.reason, 'requestActive');
      assert.equal(decision.requestName, requestName(UID, 1));
      assert.deepEqual(decision.events, []);
    }
  });

  it("other people's requests for the Pod are ignored", () => {
    const theirs = request({ name: 'my-restart', completed: false, containers: ['proxy'] });
    const other = request({ name: `sidecar-termination-${UID}-x`, completed: false, containers: ['proxy'] });
    const decision = expectKind(decideFor(done(sidecar('proxy')), 'real', [theirs, other]), 'createRequest');
    assert.equal(decision.attempt, 1);
  });

  it('an image-only sidecar on a real node: Warning, nothing can stop it', () => {
    const decision = expectKind(decideFor(done(imageSidecar('img', 'exit0:1'))), 'notHandled');
    assert.equal(decision.reason, 'noStoppableSidecar');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
    assert.match(decision.events[0]?.message ?? '', /"img"/);
  });

  it('a request sidecar and an image-only sidecar: request for the first, Warning for the second', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy'), imageSidecar('img', 'exit0:1'))), 'createRequest');
    assert.deepEqual(decision.containers, ['proxy']);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable, EVENT_REASONS.stopping]);
  });
});

describe('R11, R14: retries', () => {
  const stillRunning = done(sidecar('proxy'));
  const failedFirst = request({ attempt: 1, containers: ['proxy'], message: 'agent did not pick it up', completedAgoMs: 1_000 });

  it('a completed request and a sidecar still running: retry as -2 after the backoff, with a Warning', () => {
    const decision = expectKind(decideFor(stillRunning, 'real', [failedFirst], { options: FAST_RETRY }), 'createRequest');
    assert.equal(decision.attempt, 2);
    assert.equal(decision.request.metadata.name, `sidecar-termination-${UID}-2`);
    assert.equal(decision.retryOf, requestName(UID, 1));
    assert.equal(decision.delayMs, 9_000);
    const warning = decision.events.find((e) => e.reason === EVENT_REASONS.retrying);
    assert.equal(warning?.type, 'Warning');
    assert.match(warning?.message ?? '', /completed but sidecar "proxy" is still running \(agent did not pick it up\).*sidecar-termination-.*-2 \(attempt 2, after a 10s backoff\)/);
  });

  it('once the backoff has passed the delay is 0', () => {
    const old = request({ attempt: 1, containers: ['proxy'], completedAgoMs: 60_000 });
    assert.equal(expectKind(decideFor(stillRunning, 'real', [old], { options: FAST_RETRY }), 'createRequest').delayMs, 0);
  });

  it('names and backoff grow per attempt, exponentially, with a cap', () => {
    const expected = [
      [2, 10_000],
      [3, 20_000],
      [4, 40_000],
      [5, 60_000],
      [9, 60_000],
    ] as const;
    for (const [attempt, delay] of expected) {
      const previous = Array.from({ length: attempt - 1 }, (_, i) => request({ attempt: i + 1, containers: ['proxy'], completedAgoMs: 0 }));
      const decision = expectKind(decideFor(stillRunning, 'real', previous, { options: FAST_RETRY }), 'createRequest');
      assert.equal(decision.attempt, attempt);
      assert.equal(decision.request.metadata.name, `sidecar-termination-${UID}-${attempt}`);
      assert.equal(decision.delayMs, delay, `attempt ${attempt}`);
    }
  });

  it('numbers from the latest existing attempt even if older ones are gone (TTL)', () => {
    const decision = expectKind(decideFor(stillRunning, 'real', [request({ attempt: 3, containers: ['proxy'], completedAgoMs: 0 })], { options: FAST_RETRY }), 'createRequest');
    assert.equal(decision.attempt, 4);
    assert.equal(decision.delayMs, 40_000);
  });

  it('backoff counts from creation when completion time is unknown, and never blocks without any time', () => {
    const noCompletion = { ...request({ attempt: 1, containers: ['proxy'] }), completionTimeMs: undefined, creationTimeMs: NOW - 4_000 };
    assert.equal(expectKind(decideFor(stillRunning, 'real', [noCompletion], { options: FAST_RETRY }), 'createRequest').delayMs, 6_000);
    const noTime = { ...noCompletion, creationTimeMs: undefined };
    assert.equal(expectKind(decideFor(stillRunning, 'real', [noTime], { options: FAST_RETRY }), 'createRequest').delayMs, 0);
  });

  it('the retry names the request that last asked for the sidecar, not merely the latest one', () => {
    const pod = done(sidecar('a'), sidecar('b', exited(0)));
    const requests = [request({ attempt: 1, containers: ['a'], message: 'agent down' }), request({ attempt: 2, containers: ['b'] })];
    const decision = expectKind(decideFor(pod, 'real', requests), 'createRequest');
    assert.equal(decision.attempt, 3);
    assert.equal(decision.retryOf, requestName(UID, 1));
    assert.match(decision.events[0]?.message ?? '', new RegExp(`${requestName(UID, 1)} completed.*agent down`));
  });

  it('a retry that also covers a never-asked sidecar goes at once', () => {
    const pod = done(sidecar('a'), sidecar('b'));
    const decision = expectKind(decideFor(pod, 'real', [request({ attempt: 1, containers: ['a'], completedAgoMs: 0 })], { options: FAST_RETRY }), 'createRequest');
    assert.deepEqual(decision.containers, ['a', 'b']);
    assert.equal(decision.delayMs, 0);
    assert.equal(decision.retryOf, requestName(UID, 1));
    assert.deepEqual(reasons(decision), [EVENT_REASONS.retrying, EVENT_REASONS.stopping]);
  });

  it('the retry Warning carries the per-container message of the previous request', () => {
    const previous = request({
      attempt: 1,
      containers: [
        { name: 'proxy', statusContext: { containerID: 'containerd://proxy-id', restartCount: 0 }, state: { phase: 'Failed', message: 'rpc error: StopContainer timed out' } },
      ],
    });
    const decision = expectKind(decideFor(stillRunning, 'real', [previous]), 'createRequest');
    assert.match(decision.events[0]?.message ?? '', /proxy: rpc error: StopContainer timed out/);
  });

  it('event keys differ per attempt, so each retry is reported once', () => {
    const two = expectKind(decideFor(stillRunning, 'real', [failedFirst]), 'createRequest');
    const three = expectKind(decideFor(stillRunning, 'real', [failedFirst, request({ attempt: 2, containers: ['proxy'] })]), 'createRequest');
    const keys = new Set([...two.events, ...three.events].map((e) => e.key));
    assert.equal(keys.size, 4);
  });
});

describe('R12: the request body', () => {
  const pod = projectPod(
    makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running', [], { restarts: 2 }), sidecar('log', 'running', [], { id: 'docker://abc' })] }),
  );

  it('has name, namespace, controller owner reference, and node, uid, active and created-by labels', () => {
    const crr = buildTerminationRequest(pod, ['proxy'], 1);
    assert.equal(crr.apiVersion, 'sidecar-terminator.dev/v1alpha1');
    assert.equal(crr.kind, 'ContainerRecreateRequest');
    assert.equal(crr.metadata.name, `sidecar-termination-${UID}`);
    assert.equal(crr.metadata.namespace, 'ns');
    assert.deepEqual(crr.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Pod', name: 'job-pod', uid: UID, controller: true }]);
    assert.deepEqual(crr.metadata.labels, { [LABEL_NODE_NAME]: 'node-1', [LABEL_POD_UID]: UID, [LABEL_ACTIVE]: 'true', [LABEL_CREATED_BY]: 'sidecar-terminator' });
  });

  it('has the containers with their statusContext from the Pod status, and the strategy', () => {
    const crr = buildTerminationRequest(pod, ['proxy', 'log'], 2);
    assert.equal(crr.metadata.name, `sidecar-termination-${UID}-2`);
    assert.deepEqual(crr.spec.podName, 'job-pod');
    assert.deepEqual(crr.spec.containers, [
      { name: 'proxy', statusContext: { containerID: 'containerd://proxy-id', restartCount: 2 } },
      { name: 'log', statusContext: { containerID: 'docker://abc', restartCount: 0 } },
    ]);
    assert.deepEqual(crr.spec.strategy, { forceRecreate: true, failurePolicy: 'Ignore' });
  });

  it('has the deadline and TTL from the options', () => {
    const crr = buildTerminationRequest(pod, ['proxy'], 1, { ...DEFAULT_OPTIONS, activeDeadlineSeconds: 120, ttlSecondsAfterFinished: 600 });
    assert.equal(crr.spec.activeDeadlineSeconds, 120);
    assert.equal(crr.spec.ttlSecondsAfterFinished, 600);
  });

  it('raises the deadline so a long grace period is never cut short', () => {
    const slow = { ...pod, terminationGracePeriodSeconds: 600 };
    assert.equal(buildTerminationRequest(slow, ['proxy'], 1, { ...DEFAULT_OPTIONS, activeDeadlineSeconds: 120 }).spec.activeDeadlineSeconds, 660);
  });

  it('refuses a container without an ID (decide never asks for one)', () => {
    const noId = projectPod(makePod({ containers: [sidecar('proxy', 'waiting', [], { id: null })] }));
    assert.throws(() => buildTerminationRequest(noId, ['proxy'], 1), /no container ID/);
  });

  it('is what decide returns, built with the context options', () => {
    const decision = expectKind(
      decideFor(done(sidecar('proxy')), 'real', [], { options: { ...FAST_RETRY, ttlSecondsAfterFinished: 77 } }),
      'createRequest',
    );
    assert.equal(decision.request.spec.ttlSecondsAfterFinished, 77);
  });
});
