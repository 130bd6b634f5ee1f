// Rule R53 (docs/design.md): stop tiers. A sidecar the stop-last annotation names is asked to stop
// only once every other started sidecar has exited.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANNOTATION_SIDECARS, ANNOTATION_STOP_LAST, EVENT_REASONS } from '../api/names.ts';
import type { PodSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, main, makePod, reasons, request, sidecar } from '../test/support/pods.ts';

const LAST = { [ANNOTATION_STOP_LAST]: 'proxy' };
const pod = (logs: PodSpec['containers'][number]['state'], extra: Partial<PodSpec> = {}) =>
  makePod({ containers: [main('app', exited(0)), sidecar('logs', logs), sidecar('proxy')], annotations: LAST, ...extra });

describe('R53: stop tiers', () => {
  it('the mains done: a request for the first tier only; its event says who follows', () => {
    const decision = expectKind(decideFor(pod('running')), 'createRequest');
    assert.deepEqual(decision.containers, ['logs']);
    const stopping = decision.events.find((e) => e.reason === EVENT_REASONS.stopping);
    assert.match(stopping!.message, /"proxy" is stopped once it has exited \(later in the stop order: a later tier/);
  });

  it('the first tier\'s request still running: the last tier waits', () => {
    const decision = expectKind(decideFor(pod('running'), 'real', [request({ attempt: 1, completed: false, containers: ['logs'] })]), 'wait');
    assert.equal(decision.reason, 'requestActive');
  });

  it('the first tier exited: the next request, at once (no retry, no backoff)', () => {
    const decision = expectKind(decideFor(pod(exited(0)), 'real', [request({ attempt: 1, containers: ['logs'] })]), 'createRequest');
    assert.deepEqual(decision.containers, ['proxy']);
    assert.equal(decision.delayMs, 0);
    assert.equal(decision.retryOf, undefined);
    assert.ok(!reasons(decision).includes(EVENT_REASONS.retrying));
  });

  it('the agent saw the first tier exit before kubelet reported it: the next request does not wait for the report', () => {
    const seen = request({
      attempt: 1,
      containers: [{ name: 'logs', statusContext: { containerID: 'containerd://logs-id', restartCount: 0 }, state: { phase: 'Succeeded', exitCode: 0 } }],
    });
    const decision = expectKind(decideFor(pod('running'), 'real', [seen]), 'createRequest');
    assert.deepEqual(decision.containers, ['proxy']);
  });

  it('a first-tier sidecar that never started holds no later tier', () => {
    // Waiting without a container: never created (R18); the proxy is not held behind it.
    const unstarted = makePod({ containers: [main('app', exited(0)), sidecar('logs', 'waiting', [], { id: null }), sidecar('proxy')], annotations: LAST });
    assert.deepEqual(expectKind(decideFor(unstarted), 'createRequest').containers, ['proxy']);
  });

  it('every sidecar in the last tier: stopped together', () => {
    const both = makePod({ containers: [main('app', exited(0)), sidecar('logs'), sidecar('proxy')], annotations: { [ANNOTATION_STOP_LAST]: 'logs,proxy' } });
    assert.deepEqual(expectKind(decideFor(both), 'createRequest').containers, ['logs', 'proxy']);
  });

  it('the annotation marks the sidecars it names too (with the sidecars annotation): tiers work for injected sidecars', () => {
    const injected = makePod({
      containers: [main('app', exited(0)), main('logs'), main('istio-proxy')],
      annotations: { [ANNOTATION_SIDECARS]: 'logs,istio-proxy', [ANNOTATION_STOP_LAST]: 'istio-proxy' },
    });
    assert.deepEqual(expectKind(decideFor(injected), 'createRequest').containers, ['logs']);
  });

  it('naming a main or an unknown container: one Warning each kind, no effect', () => {
    const decision = decideFor(makePod({ containers: [main('app', exited(0)), sidecar('proxy')], annotations: { [ANNOTATION_STOP_LAST]: 'app,nope' } }));
    assert.deepEqual(expectKind(decision, 'createRequest').containers, ['proxy']);
    const messages = decision.events.map((e) => `${e.reason}: ${e.message}`);
    assert.ok(messages.some((m) => m.startsWith(`${EVENT_REASONS.markerIneffective}: Annotation ${ANNOTATION_STOP_LAST} names "app", which is not a sidecar`)), messages.join('\n'));
    assert.ok(messages.some((m) => m.startsWith(`${EVENT_REASONS.unknownContainer}: `) && m.includes(`Annotation ${ANNOTATION_STOP_LAST} names "nope"`)), messages.join('\n'));
  });
});
