import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_NODE_NAME, LABEL_POD_UID, MAX_ACTIVE_DEADLINE_SECONDS, MAX_TTL_SECONDS_AFTER_FINISHED } from '../api/container-recreate-request.ts';
import { main, makePod, NODE, request, sidecar, UID } from '../test/support/pods.ts';
import { projectPod } from './projection.ts';
import type { ExistingRequest } from './requests.ts';
import {
  buildTerminationRequest,
  deadlineFor,
  DEFAULT_OPTIONS,
  isOwnRequest,
  MAX_REQUEST_ATTEMPTS,
  MAX_REQUEST_NAME_NUMBER,
  projectRequest,
  requestAttempt,
  requestName,
  requestPodUids,
  keptRequest,
  retryDelaySeconds,
} from './requests.ts';

describe('R11: request names', () => {
  it('first attempt is sidecar-termination-<uid>, later ones add -<n>', () => {
    assert.equal(requestName(UID, 1), `sidecar-termination-${UID}`);
    assert.equal(requestName(UID, 2), `sidecar-termination-${UID}-2`);
    assert.equal(requestName(UID, 17), `sidecar-termination-${UID}-17`);
  });

  it('parses attempts back, and rejects names that are not ours for this Pod', () => {
    const rows: Array<[string, number | undefined]> = [
      [`sidecar-termination-${UID}`, 1],
      [`sidecar-termination-${UID}-2`, 2],
      [`sidecar-termination-${UID}-10`, 10],
      [`sidecar-termination-${UID}-1`, undefined],
      [`sidecar-termination-${UID}-0`, undefined],
      [`sidecar-termination-${UID}-02`, undefined],
      [`sidecar-termination-${UID}-x`, undefined],
      [`sidecar-termination-${UID}-`, undefined],
      ['sidecar-termination-other-uid', undefined],
      ['restart-my-proxy', undefined],
      [`sidecar-termination-${UID}-${MAX_REQUEST_ATTEMPTS}`, MAX_REQUEST_ATTEMPTS],
      [`sidecar-termination-${UID}-${MAX_REQUEST_ATTEMPTS + 1}`, MAX_REQUEST_ATTEMPTS + 1],
      [`sidecar-termination-${UID}-${MAX_REQUEST_NAME_NUMBER}`, MAX_REQUEST_NAME_NUMBER],
      [`sidecar-termination-${UID}-${MAX_REQUEST_NAME_NUMBER + 1}`, undefined],
      [`sidecar-termination-${UID}-99999999999999999999`, undefined],
      [`sidecar-termination-${UID}-1e3`, undefined],
    ];
    for (const [name, want] of rows) assert.equal(requestAttempt(UID, name), want, name);
  });
});

describe('requestPodUids (R30): the informer index of the controller', () => {
  const crr = (name: string, labels?: Record<string, string>): ContainerRecreateRequest => ({
    apiVersion: 'sidecar-terminator.dev/v1alpha1',
    kind: 'ContainerRecreateRequest',
    metadata: { name, namespace: 'ns', ...(labels ? { labels } : {}) },
    spec: { podName: 'p', containers: [] },
  });
  const rows: Array<[string, ContainerRecreateRequest, string[]]> = [
    ['our name, our label', crr(`sidecar-termination-${UID}`, { [LABEL_POD_UID]: UID }), [UID]],
    ['our name, no label (not admitted yet)', crr(`sidecar-termination-${UID}`), [UID]],
    ['a later attempt: the uid with and without the suffix', crr(`sidecar-termination-${UID}-3`), [`${UID}-3`, UID]],
    ['our name, a lying label', crr(`sidecar-termination-${UID}`, { [LABEL_POD_UID]: 'other' }), ['other', UID]],
    ['another name, a label', crr('restart-proxy', { [LABEL_POD_UID]: UID }), [UID]],
    ['neither', crr('restart-proxy'), []],
    ['the prefix alone', crr('sidecar-termination-'), []],
  ];
  for (const [name, request, want] of rows) {
    it(name, () => assert.deepEqual(requestPodUids(request), want));
  }
});

describe('isOwnRequest (R30)', () => {
  const pod = { uid: UID, nodeName: NODE };
  const rows: Array<[string, ExistingRequest, typeof pod | { uid: string; nodeName?: string }, boolean]> = [
    ['our name, this Pod and node', request({ containers: [] }), pod, true],
    ['a later attempt', request({ attempt: 5, containers: [] }), pod, true],
    ['another node', request({ containers: [], labels: { nodeName: 'node-2' } }), pod, false],
    ['another uid', request({ containers: [], labels: { podUid: 'other' } }), pod, false],
    ['no labels', request({ containers: [], labels: null }), pod, false],
    ['not our name', request({ name: 'restart', containers: [] }), pod, false],
    ['a Pod not on a node', request({ containers: [], labels: { nodeName: undefined } }), { uid: UID }, false],
  ];
  for (const [name, r, p, want] of rows) {
    it(name, () => assert.equal(isOwnRequest(r, p), want));
  }
});

describe('R12, R15: the request body stays within the API bounds', () => {
  const pod = projectPod(makePod({ containers: [main('app'), sidecar('proxy')] }));
  const rows: Array<[string, number | undefined, number, number]> = [
    ['defaults', undefined, 300, 300],
    ['grace period above the deadline', 600, 300, 660],
    ['a grace period of days', 10 * 86_400, 300, MAX_ACTIVE_DEADLINE_SECONDS],
    ['a deadline option past 2^31 ms', 30, 3_000_000, MAX_ACTIVE_DEADLINE_SECONDS],
  ];
  for (const [name, grace, deadline, want] of rows) {
    it(`deadline: ${name}`, () => {
      const p = grace === undefined ? pod : { ...pod, terminationGracePeriodSeconds: grace };
      assert.equal(deadlineFor(p, { ...DEFAULT_OPTIONS, activeDeadlineSeconds: deadline }), want);
    });
  }

  it('the TTL never exceeds its maximum', () => {
    const crr = buildTerminationRequest(pod, ['proxy'], 1, { ...DEFAULT_OPTIONS, ttlSecondsAfterFinished: 10 * MAX_TTL_SECONDS_AFTER_FINISHED });
    assert.equal(crr.spec.ttlSecondsAfterFinished, MAX_TTL_SECONDS_AFTER_FINISHED);
  });

  it('never more containers than a request holds', () => {
    const many = Array.from({ length: 65 }, (_, i) => `s${i}`);
    const big = projectPod(makePod({ containers: many.map((n) => sidecar(n)) }));
    assert.throws(() => buildTerminationRequest(big, many, 1), /1 to 64 containers/);
    assert.equal(buildTerminationRequest(big, many.slice(0, 64), 1).spec.containers.length, 64);
  });
});

describe('retryDelaySeconds (R14)', () => {
  it('is 0 for the first attempt, then doubles from the base up to the cap', () => {
    const options = { ...DEFAULT_OPTIONS, retryBaseDelaySeconds: 5, retryMaxDelaySeconds: 30 };
    assert.deepEqual([1, 2, 3, 4, 5, 6, 50].map((a) => retryDelaySeconds(a, options)), [0, 5, 10, 20, 30, 30, 30]);
  });
});

describe('projectRequest', () => {
  const crr: ContainerRecreateRequest = {
    apiVersion: 'sidecar-terminator.dev/v1alpha1',
    kind: 'ContainerRecreateRequest',
    metadata: {
      name: `sidecar-termination-${UID}-3`,
      namespace: 'ns',
      creationTimestamp: '2025-01-01T00:00:00Z',
      labels: { [LABEL_POD_UID]: UID, [LABEL_NODE_NAME]: NODE },
    },
    spec: {
      podName: 'job-pod',
      containers: [
        { name: 'a', statusContext: { containerID: 'containerd://a', restartCount: 1 } },
        { name: 'b' },
      ],
    },
    status: {
      phase: 'Completed',
      completionTime: '2025-01-01T00:01:00Z',
      message: 'deadline exceeded',
      containerRecreateStates: [{ name: 'a', phase: 'Failed', message: 'stop failed', exitCode: 137 }],
    },
  };

  it('keeps what decide reads', () => {
    assert.deepEqual(projectRequest(crr, UID), {
      name: `sidecar-termination-${UID}-3`,
      attempt: 3,
      podUidLabel: UID,
      nodeNameLabel: NODE,
      phase: 'Completed',
      completed: true,
      message: 'deadline exceeded',
      creationTimeMs: Date.parse('2025-01-01T00:00:00Z'),
      completionTimeMs: Date.parse('2025-01-01T00:01:00Z'),
      containers: [
        { name: 'a', statusContext: { containerID: 'containerd://a', restartCount: 1 }, state: { phase: 'Failed', exitCode: 137, message: 'stop failed' } },
        { name: 'b' },
      ],
    });
  });

  it('a new request: not completed, no attempt for a foreign name, Date timestamps accepted', () => {
    const fresh = projectRequest(
      { ...crr, metadata: { name: 'mine', creationTimestamp: new Date(0) }, status: undefined },
      UID,
    );
    assert.equal(fresh.completed, false);
    assert.equal(fresh.phase, '');
    assert.equal(fresh.attempt, undefined);
    assert.equal(fresh.creationTimeMs, 0);
    assert.equal(fresh.completionTimeMs, undefined);
  });
});

describe('keptRequest (R48): what the caches keep of a request', () => {
  it('our labels, our finalizer, spec and status; none of what its creator can make large', () => {
    const fat: Record<string, string> = {};
    for (let i = 0; i < 2000; i++) fat[`example.com/label-${i}`] = 'x'.repeat(63);
    const stored = {
      apiVersion: 'sidecar-terminator.dev/v1alpha1' as const,
      kind: 'ContainerRecreateRequest' as const,
      metadata: {
        name: 'r', namespace: 'ns', uid: 'u', resourceVersion: '7', creationTimestamp: '2026-01-01T00:00:00Z',
        labels: { ...fat, [LABEL_POD_UID]: UID, 'crr.sidecar-terminator.dev/node-name': 'n', 'crr.sidecar-terminator.dev/active': 'true' },
        annotations: { big: 'y'.repeat(200_000) },
        finalizers: [...Array.from({ length: 100 }, (_, i) => `example.com/f-${i}`), 'sidecar-terminator.dev/restore-readiness'],
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: UID }],
        managedFields: [{ manager: 'kubectl', fieldsV1: { big: 'z'.repeat(100_000) } }],
      },
      spec: { podName: 'p', containers: [{ name: 'proxy' }] },
      status: { phase: 'Completed' as const, message: 'done' },
    };
    const kept = keptRequest(stored as ContainerRecreateRequest);
    assert.deepEqual(kept, {
      apiVersion: stored.apiVersion, kind: stored.kind,
      metadata: {
        name: 'r', namespace: 'ns', uid: 'u', resourceVersion: '7', creationTimestamp: '2026-01-01T00:00:00Z',
        labels: { [LABEL_POD_UID]: UID, 'crr.sidecar-terminator.dev/node-name': 'n', 'crr.sidecar-terminator.dev/active': 'true' },
        finalizers: ['sidecar-terminator.dev/restore-readiness'],
      },
      spec: stored.spec,
      status: stored.status,
    });
    assert.ok(JSON.stringify(kept).length < 1_000);
    assert.deepEqual(requestPodUids(kept), requestPodUids(stored as ContainerRecreateRequest), 'indexed the same');
  });

  it('no labels stays no labels; another finalizer alone is not kept', () => {
    const kept = keptRequest({
      apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
      metadata: { name: 'r', namespace: 'ns', finalizers: ['example.com/f'] }, spec: { podName: 'p', containers: [] },
    });
    assert.equal(kept.metadata.labels, undefined);
    assert.equal(kept.metadata.finalizers, undefined);
  });
});
