import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../types.ts';
import { UID } from './fixtures.ts';
import { DEFAULT_OPTIONS, projectRequest, requestAttempt, requestName, retryDelaySeconds } from './requests.ts';

describe('request names', () => {
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
    ];
    for (const [name, want] of rows) assert.equal(requestAttempt(UID, name), want, name);
  });
});

describe('retryDelaySeconds', () => {
  it('is 0 for the first attempt, then doubles from the base up to the cap', () => {
    const options = { ...DEFAULT_OPTIONS, retryBaseDelaySeconds: 5, retryMaxDelaySeconds: 30 };
    assert.deepEqual([1, 2, 3, 4, 5, 6, 50].map((a) => retryDelaySeconds(a, options)), [0, 5, 10, 20, 30, 30, 30]);
  });
});

describe('projectRequest', () => {
  const crr: ContainerRecreateRequest = {
    apiVersion: 'sidecar-terminator.dev/v1alpha1',
    kind: 'ContainerRecreateRequest',
    metadata: { name: `sidecar-termination-${UID}-3`, namespace: 'ns', creationTimestamp: '2025-01-01T00:00:00Z' },
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
