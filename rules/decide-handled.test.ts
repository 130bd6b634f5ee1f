// Rules R6–R9 (docs/design.md): when a Pod is handled, and when its main containers are done.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANNOTATION_SIDECARS, EVENT_REASONS } from '../api/names.ts';
import type { NotHandledReason } from './decision.ts';
import type { PodSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, IGNORE_EXIT_CODE, imageSidecar, main, makePod, reasons, sidecar, WHEN_JOB_EXIT } from '../test/support/pods.ts';

describe('R6–R7: Pods that are not handled', () => {
  const rows: Array<{ name: string; pod: PodSpec; reason: NotHandledReason }> = [
    { name: 'deleting', pod: { deleting: true, containers: [main('app', exited(0)), sidecar('proxy')] }, reason: 'deleting' },
    { name: 'Pending', pod: { phase: 'Pending', containers: [main('app', 'waiting'), sidecar('proxy', 'waiting')] }, reason: 'pending' },
    {
      name: 'restartPolicy Always, with the env',
      pod: { restartPolicy: 'Always', containers: [main('app', exited(0)), sidecar('proxy')] },
      reason: 'restartPolicyAlways',
    },
    {
      name: 'restartPolicy Always, annotation-marked',
      pod: { restartPolicy: 'Always', containers: [main('app', exited(0)), main('proxy')], annotations: { [ANNOTATION_SIDECARS]: 'proxy' } },
      reason: 'restartPolicyAlways',
    },
    { name: 'no sidecar at all', pod: { containers: [main('app', exited(0)), main('other')] }, reason: 'noSidecar' },
    { name: 'no main container at all: every container a sidecar', pod: { containers: [sidecar('proxy')] }, reason: 'noMain' },
    { name: 'no main container, OnFailure', pod: { restartPolicy: 'OnFailure', containers: [sidecar('a'), sidecar('b')] }, reason: 'noMain' },
    {
      name: 'no main container: both ignore-exit-code sidecars, one still working',
      pod: { containers: [sidecar('work', 'running', [IGNORE_EXIT_CODE]), sidecar('done', exited(0), [IGNORE_EXIT_CODE])] },
      reason: 'noMain',
    },
    { name: 'no main container, still Pending', pod: { phase: 'Pending', containers: [sidecar('a', 'waiting'), sidecar('b', 'waiting')] }, reason: 'noMain' },
    {
      name: 'native sidecar (init container with restartPolicy Always) is not a sidecar',
      pod: {
        containers: [main('app', exited(0))],
        initContainers: [{ name: 'native-proxy', image: 'p', restartPolicy: 'Always', env: [WHEN_JOB_EXIT] }],
      },
      reason: 'noSidecar',
    },
    {
      name: 'every sidecar terminated, one exited 143 (all exited 0: R56)',
      pod: { containers: [main('app', exited(0)), sidecar('a', exited(0)), sidecar('b', exited(143))] },
      reason: 'noRunningSidecar',
    },
    {
      name: 'a container status is missing (main)',
      pod: { containers: [main('app', exited(0)), main('other', 'noStatus'), sidecar('proxy')] },
      reason: 'statusesIncomplete',
    },
    {
      name: 'a container status is missing (sidecar)',
      pod: { containers: [main('app', exited(0)), sidecar('proxy', 'noStatus')] },
      reason: 'statusesIncomplete',
    },
    { name: 'Never, main still running', pod: { containers: [main('app', 'running'), sidecar('proxy')] }, reason: 'mainsNotDone' },
    {
      name: 'Never, one of two mains still running',
      pod: { containers: [main('a', exited(0)), main('b', 'running'), sidecar('proxy')] },
      reason: 'mainsNotDone',
    },
    { name: 'Never, main waiting', pod: { containers: [main('app', 'waiting'), sidecar('proxy')] }, reason: 'mainsNotDone' },
    {
      name: 'OnFailure, main failed (kubelet restarts it): not done',
      pod: { restartPolicy: 'OnFailure', containers: [main('app', exited(1)), sidecar('proxy')] },
      reason: 'mainsNotDone',
    },
    {
      name: 'OnFailure, main restarted and running again (lastState never read)',
      pod: { restartPolicy: 'OnFailure', containers: [main('app', 'running', { restarts: 1 }), sidecar('proxy')] },
      reason: 'mainsNotDone',
    },
  ];
  for (const row of rows) {
    for (const node of ['real', 'virtual'] as const) {
      it(`${row.name} (${node} node)`, () => {
        const decision = expectKind(decideFor(makePod(row.pod), node), 'notHandled');
        assert.equal(decision.reason, row.reason);
      });
    }
  }
});

describe('R7–R9: Pods whose mains are done', () => {
  const rows: Array<{ name: string; pod: PodSpec }> = [
    { name: 'Never, main exited 0', pod: { containers: [main('app', exited(0)), sidecar('proxy')] } },
    { name: 'Never, main failed: done (a failed main releases its sidecars)', pod: { containers: [main('app', exited(1)), sidecar('proxy')] } },
    { name: 'Never, main killed (137)', pod: { containers: [main('app', exited(137)), sidecar('proxy')] } },
    {
      name: 'Never, two mains, one failed one succeeded',
      pod: { containers: [main('a', exited(0)), main('b', exited(2)), sidecar('proxy')] },
    },
    { name: 'OnFailure, main exited 0', pod: { restartPolicy: 'OnFailure', containers: [main('app', exited(0)), sidecar('proxy')] } },
    {
      name: 'OnFailure, main exited 0 after earlier restarts',
      pod: { restartPolicy: 'OnFailure', containers: [main('app', exited(0), { restarts: 3 }), sidecar('proxy')] },
    },
    { name: 'phase Unknown is not Pending', pod: { phase: 'Unknown', containers: [main('app', exited(0)), sidecar('proxy')] } },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const decision = decideFor(makePod(row.pod), 'real');
      assert.equal(decision.kind, 'createRequest', decision.message);
    });
  }

  it('a sidecar waiting to start still counts as not terminated', () => {
    const decision = decideFor(makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'waiting', [], { id: null })] }));
    assert.equal(expectKind(decision, 'wait').reason, 'sidecarNotStarted');
  });

  it('a terminal phase with a sidecar still running: no request on a real node either (kubelet stops the rest)', () => {
    for (const phase of ['Succeeded', 'Failed']) {
      const decision = decideFor(makePod({ phase, containers: [main('app', exited(0)), sidecar('proxy')] }));
      assert.equal(expectKind(decision, 'wait').reason, 'podTerminal');
    }
  });

  it('a terminal phase with a sidecar still running on a virtual node: left to the provider', () => {
    const decision = decideFor(makePod({ phase: 'Succeeded', containers: [main('app', exited(0)), imageSidecar('proxy', 'exit0:1')] }), 'virtual');
    assert.equal(expectKind(decision, 'wait').reason, 'podTerminal');
  });

  it('classification warnings ride along with decisions of handled-policy Pods', () => {
    const pod = makePod({ containers: [main('app', 'running'), sidecar('proxy')], annotations: { [ANNOTATION_SIDECARS]: 'nope' } });
    assert.deepEqual(reasons(decideFor(pod)), [EVENT_REASONS.unknownContainer]);
  });

  it('24.7: a Pod whose every container is a sidecar gets one Warning saying a main is needed, nothing else', () => {
    const decision = decideFor(makePod({ containers: [sidecar('work', 'running', [IGNORE_EXIT_CODE]), sidecar('log', 'running', [IGNORE_EXIT_CODE])] }));
    assert.equal(expectKind(decision, 'notHandled').reason, 'noMain');
    assert.deepEqual(reasons(decision), [EVENT_REASONS.noMainContainer]);
    assert.equal(decision.events[0]?.type, 'Warning');
    assert.equal(decision.events[0]?.key, EVENT_REASONS.noMainContainer);
    assert.match(decision.events[0]?.message ?? '', /"work" and "log".*At least one container must be a main container/);
  });

  it('no warnings for Pods that are never handled (restartPolicy Always)', () => {
    const pod = makePod({ restartPolicy: 'Always', containers: [main('app')], annotations: { [ANNOTATION_SIDECARS]: 'nope' } });
    assert.deepEqual(decideFor(pod).events, []);
  });

  it('ignore-exit-code sidecars and image sidecars are sidecars too, not mains', () => {
    const pod = makePod({
      containers: [main('app', exited(0)), sidecar('ign', 'running', [IGNORE_EXIT_CODE]), imageSidecar('img', 'exit0:1', exited(0))],
    });
    // If either counted as a main, its state (running / exit 0) would change the outcome.
    assert.deepEqual(expectKind(decideFor(pod), 'createRequest').containers, ['ign']);
  });
});
