// R56 (docs/design.md): the phase kubelet has settled, written from kubelet's own report.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_MIRROR_POD, CONDITION_SIDECAR_TERMINATED } from '../api/names.ts';
import { settledPhasePatch, settledSucceeded } from './phase.ts';
import { projectPod } from './projection.ts';
import type { PodSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, main, makePod, NOW, sidecar } from '../test/support/pods.ts';

const done = (over: Partial<PodSpec> = {}): PodSpec => ({ containers: [main('app', exited(0)), sidecar('proxy', exited(0))], ...over });
const withSpec = (pod: V1Pod, change: (p: V1Pod) => void): V1Pod => {
  change(pod);
  return pod;
};
const initStatus = (name: string, exitCode: number) => ({ name, image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode } } });

describe('R56: the phase kubelet settled', () => {
  const rows: Array<{ name: string; pod: V1Pod; settled: boolean }> = [
    { name: 'Never, every container exited 0', pod: makePod(done()), settled: true },
    { name: 'OnFailure, every container exited 0 (kubelet restarts none)', pod: makePod(done({ restartPolicy: 'OnFailure' })), settled: true },
    { name: 'Never, the sidecar exited 143: Failed is kubelet\'s to write', pod: makePod(done({ containers: [main('app', exited(0)), sidecar('proxy', exited(143))] })), settled: false },
    { name: 'Never, the main exited 1', pod: makePod(done({ containers: [main('app', exited(1)), sidecar('proxy', exited(0))] })), settled: false },
    { name: 'the sidecar still running as kubelet reports it', pod: makePod(done({ containers: [main('app', exited(0)), sidecar('proxy', 'running')] })), settled: false },
    { name: 'a container without a status yet', pod: makePod(done({ containers: [main('app', exited(0)), sidecar('proxy', exited(0)), main('late', 'noStatus')] })), settled: false },
    { name: 'phase already Succeeded', pod: makePod(done({ phase: 'Succeeded' })), settled: false },
    { name: 'phase Pending', pod: makePod(done({ phase: 'Pending' })), settled: false },
    { name: 'being deleted', pod: makePod(done({ deleting: true })), settled: false },
    { name: 'restartPolicy Always', pod: makePod(done({ restartPolicy: 'Always' })), settled: false },
    { name: 'activeDeadlineSeconds set: kubelet may fail it', pod: withSpec(makePod(done()), (p) => (p.spec!.activeDeadlineSeconds = 600)), settled: false },
    { name: 'a static Pod\'s mirror', pod: makePod(done({ annotations: { [ANNOTATION_MIRROR_POD]: 'x' } })), settled: false },
    {
      name: 'a container rule restarts the main after exit 0',
      pod: withSpec(makePod(done()), (p) => {
        p.spec!.containers[0]!.restartPolicy = 'Never';
        p.spec!.containers[0]!.restartPolicyRules = [{ action: 'Restart', exitCodes: { operator: 'In', values: [0] } }];
      }),
      settled: false,
    },
    {
      name: 'Burstable, cpu, memory and ephemeral-storage asked for',
      pod: withSpec(makePod(done()), (p) => {
        p.status!.qosClass = 'Burstable';
        p.spec!.containers[0]!.resources = { requests: { cpu: '1', memory: '1Gi', 'ephemeral-storage': '1Gi' } };
      }),
      settled: true,
    },
    { name: 'Guaranteed: exclusive CPUs and memory, where kubelet\'s managers are static', pod: withSpec(makePod(done()), (p) => (p.status!.qosClass = 'Guaranteed')), settled: false },
    { name: 'a device asked for (a GPU)', pod: withSpec(makePod(done()), (p) => (p.spec!.containers[0]!.resources = { limits: { 'nvidia.com/gpu': '1' } })), settled: false },
    { name: 'hugepages asked for by an init container', pod: withSpec(makePod(done({ initContainers: [{ name: 'init', image: 'i', resources: { requests: { 'hugepages-2Mi': '2Mi' } } }] })), (p) => (p.status!.initContainerStatuses = [initStatus('init', 0)])), settled: false },
    { name: 'a resource claim', pod: withSpec(makePod(done()), (p) => (p.spec!.resourceClaims = [{ name: 'gpu', resourceClaimName: 'c' }])), settled: false },
    {
      name: 'an init container exited 0',
      pod: withSpec(makePod(done({ initContainers: [{ name: 'init', image: 'i' }] })), (p) => (p.status!.initContainerStatuses = [initStatus('init', 0)])),
      settled: true,
    },
    {
      name: 'an init container without a status',
      pod: makePod(done({ initContainers: [{ name: 'init', image: 'i' }] })),
      settled: false,
    },
    {
      name: 'a native sidecar (restartable init container) stopped with 0',
      pod: withSpec(makePod(done({ initContainers: [{ name: 'native', image: 'i', restartPolicy: 'Always' }] })), (p) => (p.status!.initContainerStatuses = [initStatus('native', 0)])),
      settled: true,
    },
    {
      name: 'a native sidecar stopped with 143: not every release that has them leaves its code out',
      pod: withSpec(makePod(done({ initContainers: [{ name: 'native', image: 'i', restartPolicy: 'Always' }] })), (p) => (p.status!.initContainerStatuses = [initStatus('native', 143)])),
      settled: false,
    },
    {
      name: 'a native sidecar still running',
      pod: withSpec(makePod(done({ initContainers: [{ name: 'native', image: 'i', restartPolicy: 'Always' }] })), (p) => {
        p.status!.initContainerStatuses = [{ ...initStatus('native', 0), state: { running: {} } }];
      }),
      settled: false,
    },
  ];
  for (const row of rows) {
    it(`${row.name}: ${row.settled ? 'Succeeded' : 'left to kubelet'}`, () => {
      assert.equal(settledSucceeded(projectPod(row.pod)), row.settled);
    });
  }

  it('the patch: Succeeded, the condition, no event', () => {
    const patch = settledPhasePatch(projectPod(makePod(done())), NOW, []);
    assert.equal(patch?.phase, 'Succeeded');
    assert.equal(patch?.condition.type, CONDITION_SIDECAR_TERMINATED);
    assert.equal(patch?.condition.reason, 'AllContainersSucceeded');
    assert.deepEqual(patch?.events, []);
  });

  it('decide gives it on a real node only; a virtual node\'s provider keeps its own phase', () => {
    assert.equal(expectKind(decideFor(makePod(done()), 'real'), 'patchPhase').cause, 'allSucceeded');
    assert.equal(expectKind(decideFor(makePod(done()), 'virtual'), 'notHandled').reason, 'noRunningSidecar');
  });
});
