import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeApiError } from '../../common/kube/client.ts';
import { createLogger } from '../../common/log.ts';
import type { DryRunOutcome, FastPathState } from './confinement.ts';
import { AGENT_POLICY, FAST_PATH_RECHECK_MS, FAST_PATH_STATES, ConfinementCheck, dryRunOutcome, fastPathState, nextCheckMs, notConfinedReason, otherNodeName } from './confinement.ts';

const apiError = (code: number, message: string) =>
  new KubeApiError(code, 'POST', '/x', JSON.stringify({ kind: 'Status', code, message }));
const denied = apiError(422, `containerrecreaterequests.sidecar-terminator.dev "x" is forbidden: ValidatingAdmissionPolicy '${AGENT_POLICY}' with binding '${AGENT_POLICY}' denied request: the agent of node "n1" may create and update requests only for Pods on its own node`);
const rbac = apiError(403, 'containerrecreaterequests.sidecar-terminator.dev is forbidden: User "system:serviceaccount:sidecar-terminator:sidecar-terminator-agent" cannot create resource "containerrecreaterequests"');

describe('dryRunOutcome', () => {
  const cases: [string, unknown, DryRunOutcome][] = [
    ['no error: admitted', undefined, 'admitted'],
    ['the agent policy named in the message (422 or 403)', denied, 'denied-by-policy'],
    ['the agent policy, as 403', apiError(403, `ValidatingAdmissionPolicy '${AGENT_POLICY}' denied request`), 'denied-by-policy'],
    ['RBAC: 403 without the policy', rbac, 'forbidden'],
    ['another admission error', apiError(422, 'spec.containers: Required value'), 'failed'],
    ['the API server unreachable', new Error('connect ECONNREFUSED 10.0.0.1:443'), 'failed'],
  ];
  for (const [name, err, want] of cases) it(name, () => assert.equal(dryRunOutcome(err), want));
});

describe('fastPathState', () => {
  const cases: [DryRunOutcome, DryRunOutcome, FastPathState][] = [
    ['admitted', 'denied-by-policy', 'enabled'],
    ['forbidden', 'forbidden', 'no-permission'],
    ['admitted', 'admitted', 'not-confined'],
    ['denied-by-policy', 'denied-by-policy', 'no-node-in-token'],
    // Something else confines it, or not: only our policy's denial is proof.
    ['admitted', 'forbidden', 'unknown'],
    ['admitted', 'failed', 'unknown'],
    ['failed', 'denied-by-policy', 'unknown'],
    ['failed', 'admitted', 'unknown'],
  ];
  for (const [own, other, want] of cases) it(`own node ${own}, other node ${other} → ${want}`, () => assert.equal(fastPathState(own, other), want));
});

describe('nextCheckMs', () => {
  it('enabled: every 5 minutes', () => assert.equal(nextCheckMs('enabled', 0), FAST_PATH_RECHECK_MS));
  it('off: 10 s, doubling, at most 5 minutes', () => {
    const off: FastPathState[] = ['not-confined', 'no-permission', 'no-node-in-token', 'unknown'];
    for (const state of off) assert.deepEqual([1, 2, 3, 4, 5, 6, 20].map((n) => nextCheckMs(state, n)), [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
  });
});

describe('notConfinedReason: the agent is not ready while nothing confines its create permission', () => {
  it('not-confined: a reason for /readyz that says what to fix', () => {
    assert.match(notConfinedReason('not-confined') ?? '', /not confined to its node: .*agent-requests\.sidecar-terminator\.dev does not match its ServiceAccount, or is not installed/);
  });
  it('every other state: ready as far as the fast path goes', () => {
    for (const state of FAST_PATH_STATES.filter((s) => s !== 'not-confined')) assert.equal(notConfinedReason(state), undefined, state);
  });
});

describe('otherNodeName', () => {
  it('is never this node', () => {
    for (const node of ['n1', 'fast-path-check-other-node', 'fast-path-check-another-node']) assert.notEqual(otherNodeName(node), node);
  });
});

describe('ConfinementCheck (R50)', () => {
  it('sends two dry-run creates, one per node label, and enables only on the expected answers', async () => {
    const sent: { node: string; dryRun: unknown }[] = [];
    const states: FastPathState[] = [];
    const check = new ConfinementCheck({
      client: {
        create: (_path: string, body: unknown, query?: Record<string, unknown>) => {
          const node = (body as { metadata: { labels: Record<string, string> } }).metadata.labels['crr.sidecar-terminator.dev/node-name']!;
          sent.push({ node, dryRun: query?.dryRun });
          return node === 'n1' ? Promise.resolve({}) : Promise.reject(denied);
        },
      } as never,
      nodeName: 'n1',
      namespace: 'sidecar-terminator',
      log: createLogger('test', 'error'),
      onState: (s) => states.push(s),
    });
    assert.equal(check.enabled(), false);
    assert.equal(await check.start(), 'enabled');
    check.stop();
    assert.equal(check.enabled(), true);
    assert.deepEqual(states, ['enabled']);
    assert.deepEqual(sent.map((s) => s.dryRun), ['All', 'All']);
    assert.deepEqual(sent.map((s) => s.node).sort(), ['fast-path-check-other-node', 'n1']);
  });
});

describe('ConfinementCheck: not confined', () => {
  it('both creates admitted: off, and not ready with the reason until a check finds it confined', async () => {
    let confined = false;
    const check = new ConfinementCheck({
      client: { create: (_p: string, body: unknown) => (confined && (body as { metadata: { labels: Record<string, string> } }).metadata.labels['crr.sidecar-terminator.dev/node-name'] !== 'n1' ? Promise.reject(denied) : Promise.resolve({})) } as never,
      nodeName: 'n1',
      namespace: 'sidecar-terminator',
      log: createLogger('test', 'error'),
      onState: () => {},
    });
    assert.equal(check.notReadyReason(), undefined, 'not known yet: not held against it');
    assert.equal(await check.start(), 'not-confined');
    check.stop();
    assert.equal(check.enabled(), false);
    assert.match(check.notReadyReason() ?? '', /^not confined to its node/);
    confined = true;
    assert.equal(await check.start(), 'enabled');
    assert.equal(check.notReadyReason(), undefined);
  });
});
