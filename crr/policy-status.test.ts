import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parsePolicy } from '../rules/policies.ts';
import { ActedOnLog, invalidPolicies, mostPoliciesInANamespace, statusUpdate, writePolicyStatuses } from './policy-status.ts';
import { FakeKubeApi } from '../test/support/fake-api.ts';
import { clusterPolicyPath } from '../api/sidecar-policy.ts';
import { createLogger } from '../common/log.ts';
import type { WatchedPolicy } from '../rules/policies.ts';

const NOW = '2026-01-01T00:00:00Z';
const watched = (spec: object, status: WatchedPolicy['status'] = {}): WatchedPolicy => ({
  scope: 'cluster', name: 'mesh', generation: 2, parsed: parsePolicy({ metadata: { name: 'mesh' }, spec }, 'cluster'), status,
});

describe('R54: policy status', () => {
  it('a valid policy: Valid True, its matched Pods, the generation seen; written again only when something changed', () => {
    const status = statusUpdate(watched({ containers: [{ name: 'istio-proxy' }] }), 3, NOW)!;
    assert.deepEqual(status, {
      observedGeneration: 2, matchedPods: 3,
      conditions: [
        { type: 'Valid', status: 'True', reason: 'Valid', message: 'The policy is in effect.', observedGeneration: 2, lastTransitionTime: NOW },
        { type: 'Ready', status: 'True', reason: 'InEffect', message: 'The policy is in effect.', observedGeneration: 2, lastTransitionTime: NOW },
      ],
    });
    assert.equal(statusUpdate(watched({ containers: [{ name: 'istio-proxy' }] }, status), 3, '2026-01-02T00:00:00Z'), undefined);
    const more = statusUpdate(watched({ containers: [{ name: 'istio-proxy' }] }, status), 4, '2026-01-02T00:00:00Z')!;
    assert.equal(more.matchedPods, 4);
    assert.equal(more.conditions![0]!.lastTransitionTime, NOW, 'the condition did not change: its transition time stays');
    const next = statusUpdate({ ...watched({ containers: [{ name: 'istio-proxy' }] }, status), generation: 3 }, 3, '2026-01-02T00:00:00Z')!;
    assert.deepEqual(next.conditions!.map((c) => `${c.type} ${c.observedGeneration} ${c.lastTransitionTime}`), [`Valid 3 ${NOW}`, `Ready 3 ${NOW}`],
      'a new generation read: each condition says so, and keeps its transition time');
    const fromValidOnly = statusUpdate(watched({ containers: [{ name: 'istio-proxy' }] }, { ...status, conditions: status.conditions!.slice(0, 1) }), 3, '2026-01-02T00:00:00Z')!;
    assert.deepEqual(fromValidOnly.conditions!.map((c) => `${c.type} ${c.lastTransitionTime}`), [`Valid ${NOW}`, 'Ready 2026-01-02T00:00:00Z'],
      'a status from before Ready existed gets it');
  });

  it('an invalid policy: Valid False with the reason, no Pods matched', () => {
    const status = statusUpdate(watched({ containers: [{}] }), 5, NOW)!;
    assert.equal(status.matchedPods, 0);
    assert.deepEqual(status.conditions!.map((c) => `${c.type} ${c.status} ${c.reason}`), ['Valid False Invalid', 'Ready False Invalid']);
    assert.match(status.conditions![1]!.message, /not in effect: spec.containers\[0\]: name or image is needed/);
  });

  it('the Pods a policy acted on: added to the counts as read, the last five kept newest first; nothing pending, nothing written', () => {
    const log = new ActedOnLog();
    for (let i = 1; i <= 7; i++) log.record('ClusterSidecarPolicy/mesh', 'audit', { namespace: 'ns', name: `p${i}` }, `2026-01-01T00:00:0${i}Z`);
    log.record('ClusterSidecarPolicy/mesh', 'enforce', { namespace: 'ns', name: 'e1' }, NOW);
    const before = { audit: { pods: 10, recent: [{ namespace: 'old', name: 'o', time: NOW }] } };
    const status = statusUpdate(watched({ containers: [{ name: 'istio-proxy' }] }, before), 0, NOW, log.pendingFor('ClusterSidecarPolicy/mesh'))!;
    assert.equal(status.audit!.pods, 17);
    assert.deepEqual(status.audit!.recent.map((p) => p.name), ['p7', 'p6', 'p5', 'p4', 'p3']);
    assert.deepEqual(status.enforce, { pods: 1, recent: [{ namespace: 'ns', name: 'e1', time: NOW }] });
    assert.equal(statusUpdate(watched({ containers: [{ name: 'istio-proxy' }] }, { ...status }), 0, NOW, undefined), undefined);
  });

  it('written: only what came since stays pending; a write that fails (the version moved on) keeps it all for the next round', async () => {
    const api = new FakeKubeApi();
    api.set(clusterPolicyPath('mesh'), { metadata: { name: 'mesh' }, spec: { containers: [{ name: 'istio-proxy' }] } });
    const log = new ActedOnLog();
    // As the watch last delivered it, behind the object now (someone wrote it since).
    const policy = { ...watched({ containers: [{ name: 'istio-proxy' }] }), resourceVersion: 'behind' };
    const deps = { client: api, policies: () => [policy], matchedPods: () => new Map<string, number>(), actedOn: log, log: createLogger('test', 'error') };
    log.record('ClusterSidecarPolicy/mesh', 'audit', { namespace: 'ns', name: 'a' }, NOW);
    await writePolicyStatuses(deps, NOW);
    assert.deepEqual(api.lines({ method: 'patch' }), [`PATCH ${clusterPolicyPath('mesh', 'status')} 409`]);
    assert.equal(log.pendingFor('ClusterSidecarPolicy/mesh')?.audit?.pods, 1, 'kept for the next round');
    policy.resourceVersion = api.object<{ metadata: { resourceVersion: string } }>(clusterPolicyPath('mesh'))!.metadata.resourceVersion;
    await writePolicyStatuses(deps, NOW);
    assert.equal(api.object<{ status: { audit: { pods: number } } }>(clusterPolicyPath('mesh'))?.status.audit.pods, 1, 'written against the version it adds to');
    assert.equal(log.pendingFor('ClusterSidecarPolicy/mesh'), undefined);
    log.record('ClusterSidecarPolicy/gone', 'enforce', { namespace: 'ns', name: 'b' }, NOW);
    await writePolicyStatuses(deps, NOW);
    assert.equal(log.pendingFor('ClusterSidecarPolicy/gone'), undefined, 'a policy gone: nothing of it kept');
  });

  it('a Pod counted while a write is in flight stays pending for the next one', () => {
    const log = new ActedOnLog();
    log.record('p', 'audit', { namespace: 'ns', name: 'a' }, NOW);
    const inFlight = log.pendingFor('p')!;
    log.record('p', 'audit', { namespace: 'ns', name: 'b' }, NOW);
    log.written('p', inFlight);
    assert.deepEqual(log.pendingFor('p'), { audit: { pods: 1, recent: [{ namespace: 'ns', name: 'b', time: NOW }] } });
  });

  it('mostPoliciesInANamespace: the largest count of namespaced policies, invalid ones too; cluster policies are no namespace\'s', () => {
    const inNamespace = (namespace: string, valid = true): WatchedPolicy => ({
      scope: 'namespaced', namespace, name: 'p', parsed: parsePolicy({ metadata: { name: 'p', namespace }, spec: { containers: [valid ? { name: 'x' } : {}] } }, 'namespaced'), status: {},
    });
    assert.equal(mostPoliciesInANamespace([]), 0);
    assert.equal(mostPoliciesInANamespace([watched({ containers: [{ name: 'x' }] }), inNamespace('a'), inNamespace('b'), inNamespace('b', false)]), 2);
  });

  it('invalidPolicies: the policies not in effect, by kind', () => {
    const namespaced = (valid: boolean): WatchedPolicy => ({
      scope: 'namespaced', namespace: 'a', name: 'p', parsed: parsePolicy({ metadata: { name: 'p', namespace: 'a' }, spec: { containers: [valid ? { name: 'x' } : {}] } }, 'namespaced'), status: {},
    });
    assert.deepEqual(invalidPolicies([watched({ containers: [{}] }), watched({ containers: [{ name: 'x' }] }), namespaced(false), namespaced(false), namespaced(true)]),
      { ClusterSidecarPolicy: 1, SidecarPolicy: 2 });
  });
});
