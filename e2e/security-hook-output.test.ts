// e2e group: shared
// Hostile namespaces, round three (R48): exec hooks writing 15 MB each, four in one Pod, beside five
// Pods whose hooks take 20 s, on the real cluster with the shipped memory limits. The agent holds
// 64 KiB of any hook's output; it does not restart, and every 20 s hook runs to its end. It loads the
// agent alone, which serves the other files' Pods meanwhile. The agent's peak memory is printed
// against its limit. (The round's fat requests, which slow the whole API server:
// e2e/security-bounds.test.ts.)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container } from '@kubernetes/client-node';
import { EVENT_REASONS } from '../api/names.ts';
import { clients } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { AGENT_METRICS_PORT, agentPod, deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { health, memoryLimit, mib, peakRss } from './support/parts-health.ts';

const { core } = clients();
let ns: string;

describe('security: hook output a namespace can make big (R48)', () => {
  before(async () => {
    await deployProject();
    ns = await createTestNamespace(core, 'hook-output');
  });
  after(async () => {
    if (ns) await deleteTestNamespace(core, ns, { timeoutMs: 300_000 });
  });

  it('four hooks writing 15 MB each in one Pod, beside five Pods whose hooks take 20 s: no restart, every 20 s hook runs to its end', async (t) => {
    const before = await health();
    const limit = memoryLimit(await agentPod());
    const agentPeak = peakRss(agentPod, AGENT_METRICS_PORT);
    const sidecar = (name: string, hook: string): V1Container => container(name, 'trap \'echo "got SIGTERM"; exit 0\' TERM; while :; do sleep 1 & wait $!; done', {
      env: [SIDECAR_MARK],
      lifecycle: { preStop: { exec: { command: ['sh', '-c', hook] } } },
    });
    const flood = 'head -c 15000000 /dev/zero | tr "\\0" x; echo "flooded" > /proc/1/fd/1';
    const slow = 'echo "hook started" > /proc/1/fd/1; sleep 20; echo "hook ended" > /proc/1/fd/1';
    // Every main ends at the same moment: the hooks run side by side.
    const at = Math.ceil(Date.now() / 1000) + 40;
    const main = container('main', `while [ $(date +%s) -lt ${at} ]; do sleep 0.2; done; echo main done`);
    await jobs.runJob(ns, 'flood', { restartPolicy: 'Never', grace: 30, containers: [main, ...['a', 'b', 'c', 'd'].map((n) => sidecar(`flood-${n}`, flood))] });
    const slowJobs = Array.from({ length: 5 }, (_, i) => `slow-${i}`);
    for (const name of slowJobs) await jobs.runJob(ns, name, { restartPolicy: 'Never', grace: 30, containers: [main, sidecar('proxy', slow)] });
    for (const name of ['flood', ...slowJobs]) assert.equal((await jobs.finishedJob(ns, name, 180_000)).type, 'Complete', name);
    const peak = await agentPeak();
    t.diagnostic(`agent peak RSS ${mib(peak)} (limit ${limit})`);
    const flooded = await jobs.onlyPod(ns, 'flood');
    for (const n of ['a', 'b', 'c', 'd']) {
      const lines = timestampedLogs(ns, flooded.metadata!.name!, `flood-${n}`);
      const hook = firstLine(lines, /^flooded$/);
      const term = firstLine(lines, /^got SIGTERM$/);
      assert.ok(hook && term && hook.atMs <= term.atMs, `flood-${n}: the hook ran to its end before SIGTERM:\n${showLines(lines)}`);
    }
    const events = await jobs.podEvents(flooded);
    assert.ok(events.some((e) => e.startsWith(`Warning ${EVENT_REASONS.failedPreStopHook}`) && /more than 65536 bytes of output/.test(e)), events.join('\n'));
    for (const name of slowJobs) {
      const pod = await jobs.onlyPod(ns, name);
      const lines = timestampedLogs(ns, pod.metadata!.name!, 'proxy');
      const started = firstLine(lines, /^hook started$/);
      const ended = firstLine(lines, /^hook ended$/);
      const term = firstLine(lines, /^got SIGTERM$/);
      assert.ok(started && ended && term && ended.atMs - started.atMs >= 19_000 && term.atMs >= ended.atMs, `${name}: the 20 s hook ran to its end, then SIGTERM:\n${showLines(lines)}`);
    }
    const after = await health();
    assert.deepEqual(after.oomKilled, [], 'no part OOM-killed');
    const agent = (await agentPod()).metadata!.name!;
    assert.equal(after.restarts[agent], before.restarts[agent], 'the agent did not restart');
  });
});
