import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EnvVar, V1Pod } from '@kubernetes/client-node';
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_SIDECARS,
  ANNOTATION_STOP_LAST,
  CONDITION_SIDECAR_TERMINATED,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  ENV_TERMINATE_WITH_IMAGE,
} from '../api/names.ts';
import { exited, main, makePod, NOW, POD_START, sidecar, UID } from '../test/support/pods.ts';
import { projectPod, readMarkers } from './projection.ts';

const fromSecret = { secretKeyRef: { name: 's', key: 'k' } };

describe('readMarkers (R2): env markers, literal values only', () => {
  const cases: Array<{ name: string; env: V1EnvVar[]; want: ReturnType<typeof readMarkers> }> = [
    { name: 'no env', env: [], want: { whenJobExit: false, ignoreExitCode: false } },
    { name: 'an image of 1024 characters is kept', env: [{ name: ENV_TERMINATE_WITH_IMAGE, value: 'i'.repeat(1024) }], want: { whenJobExit: false, withImage: 'i'.repeat(1024), ignoreExitCode: false } },
    { name: 'a longer value is no image reference: not kept', env: [{ name: ENV_TERMINATE_WITH_IMAGE, value: 'i'.repeat(100_000) }], want: { whenJobExit: false, ignoreExitCode: false } },
    { name: 'true', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'true' }], want: { whenJobExit: true, ignoreExitCode: false } },
    { name: 'TRUE', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'TRUE' }], want: { whenJobExit: true, ignoreExitCode: false } },
    { name: 'tRuE', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'tRuE' }], want: { whenJobExit: true, ignoreExitCode: false } },
    { name: 'false: the author keeps it a main', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'false' }], want: { whenJobExit: false, ignoreExitCode: false, keepsMain: true } },
    { name: 'FALSE too', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'FALSE' }], want: { whenJobExit: false, ignoreExitCode: false, keepsMain: true } },
    { name: 'yes is not true', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'yes' }], want: { whenJobExit: false, ignoreExitCode: false } },
    { name: 'empty', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: '' }], want: { whenJobExit: false, ignoreExitCode: false } },
    { name: 'no value', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT }], want: { whenJobExit: false, ignoreExitCode: false } },
    {
      name: 'valueFrom ignored',
      env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, valueFrom: fromSecret }],
      want: { whenJobExit: false, ignoreExitCode: false },
    },
    {
      name: 'valueFrom ignored even with a value beside it',
      env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'true', valueFrom: fromSecret }],
      want: { whenJobExit: false, ignoreExitCode: false },
    },
    {
      name: 'last entry of a name wins (as in kubelet)',
      env: [
        { name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'true' },
        { name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'false' },
      ],
      want: { whenJobExit: false, ignoreExitCode: false, keepsMain: true },
    },
    {
      name: 'image marker',
      env: [{ name: ENV_TERMINATE_WITH_IMAGE, value: 'quick-exit:1' }],
      want: { whenJobExit: false, withImage: 'quick-exit:1', ignoreExitCode: false },
    },
    { name: 'empty image', env: [{ name: ENV_TERMINATE_WITH_IMAGE, value: '' }], want: { whenJobExit: false, ignoreExitCode: false } },
    { name: 'blank image', env: [{ name: ENV_TERMINATE_WITH_IMAGE, value: '  ' }], want: { whenJobExit: false, ignoreExitCode: false } },
    {
      name: 'image from valueFrom ignored',
      env: [{ name: ENV_TERMINATE_WITH_IMAGE, valueFrom: fromSecret }],
      want: { whenJobExit: false, ignoreExitCode: false },
    },
    {
      name: 'ignore-exit-code read as is (whether it counts is classify\'s business)',
      env: [{ name: ENV_IGNORE_EXIT_CODE, value: 'True' }],
      want: { whenJobExit: false, ignoreExitCode: true },
    },
    {
      name: 'env names are case-sensitive',
      env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT.toLowerCase(), value: 'true' }],
      want: { whenJobExit: false, ignoreExitCode: false },
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(readMarkers(c.env), c.want));
  }
});

describe('projectPod', () => {
  it('keeps identity, node, phase, policy, version and our annotations only', () => {
    const pod = makePod({
      containers: [main('app'), sidecar('proxy')],
      annotations: { [ANNOTATION_SIDECARS]: 'proxy', [ANNOTATION_IGNORE_EXIT_CODE]: 'x', [ANNOTATION_STOP_LAST]: 'proxy', 'other/annotation': 'big' },
      terminationGracePeriodSeconds: 45,
    });
    const p = projectPod(pod);
    assert.equal(p.namespace, 'ns');
    assert.equal(p.name, 'job-pod');
    assert.equal(p.uid, UID);
    assert.equal(p.nodeName, 'node-1');
    assert.equal(p.phase, 'Running');
    assert.equal(p.restartPolicy, 'Never');
    assert.equal(p.resourceVersion, '42');
    assert.equal(p.deleting, false);
    assert.equal(p.terminationGracePeriodSeconds, 45);
    assert.deepEqual(p.annotations, {
      sidecars: { containers: ['proxy'], initContainers: [], unknownSample: [], unknownCount: 0, truncated: false },
      ignoreExitCode: { containers: [], initContainers: [], unknownSample: ['x'], unknownCount: 1, truncated: false },
      stopLast: { containers: ['proxy'], initContainers: [], unknownSample: [], unknownCount: 0, truncated: false },
      mains: { containers: [], initContainers: [], unknownSample: [], unknownCount: 0, truncated: false },
    });
    assert.equal(p.startTimeMs, POD_START);
    assert.deepEqual(p.containers.map((c) => c.name), ['app', 'proxy']);
    assert.deepEqual(p.containers[1]?.markers, { whenJobExit: true, ignoreExitCode: false });
  });

  it('marks a Pod with a deletionTimestamp as deleting', () => {
    assert.equal(projectPod(makePod({ containers: [main('app')], deleting: true })).deleting, true);
  });

  it('defaults restartPolicy to Always, as the API server does', () => {
    const pod = makePod({ containers: [main('app')] });
    delete pod.spec?.restartPolicy;
    assert.equal(projectPod(pod).restartPolicy, 'Always');
  });

  it('projects current states only, with exit code and reason, and the image kubelet reports (R7)', () => {
    const pod = makePod({
      containers: [
        main('a', 'running'),
        main('b', 'waiting', { id: null }),
        main('c', exited(143), { restarts: 2 }),
      ],
    });
    const [a, b, c] = projectPod(pod).statuses;
    assert.deepEqual(a, { name: 'a', containerID: 'containerd://a-id', restartCount: 0, state: { kind: 'running' }, image: 'a:1' });
    assert.deepEqual(b, { name: 'b', restartCount: 0, state: { kind: 'waiting', reason: 'ContainerCreating' }, image: 'b:1' });
    assert.deepEqual(c, {
      name: 'c',
      image: 'c:1',
      containerID: 'containerd://c-id',
      restartCount: 2,
      state: { kind: 'terminated', exitCode: 143, reason: 'Exited', finishedAtMs: NOW - 10_000 },
    });
  });

  it('never reads lastState: a running container that failed before is just running', () => {
    const pod = makePod({ containers: [main('a', 'running')] });
    const status = pod.status?.containerStatuses?.[0];
    assert.ok(status);
    status.lastState = { terminated: { exitCode: 1 } };
    assert.deepEqual(projectPod(pod).statuses[0]?.state, { kind: 'running' });
  });

  it('treats a status without any state as waiting', () => {
    const pod = makePod({ containers: [main('a')] });
    const status = pod.status?.containerStatuses?.[0];
    assert.ok(status);
    delete status.state;
    assert.deepEqual(projectPod(pod).statuses[0]?.state, { kind: 'waiting', reason: undefined });
  });

  it('never classifies init containers: only an annotation naming one keeps its name', () => {
    const pod = makePod({
      containers: [main('app')],
      initContainers: [{ name: 'native-proxy', image: 'proxy', restartPolicy: 'Always', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'true' }] }],
      annotations: { [ANNOTATION_SIDECARS]: 'native-proxy' },
    });
    const p = projectPod(pod);
    assert.deepEqual(p.annotations.sidecars.initContainers, ['native-proxy']);
    assert.deepEqual(p.containers.map((c) => c.name), ['app']);
  });

  it('keeps our SidecarTerminated condition', () => {
    const pod = makePod({ containers: [main('app')] });
    pod.status!.conditions = [
      { type: 'Ready', status: 'False' },
      { type: CONDITION_SIDECAR_TERMINATED, status: 'True', reason: 'IgnoredSidecarExitCode', message: 'm' },
    ];
    assert.deepEqual(projectPod(pod).sidecarTerminated, { status: 'True', reason: 'IgnoredSidecarExitCode', message: 'm' });
  });

  it('R7: keeps what kubelet reads to restart a container, and nothing when it sets no policy of its own', () => {
    const pod = makePod({ containers: [main('app'), main('plain')] });
    const manyRules = Array.from({ length: 30 }, (_, i) => ({ action: 'Restart', exitCodes: { operator: 'In', values: Array.from({ length: 300 }, (_, j) => i + j) } }));
    Object.assign(pod.spec!.containers[0]!, { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart' }, ...manyRules], livenessProbe: { exec: { command: ['true'] } } });
    Object.assign(pod.spec!.containers[1]!, { restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [1] } }], startupProbe: { exec: { command: ['true'] } } });
    const [app, plain] = projectPod(pod).containers;
    assert.equal(app?.restart?.policy, 'Never');
    assert.deepEqual(app?.restart?.rules[0], { action: 'Restart', values: [] }, 'a rule without exit codes has no operator');
    assert.equal(app?.restart?.rules.length, 20, 'at most the 20 rules the API server allows');
    assert.equal(app?.restart?.rules[1]?.values.length, 255, 'at most the 255 codes the API server allows');
    assert.equal(plain?.restart, undefined, 'rules without a container restartPolicy are not kept');
    assert.deepEqual([app?.probeKills, plain?.probeKills], [true, true]);
  });

  it('R7: the AllContainersRestarting condition, and whether any container may restart them all', () => {
    const pod = makePod({ containers: [main('app')] });
    let p = projectPod(pod);
    assert.deepEqual([p.allContainersRestarting, p.mayRestartAll, p.initContainerRestartsAll], [false, false, false]);
    pod.status!.conditions = [{ type: 'AllContainersRestarting', status: 'True' }];
    pod.spec!.initContainers = [{ name: 'init', image: 'i', restartPolicy: 'Never', restartPolicyRules: [{ action: 'RestartAllContainers', exitCodes: { operator: 'NotIn', values: [0] } }] }];
    pod.status!.initContainerStatuses = [{ name: 'init', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } }];
    p = projectPod(pod);
    assert.deepEqual([p.allContainersRestarting, p.mayRestartAll, p.initContainerRestartsAll], [true, true, false]);
    pod.status!.initContainerStatuses[0]!.state = { terminated: { exitCode: 3 } };
    assert.equal(projectPod(pod).initContainerRestartsAll, true);
  });

  it('survives an almost empty object', () => {
    const p = projectPod({} as V1Pod);
    assert.equal(p.restartPolicy, 'Always');
    assert.deepEqual(p.containers, []);
    assert.deepEqual(p.statuses, []);
  });
});
