import assert from 'node:assert/strict';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { describe, it } from 'node:test';
import { IGNORE_EXIT_CODE, NOW, UID, exited, main, makePod, request, sidecar, type PodSpec } from '../../test/support/pods.ts';
import { projectPod } from '../../rules/projection.ts';
import { DEFAULT_OPTIONS, requestName } from '../../rules/requests.ts';
import type { ExistingRequest } from '../../rules/requests.ts';
import { reportedContainers, requestOnMainExit, runtimePodView } from './main-exit.ts';
import type { PodContainer } from '../runtime/types.ts';
import { runtimeContainerID } from '../../api/container-id.ts';

const run = (name: string, attempt = 0): PodContainer => ({ id: runtimeContainerID(`${name}-${attempt}`), name, attempt, state: 'running' });
const exit = (name: string, exitCode: number | undefined, attempt = 0): PodContainer => ({
  id: runtimeContainerID(`${name}-${attempt}`), name, attempt, state: 'exited', ...(exitCode === undefined ? {} : { exitCode }),
});
const created = (name: string, attempt = 0): PodContainer => ({ id: runtimeContainerID(`${name}-${attempt}`), name, attempt, state: 'created' });

/** The status kubelet last reported: both running, phase Running. */
const reported: PodSpec = { containers: [main('main'), sidecar('proxy')], phase: 'Running' };

interface Case {
  name: string;
  pod?: PodSpec;
  runtime: PodContainer[];
  requests?: ExistingRequest[];
  /** Containers of the request the agent creates; undefined: none. */
  stops?: string[];
  /** Changes to the Pod beyond PodSpec (probes, container restart rules, conditions). */
  edit?: (pod: V1Pod) => void;
  /** Mains whose exit waits for kubelet's report. */
  awaiting?: string[];
}

const LIVENESS = { livenessProbe: { exec: { command: ['true'] } } };
/** The main's spec gets `extra`. */
const mainSpec = (extra: Partial<V1Container>) => (pod: V1Pod) => { Object.assign(pod.spec!.containers[0]!, extra); };
const onFailure: PodSpec = { ...reported, restartPolicy: 'OnFailure' };
/** Kubelet has reported the main's exit (same container ID as the runtime's attempt 0). */
const reportedExit = (code: number): PodSpec => ({ ...onFailure, containers: [main('main', exited(code), { id: 'containerd://main-0' }), sidecar('proxy', 'running', [], { id: 'containerd://proxy-0' })] });

const cases: Case[] = [
  { name: 'Never: main exited 0 in the runtime before kubelet reported it', runtime: [exit('main', 0), run('proxy')], stops: ['proxy'] },
  { name: 'Never: a failed main releases the sidecars too', runtime: [exit('main', 2), run('proxy')], stops: ['proxy'] },
  { name: 'main still running', runtime: [run('main'), run('proxy')] },
  { name: 'OnFailure: a failed main is restarted, not done', pod: { ...reported, restartPolicy: 'OnFailure' }, runtime: [exit('main', 1), run('proxy')] },
  { name: 'OnFailure: the restarted main succeeded', pod: { ...reported, restartPolicy: 'OnFailure' }, runtime: [exit('main', 1), exit('main', 0, 1), run('proxy')], stops: ['proxy'] },
  { name: 'OnFailure: the main is being restarted', pod: { ...reported, restartPolicy: 'OnFailure' }, runtime: [exit('main', 1), created('main', 1), run('proxy')] },
  { name: 'an exit whose code the runtime no longer has: the reported status stands', runtime: [exit('main', undefined), run('proxy')] },
  { name: 'Pending Pod whose containers have all started', pod: { ...reported, phase: 'Pending', containers: [main('main', 'noStatus'), sidecar('proxy', 'noStatus')] }, runtime: [exit('main', 0), run('proxy')], stops: ['proxy'] },
  { name: 'Pending Pod whose sidecar has not started', pod: { ...reported, phase: 'Pending', containers: [main('main', 'noStatus'), sidecar('proxy', 'noStatus')] }, runtime: [exit('main', 0), created('proxy')] },
  { name: 'sidecar already exited', runtime: [exit('main', 0), exit('proxy', 0)] },
  { name: 'a request is already active for the Pod', runtime: [exit('main', 0), run('proxy')], requests: [request({ name: requestName(UID, 1), containers: [{ name: 'proxy' }] })] },
  { name: 'a retry is the controller\'s business', runtime: [exit('main', 0), run('proxy')], requests: [request({ name: requestName(UID, 1), completed: true, containers: [{ name: 'proxy' }] })] },
  { name: 'only ignore-exit-code sidecars left: the controller asks them and sets the phase right after its request (R23), no stop may outrun it', pod: { ...reported, containers: [main('main'), sidecar('proxy', 'running', [IGNORE_EXIT_CODE])] }, runtime: [exit('main', 0), run('proxy')] },
  { name: 'Pod being deleted', pod: { ...reported, deleting: true }, runtime: [exit('main', 0), run('proxy')] },
  { name: 'restartPolicy Always', pod: { ...reported, restartPolicy: 'Always' }, runtime: [exit('main', 0), run('proxy')] },
  { name: 'two mains, one still running', pod: { ...reported, containers: [main('a'), main('b'), sidecar('proxy')] }, runtime: [exit('a', 0), run('b'), run('proxy')] },
  { name: 'two mains done, two sidecars, one already exited', pod: { ...reported, containers: [main('a'), main('b'), sidecar('p1'), sidecar('p2')] }, runtime: [exit('a', 0), exit('b', 0), exit('p1', 0), run('p2')], stops: ['p2'] },
  // R7, R43: what a runtime exit alone cannot settle waits for kubelet's report.
  {
    name: 'OnFailure, liveness probe, exit 0: may be a probe kill kubelet restarts; kubelet\'s report is waited for',
    pod: onFailure, edit: mainSpec(LIVENESS), runtime: [exit('main', 0), run('proxy')], awaiting: ['main'],
  },
  {
    name: 'OnFailure, liveness probe, kubelet reported that very exit 0 as final: stop',
    pod: reportedExit(0), edit: mainSpec(LIVENESS), runtime: [exit('main', 0), run('proxy')], stops: ['proxy'],
  },
  {
    name: 'OnFailure, liveness probe, kubelet reported the main running (stale): wait',
    pod: { ...onFailure, containers: [main('main', 'running', { id: 'containerd://main-0' }), sidecar('proxy')] }, edit: mainSpec(LIVENESS), runtime: [exit('main', 0), run('proxy')], awaiting: ['main'],
  },
  {
    name: 'OnFailure, liveness probe, restarted by kubelet: the new attempt runs',
    pod: onFailure, edit: mainSpec(LIVENESS), runtime: [exit('main', 0), run('main', 1), run('proxy')],
  },
  { name: 'Never, liveness probe: a probe kill is final, full speed', edit: mainSpec(LIVENESS), runtime: [exit('main', 0), run('proxy')], stops: ['proxy'] },
  {
    name: 'Never, a Restart rule matching the exit: restarted, not done (no wait: the code says it)',
    edit: mainSpec({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] }),
    runtime: [exit('main', 42), run('proxy')],
  },
  {
    name: 'Never, a Restart rule not matching exit 0: done at full speed',
    edit: mainSpec({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] }),
    runtime: [exit('main', 0), run('proxy')], stops: ['proxy'],
  },
  {
    name: 'OnFailure, container policy Never: a failed main is final',
    pod: onFailure, edit: mainSpec({ restartPolicy: 'Never' }), runtime: [exit('main', 1), run('proxy')], stops: ['proxy'],
  },
  {
    name: 'a Pod that may restart all its containers: kubelet\'s report is waited for',
    edit: mainSpec({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [42] } }] }),
    runtime: [exit('main', 0), run('proxy')], awaiting: ['main'],
  },
];

describe('requestOnMainExit (R43)', () => {
  it('a container a policy marks or audits, while the policy watch is not current: no request, the controller decides (R55)', () => {
    const raw = makePod(reported);
    const pod = projectPod(raw);
    const policy = { policy: 'ClusterSidecarPolicy/mesh', mode: 'Enforce' as const, ignoreExitCode: false, stopTier: 0 };
    const marked = { ...pod, containers: pod.containers.map((c) => (c.name === 'proxy' ? { ...c, markers: { ...c.markers, whenJobExit: false }, policy } : c)) };
    const input = { pod: marked, containers: cases[0]!.runtime, runtimePrefix: 'containerd', requests: [], nowMs: NOW, options: DEFAULT_OPTIONS };
    assert.deepEqual(requestOnMainExit({ ...input, policiesCurrent: false }), { awaitingKubelet: [], policiesNotCurrent: true });
    assert.ok(requestOnMainExit({ ...input, policiesCurrent: true }).request, 'current: the fast path acts');
    const envMarked = { ...input, pod, policiesCurrent: false };
    assert.ok(requestOnMainExit(envMarked).request, 'no policy concerns the Pod: a stale policy view changes nothing for it');
  });

  for (const c of cases) {
    it(c.name, () => {
      const raw = makePod(c.pod ?? reported);
      c.edit?.(raw);
      const decision = requestOnMainExit({
        pod: projectPod(raw),
        containers: c.runtime,
        runtimePrefix: 'containerd',
        requests: c.requests ?? [],
        nowMs: NOW,
        options: DEFAULT_OPTIONS,
        policiesCurrent: true,
      });
      assert.deepEqual(decision.request?.containers, c.stops);
      assert.deepEqual(decision.awaitingKubelet, c.awaiting ?? []);
    });
  }

  it('pins the request to the runtime\'s container, as the controller would from the status', () => {
    const decision = requestOnMainExit({
      pod: projectPod(makePod({ ...reported, containers: [main('main'), sidecar('proxy', 'running', [], { restarts: 2 })] })),
      containers: [exit('main', 0), run('proxy', 2)],
      runtimePrefix: 'containerd',
      requests: [],
      nowMs: NOW,
      options: DEFAULT_OPTIONS,
      policiesCurrent: true,
    });
    assert.equal(decision.request?.request.metadata.name, requestName(UID, 1));
    assert.deepEqual(decision.request?.request.spec.containers, [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-2', restartCount: 2 } }]);
  });
});

describe('runtimePodView', () => {
  it('keeps the reported status of containers the runtime does not have', () => {
    const pod = projectPod(makePod({ containers: [main('main', exited(0)), sidecar('proxy')], phase: 'Running' }));
    const view = runtimePodView(pod, [run('proxy', 1)], 'containerd').pod;
    assert.deepEqual(view.statuses, [
      pod.statuses[0],
      { name: 'proxy', containerID: 'containerd://proxy-1', restartCount: 1, state: { kind: 'running' } },
    ]);
  });
});

describe('reportedContainers', () => {
  const pod = (spec: PodSpec = reported) => projectPod(makePod(spec));
  const cases: { name: string; pod?: PodSpec; exits: [string, number][]; want: PodContainer[] | undefined }[] = [
    {
      name: 'the announced exit overlays the reported status',
      exits: [['main-id', 0]],
      want: [{ id: runtimeContainerID('main-id'), name: 'main', attempt: 0, state: 'exited', exitCode: 0 }, { id: runtimeContainerID('proxy-id'), name: 'proxy', attempt: 0, state: 'running' }],
    },
    {
      name: 'an exit kubelet already reported keeps its code',
      pod: { ...reported, containers: [main('main', exited(3)), sidecar('proxy')] },
      exits: [],
      want: [{ id: runtimeContainerID('main-id'), name: 'main', attempt: 0, state: 'exited', exitCode: 3 }, { id: runtimeContainerID('proxy-id'), name: 'proxy', attempt: 0, state: 'running' }],
    },
    { name: 'an exit of a container kubelet has not reported: ask the runtime', exits: [['main-2', 0]], want: undefined },
    { name: 'a container without an ID yet: ask the runtime', pod: { ...reported, containers: [main('main'), sidecar('proxy', 'running', [], { id: '' })] }, exits: [['main-id', 0]], want: undefined },
    { name: 'another runtime\'s IDs: ask the runtime', pod: { ...reported, containers: [main('main', 'running', { id: 'docker://m' }), sidecar('proxy')] }, exits: [], want: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(reportedContainers(pod(c.pod), 'containerd', new Map(c.exits.map(([id, code]) => [runtimeContainerID(id), code]))), c.want));
  }

  it('with the rules: the request the runtime listing would have given', () => {
    const containers = reportedContainers(pod(), 'containerd', new Map([[runtimeContainerID('main-id'), 0]]))!;
    const decision = requestOnMainExit({ pod: pod(), containers, runtimePrefix: 'containerd', requests: [], nowMs: NOW, options: DEFAULT_OPTIONS, policiesCurrent: true });
    assert.deepEqual(decision.request?.request.spec.containers, [{ name: 'proxy', statusContext: { containerID: 'containerd://proxy-id', restartCount: 0 } }]);
  });
});
