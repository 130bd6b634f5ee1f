import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { BurstResult, BurstRun } from './burst.ts';
import { byVerbAndCode, restepBurst } from './burst.ts';
import { parseMetrics, summarize } from './stats.ts';

describe('the burst: the agent\'s API requests by verb and code', () => {
  it('the deltas between two scrapes, only those that moved, a series new in the second counted whole', () => {
    const scrape = (lines: string[]) => parseMetrics(lines.map((l) => `sidecar_terminator_agent_api_requests_total${l}`).join('\n'));
    const before = scrape(['{verb="create",code="201"} 10', '{verb="patch",code="200"} 5', '{verb="get",code="200"} 3']);
    const after = scrape(['{verb="create",code="201"} 110', '{verb="patch",code="200"} 205', '{verb="get",code="200"} 3', '{verb="patch",code="409"} 7']);
    assert.deepEqual(byVerbAndCode(before, after), { 'create 201': 100, 'patch 200': 200, 'patch 409': 7 });
  });
});

describe("the burst: ours' steps again from the timelines the runs kept", () => {
  const stopFirst = { exitEvent: 900, acting: 0, stopSent: 0, containerExited: 3000, exitToStopSent: 902 };
  const run = (kind: 'ours' | 'native', sampleTimelines?: BurstRun['sampleTimelines']) => ({ kind, sampleTimelines } as BurstRun);
  const burst = (runs: BurstRun[]) => ({ runs, ours: { runs: 2, mainToSidecarMs: summarize([1]), missed: 0, jobsCompleteAtWindowEnd: 0, jobs: 0 } } as unknown as BurstResult);

  it('per run of ours and over them all, with the agent share of stop first; native runs untouched', () => {
    const b = burst([run('ours', [stopFirst, null]), run('native'), run('ours', [{ ...stopFirst, exitToStopSent: 904 }])]);
    restepBurst(b);
    assert.equal(b.runs[0]!.steps?.samples, 2);
    assert.equal(b.runs[1]!.steps, undefined);
    assert.deepEqual([b.ours.steps?.withTimeline, b.ours.steps?.agentShareMs.min, b.ours.steps?.agentShareMs.max], [2, 2, 4]);
  });

  it('leaves the figures as measured where a run of ours kept no timelines (older results)', () => {
    const b = burst([run('ours', [stopFirst]), run('ours')]);
    restepBurst(b);
    assert.equal(b.ours.steps, undefined);
  });
});
