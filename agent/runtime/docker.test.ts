import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Docker from 'dockerode';
import { fromDockerInspect, parseRfc3339Nano } from './docker.ts';

describe('parseRfc3339Nano', () => {
  it('keeps nanoseconds', () => {
    assert.equal(parseRfc3339Nano('2024-05-01T10:00:00.123456789Z'), 1714557600123456789n);
    assert.equal(parseRfc3339Nano('2024-05-01T10:00:00.5Z'), 1714557600500000000n);
    assert.equal(parseRfc3339Nano('2024-05-01T10:00:00Z'), 1714557600000000000n);
  });
  it('applies zone offsets', () => {
    assert.equal(parseRfc3339Nano('2024-05-01T12:30:00.000000001+02:30'), 1714557600000000001n);
    assert.equal(parseRfc3339Nano('2024-05-01T09:00:00-01:00'), 1714557600000000000n);
  });
  it("reads Go's zero time and empty as unset", () => {
    assert.equal(parseRfc3339Nano('0001-01-01T00:00:00Z'), 0n);
    assert.equal(parseRfc3339Nano(''), 0n);
    assert.equal(parseRfc3339Nano(undefined), 0n);
  });
  it('refuses anything else', () => {
    assert.throws(() => parseRfc3339Nano('yesterday'), /not an RFC 3339 timestamp/);
  });
});

describe('fromDockerInspect', () => {
  const info = (state: Partial<Docker.ContainerInspectInfo['State']>) =>
    ({
      Id: 'a'.repeat(64),
      State: { StartedAt: '2024-05-01T10:00:00.1Z', FinishedAt: '0001-01-01T00:00:00Z', ExitCode: 0, OOMKilled: false, ...state },
    }) as Docker.ContainerInspectInfo;

  it('maps a running container', () => {
    assert.deepEqual(fromDockerInspect(info({ Status: 'running' })), {
      id: 'a'.repeat(64),
      state: 'running',
      startedAtNs: 1714557600100000000n,
      finishedAtNs: 0n,
    });
  });
  it('maps exits to Completed, Error and OOMKilled', () => {
    const done = { Status: 'exited', FinishedAt: '2024-05-01T10:00:01Z' };
    assert.deepEqual(fromDockerInspect(info({ ...done, ExitCode: 0 })), {
      id: 'a'.repeat(64),
      state: 'exited',
      startedAtNs: 1714557600100000000n,
      finishedAtNs: 1714557601000000000n,
      exitCode: 0,
      reason: 'Completed',
    });
    assert.equal(fromDockerInspect(info({ ...done, ExitCode: 137 })).reason, 'Error');
    assert.equal(fromDockerInspect(info({ ...done, ExitCode: 137, OOMKilled: true })).reason, 'OOMKilled');
  });
  it('reads kubelet\'s labels (cri-dockerd) as the owner', () => {
    const labelled = {
      ...info({ Status: 'running' }),
      Config: {
        Labels: {
          'io.kubernetes.pod.uid': 'uid-1',
          'io.kubernetes.pod.namespace': 'ns',
          'io.kubernetes.pod.name': 'job-pod',
          'io.kubernetes.container.name': 'proxy',
          'maintainer': 'someone',
        },
      },
    } as unknown as Docker.ContainerInspectInfo;
    assert.deepEqual(fromDockerInspect(labelled).owner, { podUid: 'uid-1', podNamespace: 'ns', podName: 'job-pod', container: 'proxy' });
  });
  it('has no owner for a container kubelet did not create (no labels, or only some)', () => {
    const plain = { ...info({ Status: 'running' }), Config: { Labels: { 'com.docker.compose.service': 'db' } } } as unknown as Docker.ContainerInspectInfo;
    assert.equal(fromDockerInspect(plain).owner, undefined);
    assert.equal('owner' in fromDockerInspect(plain), false);
    const partial = { ...info({ Status: 'running' }), Config: { Labels: { 'io.kubernetes.pod.uid': 'uid-1', 'io.kubernetes.pod.namespace': 'ns' } } } as unknown as Docker.ContainerInspectInfo;
    assert.equal(fromDockerInspect(partial).owner, undefined);
    const nullLabels = { ...info({ Status: 'running' }), Config: { Labels: null } } as unknown as Docker.ContainerInspectInfo;
    assert.equal(fromDockerInspect(nullLabels).owner, undefined);
  });
  it('maps the other states', () => {
    assert.equal(fromDockerInspect(info({ Status: 'created' })).state, 'created');
    assert.equal(fromDockerInspect(info({ Status: 'paused' })).state, 'running');
    assert.equal(fromDockerInspect(info({ Status: 'dead' })).state, 'exited');
    assert.equal(fromDockerInspect(info({ Status: 'removing' })).state, 'unknown');
  });
});
