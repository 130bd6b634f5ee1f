// Sidecars that never start, and swapped sidecars that crash-loop on virtual nodes: waited for a
// bounded time, then the Pod ends through the phase guard.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import { MAX_REQUEUE_MS } from '../common/queue.ts';
import type { ContainerSpec, PodSpec, StateSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, FAST_RETRY, IGNORE_EXIT_CODE, imageSidecar, main, makePod, NOW, reasons, request, sidecar, WHEN_JOB_EXIT, withImage } from '../test/support/pods.ts';
import { DEFAULT_OPTIONS } from './requests.ts';

/** A sidecar that never started: no container, waiting with `reason`. */
const unstarted = (name: string, reason = 'ImagePullBackOff', env = [WHEN_JOB_EXIT]): ContainerSpec => ({
  name,
  state: 'waiting',
  id: null,
  waitingReason: reason,
  env,
});
const mainDone = (code = 0, finishedAgoMs: number | null = 10_000) => main('app', exited(code), { finishedAgoMs });
const timeoutMs = DEFAULT_OPTIONS.sidecarStartTimeoutSeconds * 1000;

describe('real node: a sidecar that never started', () => {
  it('R8: kubelet reports such a Pod Pending: it is handled all the same, and its started sidecars are stopped', () => {
    const waiting = expectKind(decideFor(makePod({ phase: 'Pending', containers: [mainDone(), unstarted('proxy', 'ErrImageNeverPull')] })), 'wait');
    assert.equal(waiting.reason, 'sidecarNotStarted');
    const patched = expectKind(decideFor(makePod({ phase: 'Pending', containers: [mainDone(0, 121_000), unstarted('proxy')] })), 'patchPhase');
    assert.equal(patched.phase, 'Succeeded');
    const stopping = expectKind(decideFor(makePod({ phase: 'Pending', containers: [mainDone(), sidecar('log'), unstarted('proxy')] })), 'createRequest');
    assert.deepEqual(stopping.containers, ['log']);
  });

  it('R18, R19: is waited for until the timeout, counted from when the mains finished, with one Warning', () => {
    const decision = expectKind(decideFor(makePod({ containers: [mainDone(), unstarted('proxy', 'ErrImagePull')] })), 'wait');
    assert.equal(decision.reason, 'sidecarNotStarted');
    assert.deepEqual(decision.containers, ['proxy']);
    assert.equal(decision.requeueAfterMs, timeoutMs - 10_000);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarNotStarted]);
    const [event] = decision.events;
    assert.equal(event?.type, 'Warning');
    assert.equal(event?.key, EVENT_REASONS.sidecarNotStarted);
    assert.match(event?.message ?? '', /"proxy" \(ErrImagePull\) has not started.*up to 120s from when the main containers finished.*sets the Pod's phase/);
  });

  const rows: Array<{ name: string; pod: PodSpec; phase: 'Succeeded' | 'Failed' }> = [
    { name: 'Never, main exited 0', pod: { containers: [mainDone(0, 121_000), unstarted('proxy')] }, phase: 'Succeeded' },
    { name: 'Never, main failed', pod: { containers: [mainDone(1, 121_000), unstarted('proxy')] }, phase: 'Failed' },
    { name: 'OnFailure, main exited 0', pod: { restartPolicy: 'OnFailure', containers: [mainDone(0, 121_000), unstarted('proxy')] }, phase: 'Succeeded' },
    {
      name: 'Never, another sidecar exited non-zero',
      pod: { containers: [mainDone(0, 121_000), sidecar('log', exited(143)), unstarted('proxy')] },
      phase: 'Failed',
    },
    {
      name: 'Never, the other sidecar exited 0',
      pod: { containers: [mainDone(0, 121_000), sidecar('log', exited(0)), unstarted('proxy')] },
      phase: 'Succeeded',
    },
    { name: 'an image-only sidecar that never started', pod: { containers: [mainDone(0, 121_000), unstarted('img', 'ErrImagePull', [withImage('x')])] }, phase: 'Succeeded' },
  ];
  for (const row of rows) {
    it(`R19: after the timeout, the phase is set through the guard: ${row.name} -> ${row.phase}`, () => {
      const decision = expectKind(decideFor(makePod(row.pod)), 'patchPhase');
      assert.equal(decision.cause, 'sidecarNotStarted');
      assert.equal(decision.phase, row.phase);
      assert.equal(decision.condition.type, CONDITION_SIDECAR_TERMINATED);
      assert.equal(decision.condition.reason, 'SidecarNotStarted');
      assert.deepEqual(decision.statusPatch, { status: { phase: row.phase, conditions: [decision.condition] } });
      assert.match(decision.condition.message, /had not started 120s after they finished/);
      assert.equal(decision.events.at(-1)?.reason, EVENT_REASONS.phaseSet);
      assert.equal(decision.events.filter((e) => e.reason === EVENT_REASONS.sidecarNotStarted).length, 1);
    });
  }

  it('R19, R23: after the timeout, an ignore-exit-code sidecar still running is asked to stop, then the phase is set as for the timeout', () => {
    const pod = makePod({ containers: [mainDone(0, 121_000), sidecar('ign', 'running', [IGNORE_EXIT_CODE]), unstarted('proxy')] });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['ign']);
    const decision = expectKind(decideFor(pod, 'real', [request({ containers: ['ign'], completed: false })]), 'patchPhase');
    assert.equal(decision.cause, 'sidecarNotStarted');
    assert.equal(decision.phase, 'Succeeded');
  });

  it('R19, R23: before the timeout, an ignore-exit-code sidecar is not asked: the wait for the unstarted one comes first', () => {
    const pod = makePod({ containers: [mainDone(0, 60_000), sidecar('ign', 'running', [IGNORE_EXIT_CODE]), unstarted('proxy')] });
    assert.equal(expectKind(decideFor(pod), 'wait').reason, 'sidecarNotStarted');
  });

  it('R18: started sidecars are still stopped through a request first, while the Warning goes out', () => {
    const decision = expectKind(decideFor(makePod({ containers: [mainDone(0, 500_000), sidecar('log'), unstarted('proxy')] })), 'createRequest');
    assert.deepEqual(decision.containers, ['log']);
    assert.deepEqual(decision.waitingForContainerId, ['proxy']);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarNotStarted, EVENT_REASONS.stopping]);
  });

  it('... and while that request runs, nothing is patched', () => {
    const pod = makePod({ containers: [mainDone(0, 500_000), sidecar('log'), unstarted('proxy')] });
    const active = request({ completed: false, containers: ['log'] });
    assert.equal(expectKind(decideFor(pod, 'real', [active]), 'wait').reason, 'requestActive');
  });

  it('the latest main finish counts', () => {
    const pod = makePod({ containers: [main('a', exited(0), { finishedAgoMs: 500_000 }), main('b', exited(0), { finishedAgoMs: 30_000 }), unstarted('proxy')] });
    assert.equal(expectKind(decideFor(pod), 'wait').requeueAfterMs, timeoutMs - 30_000);
  });

  it('an unknown finish time counts from the Pod start (the latest time known to come before it)', () => {
    const old = makePod({ containers: [mainDone(0, null), unstarted('proxy')] });
    assert.equal(decideFor(old).kind, 'patchPhase');
    const young = makePod({ containers: [mainDone(0, null), unstarted('proxy')] });
    young.status!.startTime = new Date(NOW - 60_000);
    assert.equal(expectKind(decideFor(young), 'wait').requeueAfterMs, timeoutMs - 60_000);
  });

  it('the timeout is an option', () => {
    const pod = makePod({ containers: [mainDone(0, 10_000), unstarted('proxy')] });
    const decision = decideFor(pod, 'real', [], { options: { ...FAST_RETRY, sidecarStartTimeoutSeconds: 5 } });
    assert.equal(expectKind(decision, 'patchPhase').cause, 'sidecarNotStarted');
  });

  it('a requeue never exceeds what a timer holds', () => {
    const pod = makePod({ containers: [mainDone(), unstarted('proxy')] });
    const decision = decideFor(pod, 'real', [], { options: { ...FAST_RETRY, sidecarStartTimeoutSeconds: 30 * 86_400 } });
    assert.equal(expectKind(decision, 'wait').requeueAfterMs, MAX_REQUEUE_MS);
  });

  it('several sidecars that never started: one Warning naming each with its reason', () => {
    const pod = makePod({ containers: [mainDone(), unstarted('a', 'ErrImagePull'), unstarted('b', 'CreateContainerConfigError'), unstarted('c')] });
    const decision = decideFor(pod);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarNotStarted]);
    assert.match(decision.events[0]?.message ?? '', /"a" \(ErrImagePull\), "b" \(CreateContainerConfigError\) and "c" \(ImagePullBackOff\) have not started/);
  });

  it('R18: only ignore-exit-code sidecars that never started: the phase is set at once, as for running ones', () => {
    const pod = makePod({ containers: [mainDone(), unstarted('ign', 'ErrImagePull', [WHEN_JOB_EXIT, IGNORE_EXIT_CODE])] });
    const decision = expectKind(decideFor(pod), 'patchPhase');
    assert.equal(decision.cause, 'ignoreExitCode');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.phaseSet]);
  });

  it('a waiting sidecar that has a container (between restarts) is started: stopped through a request as today', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [mainDone(), sidecar('proxy', 'waiting', [], { restarts: 2, waitingReason: 'CrashLoopBackOff' })] });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['proxy']);
  });

  it('the Warning key is the same on every reconcile (emitted once per Pod)', () => {
    const early = decideFor(makePod({ containers: [mainDone(), unstarted('proxy')] }));
    const late = decideFor(makePod({ containers: [mainDone(0, 500_000), sidecar('log'), unstarted('proxy'), unstarted('other')] }));
    const key = (d: typeof early) => d.events.find((e) => e.reason === EVENT_REASONS.sidecarNotStarted)?.key;
    assert.equal(key(early), key(late));
  });
});

describe('virtual node: swapped sidecars that do not run', () => {
  /** A sidecar with both markers (and ignore-exit-code), whose image is already the quick-exit one. */
  const swapped = (name: string, state: StateSpec, ignore: boolean, reason = 'CrashLoopBackOff'): ContainerSpec => ({
    name,
    state,
    image: 'exit0:1',
    waitingReason: reason,
    restarts: 3,
    env: [WHEN_JOB_EXIT, withImage('exit0:1'), ...(ignore ? [IGNORE_EXIT_CODE] : [])],
  });

  it('an ignore-exit-code sidecar crash-looping on the quick-exit image: the phase is set as for ignore-exit-code', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [mainDone(), swapped('proxy', 'waiting', true)] });
    const decision = expectKind(decideFor(pod, 'virtual'), 'patchPhase');
    assert.equal(decision.cause, 'ignoreExitCode');
    assert.equal(decision.phase, 'Succeeded');
    assert.equal(decision.condition.reason, 'IgnoredSidecarExitCode');
  });

  it('... Failed when a main failed (Never)', () => {
    const pod = makePod({ containers: [mainDone(1), swapped('proxy', 'waiting', true)] });
    assert.equal(expectKind(decideFor(pod, 'virtual'), 'patchPhase').phase, 'Failed');
  });

  it('... not while another swapped sidecar still runs', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [mainDone(), swapped('proxy', 'waiting', true), swapped('log', 'running', false)] });
    assert.equal(expectKind(decideFor(pod, 'virtual'), 'wait').reason, 'imageSwapInProgress');
  });

  it('... not before the other sidecars are swapped', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [mainDone(), swapped('proxy', 'waiting', true), imageSidecar('log', 'exit0:1')] });
    assert.deepEqual(expectKind(decideFor(pod, 'virtual'), 'swapImages').swaps.map((s) => s.container), ['log']);
  });

  it('an ignore-exit-code sidecar still running once swapped: the phase at once, before its quick-exit container can fail', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [mainDone(), swapped('proxy', 'running', true)] });
    const decision = expectKind(decideFor(pod, 'virtual'), 'patchPhase');
    assert.equal(decision.cause, 'ignoreExitCode');
    assert.equal(decision.phase, 'Succeeded');
  });

  it('a non-ignore swapped sidecar crash-looping: the bounded wait, with a Warning, then the phase', () => {
    const early = expectKind(decideFor(makePod({ restartPolicy: 'OnFailure', containers: [mainDone(), swapped('proxy', 'waiting', false)] }), 'virtual'), 'wait');
    assert.equal(early.reason, 'sidecarNotStarted');
    assert.equal(early.requeueAfterMs, timeoutMs - 10_000);
    assert.deepEqual(reasons(early), [EVENT_REASONS.sidecarNotStarted]);
    assert.match(early.events[0]?.message ?? '', /"proxy" \(CrashLoopBackOff\)/);
    const late = expectKind(decideFor(makePod({ restartPolicy: 'OnFailure', containers: [mainDone(0, 121_000), swapped('proxy', 'waiting', false)] }), 'virtual'), 'patchPhase');
    assert.equal(late.cause, 'sidecarNotStarted');
    assert.equal(late.phase, 'Succeeded');
  });

  it('the container our swap asked for, being created: waited for without a Warning', () => {
    const decision = expectKind(decideFor(makePod({ containers: [mainDone(), swapped('proxy', 'waiting', false, 'ContainerCreating')] }), 'virtual'), 'wait');
    assert.equal(decision.reason, 'sidecarNotStarted');
    assert.deepEqual(decision.events, []);
  });

  it('IGNORE_EXIT_CODE next to WITH_IMAGE alone does not count: the bounded wait applies', () => {
    const pod = makePod({
      restartPolicy: 'OnFailure',
      containers: [mainDone(), { name: 'proxy', state: 'waiting', image: 'exit0:1', waitingReason: 'CrashLoopBackOff', env: [withImage('exit0:1'), IGNORE_EXIT_CODE] }],
    });
    const decision = expectKind(decideFor(pod, 'virtual'), 'wait');
    assert.equal(decision.reason, 'sidecarNotStarted');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.markerIneffective, EVENT_REASONS.sidecarNotStarted]);
  });

  it('a request-only sidecar that never started on a virtual node: no hang, the bounded wait', () => {
    const pod = makePod({ containers: [mainDone(0, 121_000), unstarted('proxy')] });
    const decision = expectKind(decideFor(pod, 'virtual'), 'patchPhase');
    assert.equal(decision.cause, 'sidecarNotStarted');
    assert.ok(!reasons(decision).includes(EVENT_REASONS.notStoppable));
  });

  it('a sidecar not swapped yet is swapped first, started or not', () => {
    const pod = makePod({ containers: [mainDone(0, 500_000), imageSidecar('proxy', 'exit0:1', 'waiting', { id: null, waitingReason: 'ErrImagePull' })] });
    assert.equal(decideFor(pod, 'virtual').kind, 'swapImages');
  });
});
