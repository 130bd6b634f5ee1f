import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { agentTotals, mergeAgentLogs, roundRobin, summaryByNode } from './nodes.ts';

const NODES = ['host', 'host-2', 'host-3'];

describe('parts 1 and 2 on several nodes', () => {
  it('round-robin: the i-th Job on node i mod N; one node takes them all', () => {
    assert.deepEqual(Array.from({ length: 7 }, (_, i) => roundRobin(i, NODES)), ['host', 'host-2', 'host-3', 'host', 'host-2', 'host-3', 'host']);
    assert.deepEqual(Array.from({ length: 3 }, (_, i) => roundRobin(i, ['host'])), ['host', 'host', 'host']);
    assert.throws(() => roundRobin(0, []), /no nodes/);
  });

  it('100 Jobs over three nodes: 34, 33, 33', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 100; i++) counts.set(roundRobin(i, NODES), (counts.get(roundRobin(i, NODES)) ?? 0) + 1);
    assert.deepEqual([...counts], [['host', 34], ['host-2', 33], ['host-3', 33]]);
  });

  it('per node and group: the samples of each node summarized apart, every node listed in order, groups as found', () => {
    const samples = [
      { node: 'host-2', group: 'ours', mainToSidecarMs: 10 },
      { node: 'host', group: 'ours', mainToSidecarMs: 100 },
      { node: 'host-2', group: 'native', mainToSidecarMs: 900 },
      { node: 'host-2', group: 'ours', mainToSidecarMs: 30 },
      { node: undefined, group: 'ours', mainToSidecarMs: 5000 },
    ];
    const by = summaryByNode(samples, NODES, (s) => s.group);
    assert.deepEqual(Object.keys(by), NODES);
    assert.deepEqual(Object.keys(by['host-2']!), ['ours', 'native']);
    assert.equal(by['host-2']!.ours!.n, 2);
    assert.equal(by['host-2']!.ours!.p50, 20);
    assert.equal(by.host!.ours!.p50, 100);
    assert.deepEqual(by['host-3'], {});
  });

  it('the agents\' logs as one: every node\'s stops, restarts summed, each error named by its agent', () => {
    const log = (pods: string[], agentRestarts = 0, error?: string) => ({ timelines: new Map(pods.map((p) => [p, { exitToStopSent: 1 }])), agentRestarts, ...(error ? { error } : {}) });
    const merged = mergeAgentLogs([
      { agent: 'agent-a', log: log(['ns/a', 'ns/b']) },
      { agent: 'agent-b', log: log(['ns/c'], 1) },
      { agent: 'agent-c', log: log([], 0, 'log unreadable') },
    ]);
    assert.deepEqual([...merged.timelines.keys()], ['ns/a', 'ns/b', 'ns/c']);
    assert.equal(merged.agentRestarts, 1);
    assert.equal(merged.error, 'agent-c: log unreadable');
    assert.equal(mergeAgentLogs([{ agent: 'agent-a', log: log(['ns/a']) }]).error, undefined);
  });

  it('the agents together: memory and CPU summed, CPU per stop over every Job of the burst', () => {
    const agent = (rssIdleMB: number, rssPeakBurstMB: number, millicores: number, cpuSeconds: number) => ({ rssIdleMB, rssPeakBurstMB, idle: { millicores }, burst: { cpuSeconds } });
    assert.deepEqual(agentTotals([agent(70.1, 80.2, 0.5, 0.6), agent(71, 79, 0.25, 0.5), agent(69.2, 81, 0.125, 0.4)], 100), {
      agents: 3, rssIdleMB: 210.3, rssPeakBurstMB: 240.2, idleMillicores: 0.875, burstCpuSeconds: 1.5, cpuMsPerStop: 15,
    });
  });
});
