import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ContainerStatus } from './cri-client.ts';
import { fromCriStatus } from './cri.ts';

describe('fromCriStatus', () => {
  const status = (s: Partial<ContainerStatus>) =>
    ({ id: 'b'.repeat(64), state: 'CONTAINER_RUNNING', startedAt: '1714557600100000000', finishedAt: '0', exitCode: 0, reason: '', ...s }) as ContainerStatus;

  it('maps a running container, nanosecond timestamps as bigint', () => {
    assert.deepEqual(fromCriStatus(status({})), {
      id: 'b'.repeat(64),
      state: 'running',
      startedAtNs: 1714557600100000000n,
      finishedAtNs: 0n,
    });
  });
  it('keeps exit code and reason of an exited container', () => {
    const exited = fromCriStatus(status({ state: 'CONTAINER_EXITED', finishedAt: '1714557601999999999', exitCode: 137, reason: 'Error' }));
    assert.equal(exited.state, 'exited');
    assert.equal(exited.exitCode, 137);
    assert.equal(exited.reason, 'Error');
    assert.equal(exited.finishedAtNs, 1714557601999999999n);
  });
  it('reads kubelet\'s labels as the owner', () => {
    const labels = { 'io.kubernetes.pod.uid': 'uid-1', 'io.kubernetes.pod.namespace': 'ns', 'io.kubernetes.pod.name': 'job-pod', 'io.kubernetes.container.name': 'proxy' };
    assert.deepEqual(fromCriStatus(status({ labels })).owner, { podUid: 'uid-1', podNamespace: 'ns', podName: 'job-pod', container: 'proxy' });
    assert.equal(fromCriStatus(status({ labels: { 'io.kubernetes.pod.uid': 'uid-1' } })).owner, undefined);
    assert.equal(fromCriStatus(status({})).owner, undefined);
  });
  it('maps created and unknown', () => {
    assert.equal(fromCriStatus(status({ state: 'CONTAINER_CREATED', startedAt: '0' })).state, 'created');
    assert.equal(fromCriStatus(status({ state: 'CONTAINER_UNKNOWN' })).state, 'unknown');
  });
});
