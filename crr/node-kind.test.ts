// Rule R22 (docs/design.md): when a real node counts as agentless, and the blips that must not make it so.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AgentPodView, AgentlessTiming, NodeFacts } from './node-kind.ts';
import { nodeKindOf } from './node-kind.ts';

const S = 1000;
const NOW = 1_000_000 * S;
const AFTER = 120 * S;
/** A controller that has watched for an hour, waiting `AFTER` for an agent. */
const TIMING: AgentlessTiming = { agentsSeen: true, watchingSinceMs: NOW - 3600 * S, afterMs: AFTER };
/** A node a day old, real, no selector, no agent Pod. */
const node = (facts: Partial<NodeFacts> = {}): NodeFacts => ({ virtual: false, agentlessBySelector: false, createdMs: NOW - 86_400 * S, agents: [], ...facts });
const running: AgentPodView = { running: true, notRunningSinceMs: 0 };
const notRunningFor = (seconds: number): AgentPodView => ({ running: false, notRunningSinceMs: NOW - seconds * S });

describe('R22: nodes where no agent runs', () => {
  const rows: [string, NodeFacts, Partial<AgentlessTiming>, { kind: string; recheckAtMs?: number }][] = [
    ['virtual by its label, whatever else', node({ virtual: true, agentlessBySelector: true, agents: [running] }), {}, { kind: 'virtual' }],
    ['named by the selector: agentless at once, even on its first second', node({ agentlessBySelector: true, createdMs: NOW }), {}, { kind: 'agentless' }],
    ['named by the selector, even with a running agent (the operator says so)', node({ agentlessBySelector: true, agents: [running] }), {}, { kind: 'agentless' }],
    ['a running agent: real (ready or not: it carries out requests)', node({ agents: [running] }), {}, { kind: 'real' }],
    ['a running agent beside one that is not (a rollout with surge): real', node({ agents: [notRunningFor(500), running] }), {}, { kind: 'real' }],
    ['no agent Pod ever, node a day old: agentless', node(), {}, { kind: 'agentless' }],
    ['no agent Pod, exactly the wait: agentless', node({ createdMs: NOW - AFTER }), {}, { kind: 'agentless' }],
    ['a node\'s first seconds, no agent yet: real until the wait is over', node({ createdMs: NOW - 5 * S }), {}, { kind: 'real', recheckAtMs: NOW - 5 * S + AFTER }],
    ['a controller just started knows nothing of before: real until the wait is over', node(), { watchingSinceMs: NOW - 10 * S }, { kind: 'real', recheckAtMs: NOW - 10 * S + AFTER }],
    ['a rollout: the old agent Pod went away a second ago, the next not created yet', node({ agentGoneMs: NOW - S }), {}, { kind: 'real', recheckAtMs: NOW - S + AFTER }],
    ['a rollout: the next agent Pod created, its container not started yet', node({ agents: [notRunningFor(3)] }), {}, { kind: 'real', recheckAtMs: NOW - 3 * S + AFTER }],
    ['an agent Pod being deleted (deletion timestamp 20 s ago)', node({ agents: [notRunningFor(20)] }), {}, { kind: 'real', recheckAtMs: NOW - 20 * S + AFTER }],
    ['an agent Pod whose container has not run for longer than the wait (hostPath refused, crash loop): agentless', node({ agents: [notRunningFor(121)] }), {}, { kind: 'agentless' }],
    ['the latest of all the starts counts', node({ agents: [notRunningFor(500), notRunningFor(30)], agentGoneMs: NOW - 60 * S }), {}, { kind: 'real', recheckAtMs: NOW - 30 * S + AFTER }],
    ['an agent gone long ago, none since: agentless', node({ agentGoneMs: NOW - 200 * S }), {}, { kind: 'agentless' }],
    ['wait 0: never agentless by absence', node(), { afterMs: 0 }, { kind: 'real' }],
    ['wait 0, the selector still counts', node({ agentlessBySelector: true }), { afterMs: 0 }, { kind: 'agentless' }],
    ['no agent Pod seen anywhere (a watch not synced, a selector matching none): real, however long', node(), { agentsSeen: false }, { kind: 'real' }],
    ['no agent Pod seen anywhere, the selector still counts', node({ agentlessBySelector: true }), { agentsSeen: false }, { kind: 'agentless' }],
  ];
  for (const [name, facts, timing, want] of rows) {
    it(name, () => assert.deepEqual(nodeKindOf(facts, { ...TIMING, ...timing }, NOW), want));
  }

  it('a blip never turns a node agentless: without a running agent for less than the wait, it is real at every moment', () => {
    // An agent rollout: running until t=0, deleted (terminating 0–20 s), gone at 20 s, the next
    // created at 21 s and running at 40 s.
    const timeline = (t: number): Partial<NodeFacts> => {
      if (t < 0) return { agents: [running] };
      if (t < 20) return { agents: [{ running: false, notRunningSinceMs: NOW }] };
      if (t < 21) return { agentGoneMs: NOW + 20 * S };
      if (t < 40) return { agentGoneMs: NOW + 20 * S, agents: [{ running: false, notRunningSinceMs: NOW + 21 * S }] };
      return { agentGoneMs: NOW + 20 * S, agents: [running] };
    };
    for (let t = -5; t <= 60; t++) {
      assert.equal(nodeKindOf(node(timeline(t)), TIMING, NOW + t * S).kind, 'real', `at ${t} s`);
    }
  });
});
