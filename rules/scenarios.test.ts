// The scenarios S1–S10 of docs/design.md (S4 is in decide-exit-codes.test.ts), at the level of the
// rules: the sequence of decisions as the Pod moves on.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANNOTATION_SIDECARS } from '../api/names.ts';
import { decideFor, exited, expectKind, IGNORE_EXIT_CODE, imageSidecar, main, makePod, request, sidecar, WHEN_JOB_EXIT } from '../test/support/pods.ts';

describe('scenarios of docs/design.md (rules level)', () => {
  it('Never, main exits 0, sidecar exits 0 on SIGTERM: request, then the phase kubelet settled (R56), no event', () => {
    assert.equal(decideFor(makePod({ containers: [main('app', 'running'), sidecar('proxy')] })).kind, 'notHandled');
    const created = expectKind(decideFor(makePod({ containers: [main('app', exited(0)), sidecar('proxy')] })), 'createRequest');
    const after = decideFor(makePod({ containers: [main('app', exited(0)), sidecar('proxy', exited(0))] }), 'real', [request({ containers: created.containers })]);
    assert.equal(expectKind(after, 'patchPhase').phase, 'Succeeded');
    assert.deepEqual(after.events, []);
  });

  it('Never, main exits 1: the sidecar is released too', () => {
    assert.equal(decideFor(makePod({ containers: [main('app', exited(1)), sidecar('proxy')] })).kind, 'createRequest');
  });

  it('OnFailure, main exits 1 then succeeds: nothing until the success', () => {
    const failed = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(1)), sidecar('proxy')] });
    const rerunning = makePod({ restartPolicy: 'OnFailure', containers: [main('app', 'running', { restarts: 1 }), sidecar('proxy')] });
    const succeeded = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0), { restarts: 1 }), sidecar('proxy')] });
    assert.equal(decideFor(failed).kind, 'notHandled');
    assert.equal(decideFor(rerunning).kind, 'notHandled');
    assert.equal(decideFor(succeeded).kind, 'createRequest');
  });

  it('Never, sidecar ignoring SIGTERM with ignore-exit-code: asked to stop, then Succeeded set before it is killed', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running', [IGNORE_EXIT_CODE])] });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['proxy']);
    const decision = expectKind(decideFor(pod, 'real', [request({ containers: ['proxy'], completed: false })]), 'patchPhase');
    assert.equal(decision.phase, 'Succeeded');
  });

  it('two mains, three sidecars, one already exited: only the running two', () => {
    const pod = makePod({ containers: [main('a', exited(0)), main('b', exited(0)), sidecar('x'), sidecar('y', exited(0)), sidecar('z')] });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['x', 'z']);
  });

  it('virtual node, image sidecar: image swapped once', () => {
    const before = makePod({ containers: [main('app', exited(0)), imageSidecar('proxy', 'exit0:1')] });
    const swapped = makePod({ containers: [main('app', exited(0)), imageSidecar('proxy', 'exit0:1', 'running', { image: 'exit0:1' })] });
    assert.equal(decideFor(before, 'virtual').kind, 'swapImages');
    assert.equal(decideFor(swapped, 'virtual').kind, 'wait');
  });

  it('native sidecar and a restartPolicy Always Pod with the env: never touched', () => {
    const native = makePod({ containers: [main('app', exited(0))], initContainers: [{ name: 'n', image: 'n', restartPolicy: 'Always', env: [WHEN_JOB_EXIT] }] });
    const always = makePod({ restartPolicy: 'Always', containers: [main('app', exited(0)), sidecar('proxy')] });
    for (const node of ['real', 'virtual'] as const) {
      assert.equal(decideFor(native, node).kind, 'notHandled');
      assert.equal(decideFor(always, node).kind, 'notHandled');
    }
  });

  it('annotation-marked sidecar with no env: stopped', () => {
    const pod = makePod({ containers: [main('app', exited(0)), main('istio-proxy')], annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy' } });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['istio-proxy']);
  });

  it('main exits before the sidecar has started: waited for, stopped once it has', () => {
    const notStarted = makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'waiting', [], { id: null })] });
    const started = makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running')] });
    assert.equal(expectKind(decideFor(notStarted), 'wait').reason, 'sidecarNotStarted');
    assert.equal(decideFor(started).kind, 'createRequest');
  });
});
