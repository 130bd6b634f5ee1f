// Rules R23–R26 (docs/design.md): exit codes and the Pod's phase.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANNOTATION_IGNORE_EXIT_CODE, ANNOTATION_SIDECARS, ANNOTATION_STOP_LAST, CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import type { ContainerSpec } from '../test/support/pods.ts';
import {
  decideFor,
  exited,
  expectKind,
  IGNORE_EXIT_CODE,
  imageSidecar,
  main,
  makePod,
  NOW,
  reasons,
  request,
  sidecar,
  UID,
  withImage,
} from '../test/support/pods.ts';
import { requestName } from './requests.ts';
import { LABEL_AFTER_PHASE } from '../api/container-recreate-request.ts';

const ignoring = (name: string, state: ContainerSpec['state'] = 'running') => sidecar(name, state, [IGNORE_EXIT_CODE]);

describe('R23: ignore-exit-code sidecars', () => {
  /** Our request asking these sidecars (the containers the status reports) to stop, still under way. */
  const asking = (attempt: number, ...names: string[]) => request({ attempt, containers: names, completed: false });

  it('Never, main exited 0, only an ignore-exit-code sidecar left: asked to stop, the phase said to follow', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy')] });
    const decision = expectKind(decideFor(pod), 'createRequest');
    assert.deepEqual(decision.containers, ['proxy']);
    assert.match(decision.events.at(-1)?.message ?? '', /phase is set as soon as this request exists/);
    // The agent begins the stop once the Pod shows the phase; the fast path leaves it to the controller.
    assert.equal(decision.request.metadata.labels?.[LABEL_AFTER_PHASE], 'true');
    assert.equal(decision.phaseFollows, true);
    const earlierStep = expectKind(decideFor(makePod({ containers: [main('app', exited(0)), ignoring('proxy'), sidecar('log')] })), 'createRequest');
    assert.equal(earlierStep.request.metadata.labels?.[LABEL_AFTER_PHASE], undefined);
  });

  it('... and as soon as our request for it exists, before its exit: phase Succeeded + SidecarTerminated=True', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy')] });
    const decision = expectKind(decideFor(pod, 'real', [asking(1, 'proxy')]), 'patchPhase');
    assert.equal(decision.cause, 'ignoreExitCode');
    assert.equal(decision.phase, 'Succeeded');
    assert.equal(decision.condition.type, CONDITION_SIDECAR_TERMINATED);
    assert.equal(decision.condition.status, 'True');
    assert.equal(decision.condition.reason, 'IgnoredSidecarExitCode');
    assert.equal(decision.condition.lastTransitionTime, new Date(NOW).toISOString());
    assert.match(decision.condition.message, /sidecar-terminator.*ignore-exit-code sidecar "proxy"/);
    assert.deepEqual(decision.statusPatch, { status: { phase: 'Succeeded', conditions: [decision.condition] } });
    assert.deepEqual(reasons(decision), [EVENT_REASONS.phaseSet]);
    assert.equal(decision.events[0]?.type, 'Normal');
  });

  it('a request for an earlier container of that name does not count: the one running now is asked', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy', 'running')] });
    const earlier = request({ containers: [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-old', restartCount: 0 } }] });
    assert.equal(decideFor(pod, 'real', [earlier]).kind, 'createRequest');
  });

  it('Never, main failed: phase Failed', () => {
    const pod = makePod({ containers: [main('app', exited(1)), ignoring('proxy')] });
    const decision = expectKind(decideFor(pod, 'real', [asking(1, 'proxy')]), 'patchPhase');
    assert.equal(decision.phase, 'Failed');
    assert.match(decision.condition.message, /not all with exit code 0/);
  });

  it('two mains, one failed: Failed', () => {
    const pod = makePod({ containers: [main('a', exited(0)), main('b', exited(3)), ignoring('proxy')] });
    assert.equal(expectKind(decideFor(pod, 'real', [asking(1, 'proxy')]), 'patchPhase').phase, 'Failed');
  });

  it('OnFailure, mains exited 0: Succeeded', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), ignoring('proxy')] });
    assert.equal(expectKind(decideFor(pod, 'real', [asking(1, 'proxy')]), 'patchPhase').phase, 'Succeeded');
  });

  it('in its tier, after the sidecars whose exit code counts: those are stopped first', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy'), sidecar('log')] });
    const decision = expectKind(decideFor(pod), 'createRequest');
    assert.deepEqual(decision.containers, ['log']);
    assert.match(decision.events.at(-1)?.message ?? '', /"proxy" is stopped once it has exited/);
  });

  it('... then, once they have, it is asked, and then the phase is set', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy'), sidecar('log', exited(0))] });
    const logAsked = request({ containers: ['log'] });
    assert.deepEqual(expectKind(decideFor(pod, 'real', [logAsked]), 'createRequest').containers, ['proxy']);
    assert.equal(expectKind(decideFor(pod, 'real', [logAsked, asking(2, 'proxy')]), 'patchPhase').phase, 'Succeeded');
  });

  it('Never: another (counting) sidecar that exited non-zero still fails the Pod, and is reported', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy'), sidecar('log', exited(143))] });
    const decision = expectKind(decideFor(pod, 'real', [request({ containers: ['log'] }), asking(2, 'proxy')]), 'patchPhase');
    assert.equal(decision.phase, 'Failed');
    assert.match(decision.condition.message, /sidecar "log" exited non-zero/);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarFailedPod, EVENT_REASONS.phaseSet]);
  });

  it('a log shipper marked ignore-exit-code in tier 0 is stopped before the proxy it sends through; the proxy\'s request comes before the phase', () => {
    const spec = (shipper: ContainerSpec) => makePod({
      containers: [main('app', exited(0)), shipper, sidecar('proxy')],
      annotations: { [ANNOTATION_STOP_LAST]: 'proxy' },
    });
    assert.deepEqual(expectKind(decideFor(spec(ignoring('shipper'))), 'createRequest').containers, ['shipper']);
    // It flushed and exited 143 on SIGTERM: under Never the last exit would now make kubelet's phase Failed.
    const shipperAsked = request({ containers: ['shipper'] });
    const flushed = spec(ignoring('shipper', exited(143)));
    const proxyStop = expectKind(decideFor(flushed, 'real', [shipperAsked]), 'createRequest');
    assert.deepEqual(proxyStop.containers, ['proxy']);
    assert.ok(!reasons(proxyStop).includes(EVENT_REASONS.sidecarFailedPod), 'its exit was our stop, in its turn');
    assert.match(proxyStop.events.at(-1)?.message ?? '', /phase is set as soon as this request exists/);
    const phase = expectKind(decideFor(flushed, 'real', [shipperAsked, asking(2, 'proxy')]), 'patchPhase');
    assert.equal(phase.phase, 'Succeeded');
    assert.match(phase.condition.message, /ignore-exit-code sidecar "shipper" does not count/);
  });

  it('the shipper\'s exit known to the agent\'s record only (kubelet has not reported it yet): the proxy\'s request still comes before the phase', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('shipper'), sidecar('proxy')], annotations: { [ANNOTATION_STOP_LAST]: 'proxy' } });
    const recorded = request({ containers: [{ name: 'shipper', statusContext: { containerID: 'containerd://shipper-id', restartCount: 0 }, state: { phase: 'Succeeded', exitCode: 143 } }] });
    const proxyStop = expectKind(decideFor(pod, 'real', [recorded]), 'createRequest');
    assert.deepEqual(proxyStop.containers, ['proxy']);
    assert.equal(proxyStop.phaseFollows, true);
  });

  it('OnFailure: kubelet would restart an ignore-exit-code sidecar after a failed exit, so the phase follows its request even before later tiers', () => {
    const pod = makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), ignoring('shipper'), sidecar('proxy')], annotations: { [ANNOTATION_STOP_LAST]: 'proxy' } });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['shipper']);
    assert.equal(expectKind(decideFor(pod, 'real', [asking(1, 'shipper')]), 'patchPhase').phase, 'Succeeded');
  });

  it('every container has exited and no phase was set: too late to set one (kubelet writes its own Failed over it), the failure is reported', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy', exited(143))] });
    const decision = expectKind(decideFor(pod, 'real', [request({ containers: ['proxy'] })]), 'notHandled');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarFailedPod]);
  });

  it('no other sidecar at all: both asked at once, then the phase', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('a'), ignoring('b')] });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['a', 'b']);
    const decision = expectKind(decideFor(pod, 'real', [asking(1, 'a', 'b')]), 'patchPhase');
    assert.match(decision.condition.message, /sidecars "a" and "b"/);
  });

  it('marked through annotations only', () => {
    const pod = makePod({
      containers: [main('app', exited(0)), main('istio-proxy')],
      annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy', [ANNOTATION_IGNORE_EXIT_CODE]: ' istio-proxy ' },
    });
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['istio-proxy']);
    assert.equal(expectKind(decideFor(pod, 'real', [asking(1, 'istio-proxy')]), 'patchPhase').phase, 'Succeeded');
  });

  it('not while a main is still running', () => {
    const pod = makePod({ containers: [main('app', 'running'), ignoring('proxy')] });
    assert.equal(expectKind(decideFor(pod), 'notHandled').reason, 'mainsNotDone');
  });

  it('once the phase is terminal (patched already): no request, kubelet stops the rest', () => {
    const pod = makePod({ phase: 'Succeeded', containers: [main('app', exited(0)), ignoring('proxy')] });
    assert.equal(expectKind(decideFor(pod), 'wait').reason, 'podTerminal');
  });

  it('waits while another sidecar that nothing can stop is running (and says so), without asking it', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy'), imageSidecar('img', 'exit0:1')] });
    const decision = expectKind(decideFor(pod), 'notHandled');
    assert.equal(decision.reason, 'noStoppableSidecar');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.notStoppable]);
  });

  it('scenario: Never, a sidecar that ignores SIGTERM, with ignore-exit-code: the phase is set while its stop is under way, before anything kills it', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('stubborn')] });
    const decision = expectKind(decideFor(pod, 'real', [asking(1, 'stubborn')]), 'patchPhase');
    assert.equal(decision.phase, 'Succeeded');
  });

  it('virtual node: an image sidecar marked ignore-exit-code is swapped like any image sidecar', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running', [IGNORE_EXIT_CODE, withImage('exit0:1')])] });
    assert.equal(decideFor(pod, 'virtual').kind, 'swapImages');
  });
});

describe('R24: OnFailure restart loop', () => {
  const asked = (restartCount: number, exitCode?: number, attempt = 1) =>
    request({
      attempt,
      containers: [
        {
          name: 'proxy',
          statusContext: { containerID: 'containerd://proxy-old', restartCount },
          state: { phase: 'Succeeded', ...(exitCode !== undefined ? { exitCode } : {}) },
        },
      ],
    });
  const onFailure = (proxy: ContainerSpec) => makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), proxy] });

  it('a stopped sidecar restarted after exit 143: phase Succeeded + Warning', () => {
    const pod = onFailure(sidecar('proxy', 'running', [], { restarts: 1 }));
    const decision = expectKind(decideFor(pod, 'real', [asked(0, 143)]), 'patchPhase');
    assert.equal(decision.cause, 'restartLoop');
    assert.equal(decision.phase, 'Succeeded');
    assert.equal(decision.condition.reason, 'SidecarRestartLoop');
    const [event] = decision.events;
    assert.equal(event?.type, 'Warning');
    assert.equal(event?.reason, EVENT_REASONS.restartLoop);
    assert.match(event?.message ?? '', new RegExp(`"proxy" \\(stopped by ${requestName(UID, 1)} with exit code 143, restart count 0 -> 1\\)`));
    assert.match(event?.message ?? '', /exit 0 on SIGTERM.*ignore-exit-code/);
  });

  it('also in back-off between restarts (waiting), and while the request is still active', () => {
    const pod = onFailure(sidecar('proxy', 'waiting', [], { restarts: 2 }));
    const active = { ...asked(0), completed: false, phase: 'Recreating' as const };
    assert.equal(expectKind(decideFor(pod, 'real', [active]), 'patchPhase').cause, 'restartLoop');
  });

  it('exit code unknown in the request: a restart under OnFailure means a non-zero exit', () => {
    const pod = onFailure(sidecar('proxy', 'running', [], { restarts: 1 }));
    assert.equal(decideFor(pod, 'real', [asked(0)]).kind, 'patchPhase');
  });

  it('restart count not higher than recorded: no loop, a plain retry', () => {
    const pod = onFailure(sidecar('proxy', 'running', [], { restarts: 3 }));
    const decision = expectKind(decideFor(pod, 'real', [asked(3, 143)]), 'createRequest');
    assert.equal(decision.attempt, 2);
  });

  it('recorded exit 0: kubelet did not restart it for that, no loop', () => {
    const pod = onFailure(sidecar('proxy', 'running', [], { restarts: 1 }));
    assert.equal(decideFor(pod, 'real', [asked(0, 0)]).kind, 'createRequest');
  });

  it('compares with the latest request that asked for the sidecar', () => {
    const requests = [asked(0, 143, 1), asked(1, 143, 2)];
    assert.equal(decideFor(onFailure(sidecar('proxy', 'running', [], { restarts: 1 })), 'real', requests).kind, 'createRequest');
    assert.equal(decideFor(onFailure(sidecar('proxy', 'running', [], { restarts: 2 })), 'real', requests).kind, 'patchPhase');
  });

  it('a sidecar never asked to stop that restarted on its own: no loop, it is requested', () => {
    const pod = onFailure(sidecar('proxy', 'running', [], { restarts: 4 }));
    assert.equal(decideFor(pod).kind, 'createRequest');
  });

  it('not under Never (kubelet never restarts there)', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running', [], { restarts: 1 })] });
    assert.equal(decideFor(pod, 'real', [asked(0, 143)]).kind, 'createRequest');
  });

  it('scenario: OnFailure, main exits 0, sidecar exits 143 on SIGTERM: not left hanging', () => {
    const running = onFailure(sidecar('proxy', 'running'));
    const first = expectKind(decideFor(running), 'createRequest');
    const stopContext = first.request.spec.containers[0]?.statusContext;
    assert.deepEqual(stopContext, { containerID: 'containerd://proxy-id', restartCount: 0 });
    const restarted = onFailure(sidecar('proxy', 'running', [], { restarts: 1, id: 'containerd://proxy-new' }));
    const existing = request({ containers: [{ name: 'proxy', statusContext: stopContext, state: { phase: 'Succeeded', exitCode: 143 } }] });
    assert.equal(expectKind(decideFor(restarted, 'real', [existing]), 'patchPhase').phase, 'Succeeded');
  });
});

describe('R25: Never, Pod failed by a sidecar alone', () => {
  it('leaves the phase alone and warns, naming the sidecar, its exit code and both fixes', () => {
    const pod = makePod({ phase: 'Failed', containers: [main('app', exited(0)), sidecar('proxy', exited(143))] });
    const decision = expectKind(decideFor(pod), 'notHandled');
    assert.equal(decision.reason, 'noRunningSidecar');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarFailedPod]);
    const [event] = decision.events;
    assert.equal(event?.type, 'Warning');
    assert.match(event?.message ?? '', /"proxy" exited with code 143/);
    assert.match(event?.message ?? '', /exit 0 on SIGTERM/);
    assert.match(event?.message ?? '', /KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true.*sidecar-terminator\.dev\/ignore-exit-code/);
  });

  it('already while another sidecar is still being stopped', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('a', exited(137)), sidecar('b')] });
    const decision = expectKind(decideFor(pod), 'createRequest');
    assert.deepEqual(decision.containers, ['b']);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarFailedPod, EVENT_REASONS.stopping]);
  });

  it('uses the same key on every reconcile, so it is emitted once', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('proxy', exited(143))] });
    assert.equal(decideFor(pod).events[0]?.key, decideFor(pod).events[0]?.key);
  });

  it('a Pod with no main container, failed by its sidecar: not ours, only the no-main Warning', () => {
    const pod = makePod({ containers: [sidecar('proxy', exited(1))] });
    assert.deepEqual(reasons(decideFor(pod)), [EVENT_REASONS.noMainContainer]);
  });

  const quiet: Array<[string, Parameters<typeof makePod>[0]]> = [
    ['a main failed too (not the sidecar alone)', { containers: [main('app', exited(1)), sidecar('proxy', exited(143))] }],
    ['the sidecar exited 0', { containers: [main('app', exited(0)), sidecar('proxy', exited(0))] }],
    ['phase Succeeded (set by the ignore-exit-code rule)', { phase: 'Succeeded', containers: [main('app', exited(0)), sidecar('proxy', exited(143))] }],
    ['OnFailure (the restart loop rule applies instead)', { restartPolicy: 'OnFailure', containers: [main('app', exited(0)), sidecar('proxy', exited(143))] }],
  ];
  for (const [name, spec] of quiet) {
    it(`no warning: ${name}`, () => assert.deepEqual(decideFor(makePod(spec)).events, []));
  }

  it('an ignore-exit-code sidecar that exited on its own too early gets an adapted message', () => {
    const pod = makePod({ containers: [main('app', exited(0)), ignoring('proxy', exited(2))] });
    assert.match(decideFor(pod).events[0]?.message ?? '', /marked ignore-exit-code, but exited before/);
  });
});

describe('R57: sidecars with a restart policy of their own (container restartPolicy and rules)', () => {
  /** The Pod with the named container's own restartPolicy and rules set, as the API server keeps them. */
  const withOwnPolicy = (pod: ReturnType<typeof makePod>, name: string, restartPolicy: string, restartPolicyRules?: unknown[]) => {
    for (const c of pod.spec!.containers) if (c.name === name) Object.assign(c, { restartPolicy, ...(restartPolicyRules ? { restartPolicyRules } : {}) });
    return pod;
  };
  const asked = (restartCount: number, exitCode: number) =>
    request({ attempt: 1, containers: [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-old', restartCount }, state: { phase: 'Succeeded', exitCode } }] });

  it('restartPolicy Always: never stopped (kubelet would start it again), one Warning with the native-sidecar fix', () => {
    const pod = withOwnPolicy(makePod({ containers: [main('app', exited(0)), sidecar('proxy')] }), 'proxy', 'Always');
    const decision = expectKind(decideFor(pod), 'notHandled');
    assert.equal(decision.reason, 'noStoppableSidecar');
    const [event] = decision.events;
    assert.equal(event?.reason, EVENT_REASONS.sidecarRestartsItself);
    assert.match(event?.message ?? '', /"proxy" has a restartPolicy of its own .* init container with restartPolicy: Always/);
  });

  it('a restart rule matching exit code 0 is the same; the other sidecars are stopped as usual', () => {
    const pod = withOwnPolicy(makePod({ containers: [main('app', exited(0)), sidecar('proxy'), sidecar('shipper')] }), 'proxy', 'Never',
      [{ action: 'Restart', exitCodes: { operator: 'In', values: [0, 1] } }]);
    const decision = expectKind(decideFor(pod), 'createRequest');
    assert.deepEqual(decision.containers, ['shipper']);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.sidecarRestartsItself, EVENT_REASONS.stopping]);
  });

  it('on a virtual node its image is not swapped either', () => {
    const pod = withOwnPolicy(makePod({ containers: [main('app', exited(0)), imageSidecar('proxy', 'busybox')] }), 'proxy', 'Always');
    const decision = decideFor(pod, 'virtual');
    assert.equal(decision.kind, 'notHandled');
    assert.ok(reasons(decision).includes(EVENT_REASONS.sidecarRestartsItself));
  });

  it('restartPolicy OnFailure in a Never Pod: stopped; restarted after exit 143, the loop ends with the phase (as the Pod-level OnFailure)', () => {
    const pod = withOwnPolicy(makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running', [], { restarts: 1 })] }), 'proxy', 'OnFailure');
    const decision = expectKind(decideFor(pod, 'real', [asked(0, 143)]), 'patchPhase');
    assert.equal(decision.cause, 'restartLoop');
    assert.equal(decision.phase, 'Succeeded');
    assert.match(decision.events[0]?.message ?? '', /"proxy": its own restartPolicy OnFailure\).* remove the container's own restartPolicy/);
    const first = withOwnPolicy(makePod({ containers: [main('app', exited(0)), sidecar('proxy')] }), 'proxy', 'OnFailure');
    assert.deepEqual(expectKind(decideFor(first), 'createRequest').containers, ['proxy'], 'a first stop may end it (exit 0)');
  });

  it('its own Never in an OnFailure Pod: a restart after our stop had another cause, no loop', () => {
    const pod = withOwnPolicy(makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), sidecar('proxy', 'running', [], { restarts: 1 })] }), 'proxy', 'Never');
    assert.notEqual(decideFor(pod, 'real', [asked(0, 143)]).kind, 'patchPhase');
  });

  it('SidecarFailedPod only for an exit kubelet does not restart: its own OnFailure in a Never Pod is quiet, its own Never in an OnFailure Pod warns', () => {
    const restarted = withOwnPolicy(makePod({ containers: [main('app', exited(0)), sidecar('proxy', exited(143))] }), 'proxy', 'OnFailure');
    assert.ok(!reasons(decideFor(restarted)).includes(EVENT_REASONS.sidecarFailedPod));
    const forGood = withOwnPolicy(makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(0)), sidecar('proxy', exited(143))] }), 'proxy', 'Never');
    assert.ok(reasons(decideFor(forGood)).includes(EVENT_REASONS.sidecarFailedPod));
  });
});
