// R29, R31, R35: a request's deadline and a replaced Pod, as the agent and the controller both decide them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { API_VERSION, KIND, LABEL_POD_UID } from '../api/container-recreate-request.ts';
import { DEFAULT_ACTIVE_DEADLINE_SECONDS, deadlinePassed, replacedPodUid, untilDeadlineMs } from './request-completion.ts';

const CREATED = Date.parse('2025-01-01T00:00:00Z');

function request(over: { deadline?: number; created?: string; uidLabel?: string } = {}): ContainerRecreateRequest {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: 'r',
      namespace: 'ns',
      ...('created' in over ? { creationTimestamp: over.created } : { creationTimestamp: new Date(CREATED).toISOString() }),
      ...(over.uidLabel !== undefined ? { labels: { [LABEL_POD_UID]: over.uidLabel } } : {}),
    },
    spec: { podName: 'p', containers: [{ name: 'c' }], ...(over.deadline !== undefined ? { activeDeadlineSeconds: over.deadline } : {}) },
  };
}

describe('R31, R35: the deadline', () => {
  it('counts from the creation: time left before, passed from the very millisecond it is due', () => {
    const crr = request({ deadline: 30 });
    assert.equal(untilDeadlineMs(crr, CREATED + 10_000), 20_000);
    assert.equal(deadlinePassed(crr, CREATED + 29_999), undefined);
    assert.equal(deadlinePassed(crr, CREATED + 30_000), 'activeDeadlineSeconds (30s) passed before the request finished');
    assert.equal(untilDeadlineMs(crr, CREATED + 31_000), -1_000);
  });

  it('no deadline: the default maximum life (3 h, above the longest wait a strategy allows) ends it', () => {
    assert.equal(DEFAULT_ACTIVE_DEADLINE_SECONDS, 10_800);
    assert.equal(untilDeadlineMs(request(), CREATED), 10_800_000);
    assert.equal(deadlinePassed(request(), CREATED + 10_799_999), undefined);
    assert.match(deadlinePassed(request(), CREATED + 10_800_000) ?? '', /no activeDeadlineSeconds and is not kept running longer than 10800s/);
  });

  it('no creation time to count from: none passes', () => {
    assert.equal(untilDeadlineMs(request({ created: undefined }), CREATED), undefined);
    assert.equal(deadlinePassed(request({ created: 'not a time' }), CREATED + 10 ** 12), undefined);
    assert.equal(untilDeadlineMs(request({ deadline: 30, created: undefined }), CREATED), undefined);
    assert.equal(deadlinePassed(request({ deadline: 30, created: 'not a time' }), CREATED + 10 ** 12), undefined);
  });
});

describe('R29, R35: a replaced Pod', () => {
  it('is a pod-uid label naming another uid than the Pod now under the name', () => {
    assert.equal(replacedPodUid(request({ uidLabel: 'old' }), 'new'), 'old');
    assert.equal(replacedPodUid(request({ uidLabel: 'same' }), 'same'), undefined);
    assert.equal(replacedPodUid(request(), 'new'), undefined);
  });
});
