// Pure helpers of the benchmark: reading the agent's log timelines, summarizing them per step, its histograms.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseMetrics } from './stats.ts';
import { agentShare, parseStopTimelines, stepHistograms, summarizeSteps } from './timeline.ts';

const line = (o: Record<string, unknown>) => JSON.stringify({ component: 'agent', level: 'info', timestamp: '2026-11-24T10:00:00.000Z', ...o });
const FAST = { exitEvent: 1.2, requestCreated: 14.3, apiCreate: 12.9, acting: 0.4, runtimeCheck: 1.8, stopSent: 2.1, containerExited: 35, exitToStopSent: 18 };

describe('the agent log timelines', () => {
  it('reads the timeline of each "container stopped" line, by Pod, and skips everything else', () => {
    const log = [
      line({ message: 'container stopped', pod: 'ns/a', container: 'proxy', ms: 12, timeline: FAST }),
      line({ message: 'request created', pod: 'ns/b' }),
      'not json at all',
      '{"truncated": ',
      line({ message: 'container stopped', pod: 'ns/c', container: 'proxy', ms: 40 }),
      line({ message: 'container stopped', pod: 'ns/d', timeline: { acting: 3, stopSent: 'x', containerExited: 20 } }),
      line({ message: 'container stopped', pod: 'ns/a', timeline: { acting: 99 } }),
      '',
    ].join('\n');
    const timelines = parseStopTimelines(log);
    assert.deepEqual([...timelines.keys()], ['ns/a', 'ns/d']);
    assert.deepEqual(timelines.get('ns/a'), FAST);
    assert.deepEqual(timelines.get('ns/d'), { acting: 3, containerExited: 20 });
  });

  it('one line alone is read as well (a log of one line is still JSON lines)', () => {
    assert.equal(parseStopTimelines(line({ message: 'container stopped', pod: 'ns/a', timeline: FAST })).size, 1);
  });

  it("the agent's own share is main exit → SIGTERM sent less the waits on the API server and the runtime, on the fast path only", () => {
    assert.equal(agentShare(FAST), 2.1); // 18 - 1.2 - 12.9 - 1.8
    assert.equal(agentShare({ ...FAST, runtimeCheck: undefined }), 3.9);
    assert.equal(agentShare({ acting: 1, stopSent: 2, containerExited: 30 }), undefined);
    // The watch brought the request before the create answered: the stop went out 5.5 ms before
    // that answer. The share is the wait before the create alone, not negative.
    assert.equal(agentShare({ ...FAST, exitToStopSent: 10 }), 1.4);
    // A hook ran first: its 500 ms are the container's, not the agent's.
    assert.equal(agentShare({ ...FAST, prestopDone: 500, exitToStopSent: 518 }), 2.1);
    // Stop first: the request is written after the stop, so no create is on the way.
    const stopFirst = { exitEvent: 9.8, acting: 0.2, runtimeCheck: 0.5, stopSent: 0.3, containerExited: 40, exitToStopSent: 10.9 };
    assert.equal(agentShare(stopFirst), 0.6);
    assert.equal(agentShare({ ...stopFirst, exitToStopSent: 9 }), 0);
  });

  it('summarizes each step over the Pods that have it and counts the Pods without a timeline', () => {
    const slow = { acting: 5, stopSent: 3, runtimeCheck: 2, containerExited: 40 };
    const b = summarizeSteps([FAST, { ...FAST, exitToStopSent: 28 }, slow, undefined]);
    assert.equal(b.samples, 4);
    assert.equal(b.withTimeline, 3);
    assert.equal(b.fastPath, 2);
    assert.equal(b.stepsMs.acting.n, 3);
    assert.equal(b.stepsMs.acting.p50, 0.4);
    assert.equal(b.stepsMs.exitToStopSent.n, 2);
    assert.equal(b.stepsMs.exitToStopSent.p50, 23);
    assert.equal(b.stepsMs.prestopDone.n, 0);
    assert.deepEqual([b.agentShareMs.n, b.agentShareMs.min, b.agentShareMs.max], [2, 2.1, 12.1]);
  });

  it('with no timelines at all (an agent without the timing) every step is empty, not zero', () => {
    const b = summarizeSteps([undefined, undefined]);
    assert.equal(b.withTimeline, 0);
    assert.ok(Number.isNaN(b.stepsMs.exitToStopSent.p50));
    assert.ok(Number.isNaN(b.agentShareMs.p99));
  });

  it("reads the step histograms between two scrapes, by step, and says so when the agent has none", () => {
    const metrics = (n: number) => parseMetrics([
      `sidecar_terminator_agent_step_seconds_bucket{step="acting",le="0.005"} ${n}`,
      `sidecar_terminator_agent_step_seconds_bucket{step="acting",le="+Inf"} ${n}`,
      `sidecar_terminator_agent_step_seconds_bucket{step="stop_sent",le="0.005"} 0`,
      `sidecar_terminator_agent_step_seconds_bucket{step="stop_sent",le="+Inf"} ${n}`,
    ].join('\n'));
    const h = stepHistograms(metrics(2), metrics(12));
    assert.deepEqual(h.acting, { count: 10, p50UpperBoundMs: '<= 5', p99UpperBoundMs: '<= 5' });
    assert.equal(h.stopSent!.p50UpperBoundMs, '> 5');
    assert.equal(h.exitToStopSent!.p50UpperBoundMs, 'no data');
  });
});
