import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { StopMilestones, StopTimeline } from './timeline.ts';
import { stopTimeline } from './timeline.ts';

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
