// Rules R20–R21 (docs/design.md): virtual nodes, stopping sidecars by swapping their image.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import { decideFor, exited, expectKind, imageSidecar, main, makePod, reasons, sidecar, WHEN_JOB_EXIT, withImage } from './fixtures.ts';

const done = (...sidecars: Parameters<typeof makePod>[0]['containers']) => makePod({ containers: [main('app', exited(0)), ...sidecars] });

describe('R20–R21: virtual nodes', () => {
  it('swaps the image of each image sidecar not yet terminated, in one update, with one Normal event', () => {
    const pod = done(imageSidecar('a', 'exit0:1'), imageSidecar('b', 'exit0:2'), imageSidecar('c', 'exit0:3', exited(0)));
    const decision = expectKind(decideFor(pod, 'virtual'), 'swapImages');
    assert.deepEqual(decision.swaps, [
      { container: 'a', from: 'a:1', to: 'exit0:1' },
      { container: 'b', from: 'b:1', to: 'exit0:2' },
    ]);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.replacingImage]);
    assert.equal(decision.events[0]?.type, 'Normal');
    assert.match(decision.events[0]?.message ?? '', /"a" with exit0:1.*"b" with exit0:2/);
  });

  it('no second swap once the spec carries the target image (event emitted once per change)', () => {
    const pod = done(imageSidecar('a', 'exit0:1', 'running', { image: 'exit0:1' }));
    const decision = expectKind(decideFor(pod, 'virtual'), 'wait');
    assert.equal(decision.reason, 'imageSwapInProgress');
    assert.deepEqual(decision.events, []);
  });

  it('swaps only what is left: one swapped, one not yet', () => {
    const pod = done(imageSidecar('a', 'exit0:1', 'running', { image: 'exit0:1' }), imageSidecar('b', 'exit0:1'));
    assert.deepEqual(expectKind(decideFor(pod, 'virtual'), 'swapImages').swaps.map((s) => s.container), ['b']);
  });

  it('swaps a sidecar that has not started yet (no container ID needed)', () => {
    const pod = done(imageSidecar('a', 'exit0:1', 'waiting', { id: null }));
    assert.equal(decideFor(pod, 'virtual').kind, 'swapImages');
  });

  it('both markers on a virtual node: image swap, no request', () => {
    const pod = done({ name: 'proxy', state: 'running', env: [WHEN_JOB_EXIT, withImage('exit0:1')] });
    assert.deepEqual(expectKind(decideFor(pod, 'virtual'), 'swapImages').swaps.map((s) => s.container), ['proxy']);
  });

  it('a request-only sidecar on a virtual node: Warning, nothing can stop it', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy')), 'virtual'), 'notHandled');
    assert.equal(decision.reason, 'noStoppableSidecar');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
    assert.match(decision.events[0]?.message ?? '', /"proxy".*virtual/);
  });

  it('a request-only and an image sidecar: swap one, warn about the other', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy'), imageSidecar('img', 'exit0:1')), 'virtual'), 'swapImages');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable, EVENT_REASONS.replacingImage]);
  });

  it('OnFailure: swap only once every main exited 0', () => {
    const failed = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(1)), imageSidecar('a', 'exit0:1')] });
    assert.equal(expectKind(decideFor(failed, 'virtual'), 'notHandled').reason, 'mainsNotDone');
    const succeeded = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), imageSidecar('a', 'exit0:1')] });
    assert.equal(decideFor(succeeded, 'virtual').kind, 'swapImages');
  });

  it('a replacement that failed to start: every sidecar terminated, the Never warning reports it', () => {
    const pod = done(imageSidecar('a', 'exit0:1', exited(128), { image: 'exit0:1' }));
    const decision = expectKind(decideFor(pod, 'virtual'), 'notHandled');
    assert.equal(decision.reason, 'noRunningSidecar');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarFailedPod]);
    assert.match(decision.events[0]?.message ?? '', /code 128/);
  });
});

describe('R50: real nodes without an agent, treated as virtual ones', () => {
  it('both markers: the image swap instead of a request, with the event saying why', () => {
    const pod = done({ name: 'proxy', state: 'running', env: [WHEN_JOB_EXIT, withImage('exit0:1')] });
    const decision = expectKind(decideFor(pod, 'agentless'), 'swapImages');
    assert.deepEqual(decision.swaps.map((s) => s.container), ['proxy']);
    assert.match(decision.events[0]?.message ?? '', /node without an agent: the new container exits at once/);
  });

  it('a request-only sidecar: one Warning saying what to add, nothing else', () => {
    const decision = expectKind(decideFor(done(sidecar('proxy')), 'agentless'), 'notHandled');
    assert.equal(decision.reason, 'noStoppableSidecar');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
    assert.match(decision.events[0]?.message ?? '', /"proxy".*no sidecar-terminator agent.*Set KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE/);
  });

  it('a sidecar waiting without a container ID is swapped, as on a virtual node', () => {
    const pod = done(imageSidecar('a', 'exit0:1', 'waiting', { id: null }));
    assert.equal(decideFor(pod, 'agentless').kind, 'swapImages');
  });
});
