import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { StopMilestones, StopTimeline } from './timeline.ts';
import { observeStopSteps, RequestTimings, stopTimeline } from './timeline.ts';

const base: StopMilestones = { knownAtMs: 1000, actingAtMs: 1002, runtimeCheckMs: 1.25, stopSentAtMs: 1004, exitedAtMs: 1040 };
const onExit = { mainExitedAtMs: 980, exitEventAtMs: 981.5, createdAtMs: 1000, apiCreateMs: 17 };

describe('stopTimeline (R44)', () => {
  const rows: { name: string; milestones: StopMilestones; timeline: StopTimeline }[] = [
    {
      name: 'a request seen on the watch, no hook: no exit steps',
      milestones: base,
      timeline: { acting: 2, runtimeCheck: 1.3, stopSent: 2, containerExited: 36 },
    },
    {
      name: 'created on the exit: the steps add up to exit → stop sent',
      milestones: { ...base, createdOnExit: onExit },
      timeline: { exitEvent: 1.5, requestCreated: 18.5, apiCreate: 17, acting: 2, runtimeCheck: 1.3, stopSent: 2, containerExited: 36, exitToStopSent: 24 },
    },
    {
      name: 'with a hook: stop sent counts from the hook done',
      milestones: { ...base, prestopDoneAtMs: 1500, stopSentAtMs: 1501, exitedAtMs: 1510 },
      timeline: { acting: 2, runtimeCheck: 1.3, prestopDone: 498, stopSent: 1, containerExited: 9 },
    },
    {
      name: 'a runtime without exit timestamps: no exit event step, no total',
      milestones: { ...base, createdOnExit: { exitEventAtMs: 990, createdAtMs: 1000, apiCreateMs: 9 } },
      timeline: { requestCreated: 10, apiCreate: 9, acting: 2, runtimeCheck: 1.3, stopSent: 2, containerExited: 36 },
    },
    {
      name: 'clocks that disagree (an exit stamped after its event) give 0, never negative',
      milestones: { ...base, createdOnExit: { ...onExit, mainExitedAtMs: 982 } },
      timeline: { exitEvent: 0, requestCreated: 18.5, apiCreate: 17, acting: 2, runtimeCheck: 1.3, stopSent: 2, containerExited: 36, exitToStopSent: 22 },
    },
  ];
  for (const row of rows) {
    it(row.name, () => assert.deepEqual(stopTimeline(row.milestones), row.timeline));
  }
});

describe('RequestTimings (R44): when each request became known', () => {
  it('the first sighting counts; a request the fast path created is known from its create, with its exit\'s timing', () => {
    const timings = new RequestTimings();
    timings.seen('a', 100);
    timings.seen('a', 200);
    timings.createdOnExit('b', onExit);
    timings.seen('b', 1_500);
    assert.deepEqual(timings.of('a'), { atMs: 100 });
    assert.deepEqual(timings.of('b'), { atMs: onExit.createdAtMs, createdOnExit: onExit });
  });

  it('forgets completed requests, and all but the active ones', () => {
    const timings = new RequestTimings();
    for (const uid of ['a', 'b', 'c']) timings.seen(uid, 1);
    timings.forget('a');
    timings.forgetAllBut(new Set(['c']));
    assert.deepEqual(['a', 'b', 'c'].map((uid) => timings.of(uid) !== undefined), [false, false, true]);
  });
});

describe('observeStopSteps (R44)', () => {
  it('observes each step that happened, in seconds, and the main exit → SIGTERM total when known', () => {
    const seen: string[] = [];
    observeStopSteps({
      stopSteps: { observe: ({ step }, seconds) => seen.push(`${step} ${seconds}`) },
      exitToStopSent: { observe: (seconds) => seen.push(`exit_to_stop_sent ${seconds}`) },
    }, stopTimeline({ ...base, createdOnExit: onExit }));
    assert.deepEqual(seen, ['acting 0.002', 'stop_sent 0.002', 'container_exited 0.036', 'exit_to_stop_sent 0.024']);
  });
});
