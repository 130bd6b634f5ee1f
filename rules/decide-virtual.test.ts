// Rules R20–R22 (docs/design.md): virtual nodes and nodes without an agent, stopping sidecars by swapping their image.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import type { StateSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, IGNORE_EXIT_CODE, imageSidecar, main, makePod, reasons, sidecar, WHEN_JOB_EXIT, withImage } from '../test/support/pods.ts';
import { isSwapRefusal } from './decide.ts';
import { DEFAULT_OPTIONS, RELEASED_QUICK_EXIT_IMAGE } from './requests.ts';

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

describe('R22: real nodes without an agent, treated as virtual ones', () => {
  const allowing = (...agentlessSwapImages: string[]) => ({ options: { ...DEFAULT_OPTIONS, agentlessSwapImages } });

  it('both markers: the image swap instead of a request, with the event saying why', () => {
    const pod = done({ name: 'proxy', state: 'running', env: [WHEN_JOB_EXIT, withImage('exit0:1')] });
    const decision = expectKind(decideFor(pod, 'agentless', [], allowing('exit0')), 'swapImages');
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
    assert.equal(decideFor(pod, 'agentless', [], allowing('exit0:1')).kind, 'swapImages');
  });

  describe('only images the operator allows are swapped in (--agentless-swap-images)', () => {
    const rows: Array<{ name: string; image: string; allowed: string[]; swapped: boolean }> = [
      { name: 'the released quick-exit image, by default', image: `${RELEASED_QUICK_EXIT_IMAGE}:1`, allowed: DEFAULT_OPTIONS.agentlessSwapImages.slice(), swapped: true },
      { name: 'any other image, by default', image: 'evil.example.com/miner:1', allowed: DEFAULT_OPTIONS.agentlessSwapImages.slice(), swapped: false },
      { name: 'a repository allows its digests', image: 'registry.example.com/qe@sha256:' + 'a'.repeat(64), allowed: ['registry.example.com/qe'], swapped: true },
      { name: 'a short name is Docker Hub\'s', image: 'busybox:1.36', allowed: ['docker.io/library/busybox'], swapped: true },
      { name: 'a tag allows that tag alone', image: 'registry.example.com/qe:2', allowed: ['registry.example.com/qe:1'], swapped: false },
      { name: 'a repository is not its prefix', image: 'registry.example.com/qe-evil:1', allowed: ['registry.example.com/qe'], swapped: false },
      { name: 'none allowed', image: `${RELEASED_QUICK_EXIT_IMAGE}:1`, allowed: [], swapped: false },
    ];
    for (const row of rows) {
      it(`${row.name}: ${row.swapped ? 'swapped' : 'not swapped, one Warning naming the image and the flag'}`, () => {
        const decision = decideFor(done(imageSidecar('proxy', row.image)), 'agentless', [], allowing(...row.allowed));
        if (row.swapped) {
          assert.equal(decision.kind, 'swapImages', decision.message);
          return;
        }
        assert.equal(expectKind(decision, 'notHandled').reason, 'noStoppableSidecar');
        assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
        assert.match(decision.events[0]?.message ?? '', /"proxy" names .*not an image the operator allows.*--agentless-swap-images/);
      });
    }

    it('virtual nodes swap any image, as Kruise does', () => {
      assert.equal(decideFor(done(imageSidecar('proxy', 'evil.example.com/miner:1')), 'virtual').kind, 'swapImages');
    });

    it('an allowed sidecar is swapped beside a refused one, and the Warning names the refused one only', () => {
      const pod = done(imageSidecar('ok', 'exit0:1'), imageSidecar('bad', 'evil.example.com/miner:1'));
      const decision = expectKind(decideFor(pod, 'agentless', [], allowing('exit0')), 'swapImages');
      assert.deepEqual(decision.swaps.map((s) => s.container), ['ok']);
      const refused = decision.events.filter((e) => e.type === 'Warning');
      assert.equal(refused.length, 1);
      assert.match(refused[0]!.message, /"bad" names evil/);
      assert.doesNotMatch(refused[0]!.message, /"ok"/);
      assert.deepEqual(decision.events.map(isSwapRefusal), decision.events.map((e) => e === refused[0]));
    });

    it('the controller counts the refusal Warning, not the one for a sidecar with only the request marker', () => {
      const pod = done(imageSidecar('bad', 'evil.example.com/miner:1'), sidecar('plain', 'running', [WHEN_JOB_EXIT]));
      const decision = decideFor(pod, 'agentless', [], allowing('exit0'));
      assert.deepEqual(decision.events.map((e) => `${e.reason} ${isSwapRefusal(e)}`).sort(), [`${EVENT_REASONS.notStoppable} false`, `${EVENT_REASONS.notStoppable} true`]);
    });
  });
});

describe('R21: an ignore-exit-code sidecar on a virtual node ends the Pod by its mains (issue 24, item 9)', () => {
  /** An ignore-exit-code sidecar stopped by a swap to quick-exit:1; `swapped`: the spec already carries it. */
  const ignoring = (state: StateSpec, swapped = true) =>
    sidecar('proxy', state, [IGNORE_EXIT_CODE, withImage('quick-exit:1')], swapped ? { image: 'quick-exit:1' } : {});
  const counting = (state: StateSpec) => sidecar('log', state, [withImage('quick-exit:1')], { image: 'quick-exit:1' });
  const cases: { name: string; main: number; containers: ReturnType<typeof ignoring>[]; phase?: string; kind: string; cause?: string; phaseSet?: string; warnings?: string[] }[] = [
    { name: 'not yet swapped: swapped first', main: 0, containers: [ignoring('running', false)], kind: 'swapImages' },
    { name: 'swapped, still running: Succeeded at once, before the quick-exit container can fail', main: 0, containers: [ignoring('running')], kind: 'patchPhase', cause: 'ignoreExitCode', phaseSet: 'Succeeded' },
    { name: 'the swapped container failed to start (exit 128), phase left Running by the provider: Succeeded, no SidecarFailedPod', main: 0, containers: [ignoring(exited(128))], kind: 'patchPhase', cause: 'ignoreExitCode', phaseSet: 'Succeeded', warnings: [] },
    { name: 'exit 128, a main failed: Failed', main: 1, containers: [ignoring(exited(128))], kind: 'patchPhase', cause: 'ignoreExitCode', phaseSet: 'Failed' },
    { name: 'exit 128 beside a counting sidecar that exited 0: Succeeded', main: 0, containers: [ignoring(exited(128)), counting(exited(0))], kind: 'patchPhase', phaseSet: 'Succeeded' },
    { name: 'exit 128 beside a counting sidecar that exited 2: Failed, and the Warning names only the counting one', main: 0, containers: [ignoring(exited(128)), counting(exited(2))], kind: 'patchPhase', phaseSet: 'Failed', warnings: [EVENT_REASONS.sidecarFailedPod] },
    { name: 'swapped, still running, a counting sidecar still running: wait for that one', main: 0, containers: [ignoring('running'), counting('running')], kind: 'wait' },
    { name: 'the provider already set a terminal phase: left alone', main: 0, containers: [ignoring(exited(128))], phase: 'Failed', kind: 'notHandled' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const pod = makePod({ restartPolicy: 'Never', ...(c.phase ? { phase: c.phase } : {}), containers: [main('app', exited(c.main)), ...c.containers] });
      const decision = decideFor(pod, 'virtual');
      assert.equal(decision.kind, c.kind, decision.message);
      if (c.phaseSet) {
        const patch = expectKind(decision, 'patchPhase');
        assert.equal(patch.phase, c.phaseSet);
        if (c.cause) assert.equal(patch.cause, c.cause);
      }
      if (c.warnings) assert.deepEqual(decision.events.filter((e) => e.type === 'Warning').map((e) => e.reason), c.warnings);
      for (const e of decision.events) assert.doesNotMatch(e.message, /"proxy".*the Pod fails/, 'no Warning that the ignore-exit-code sidecar fails the Pod');
    });
  }

  it('on a real node the Warning stays: there kubelet fails the Pod', () => {
    const pod = makePod({ restartPolicy: 'Never', containers: [main('app', exited(0)), sidecar('proxy', exited(128), [IGNORE_EXIT_CODE])] });
    assert.deepEqual(reasons(decideFor(pod, 'real')), [EVENT_REASONS.sidecarFailedPod]);
  });
});
