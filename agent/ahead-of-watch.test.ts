// What this agent created and wrote ahead of the watch (R43): a request created here counts for its
// Pod until the watch delivers it; a status written here stands over the very version it replaced.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { AheadOfWatch } from './ahead-of-watch.ts';

const request = (uid: string, podName = 'job-pod', resourceVersion = '1'): ContainerRecreateRequest => ({
  metadata: { uid, name: uid, namespace: 'ns', resourceVersion }, spec: { podName, containers: [{ name: 'proxy' }] },
}) as ContainerRecreateRequest;

describe('AheadOfWatch (R43)', () => {
  it('a request created here counts for its Pod until the watch delivers it, then the watch\'s copy stands', () => {
    const ahead = new AheadOfWatch();
    ahead.created(request('r1'));
    ahead.created(request('r2', 'other-pod'));
    assert.deepEqual(ahead.requestsOf('ns', 'job-pod', []).map((r) => r.metadata.uid), ['r1']);
    assert.deepEqual(ahead.requestsOf('other', 'job-pod', []), [], 'another namespace');
    const watched = { ...request('r1'), status: { phase: 'Recreating' as const } };
    assert.deepEqual(ahead.requestsOf('ns', 'job-pod', [watched]), [watched]);
    assert.deepEqual(ahead.requestsOf('ns', 'job-pod', []), [], 'dropped once the watch had it');
  });

  it('a status written here stands while the cache holds the version it replaced; then the cache is the truth', () => {
    const ahead = new AheadOfWatch();
    const written = request('r1', 'job-pod', '2');
    ahead.wrote('r1', '1', written);
    assert.equal(ahead.latest(request('r1', 'job-pod', '1')), written);
    const caughtUp = request('r1', 'job-pod', '2');
    assert.equal(ahead.latest(caughtUp), caughtUp);
    assert.equal(ahead.latest(request('r1', 'job-pod', '1')).metadata.resourceVersion, '1', 'forgotten once the watch caught up');
  });

  it('a request created and written over before its watch event: both stand, each until the watch has it', () => {
    const ahead = new AheadOfWatch();
    const created = request('r1');
    const written = request('r1', 'job-pod', '2');
    ahead.created(created);
    ahead.wrote('r1', '1', written);
    assert.deepEqual(ahead.requestsOf('ns', 'job-pod', []).map((r) => ahead.latest(r)), [written]);
    assert.equal(ahead.latest(request('r1', 'job-pod', '0')).metadata.resourceVersion, '0', 'someone else wrote: the written copy is dropped');
    assert.deepEqual(ahead.requestsOf('ns', 'job-pod', []), [created], 'the created one still counts');
  });

  it('forgetAllBut drops what is kept of requests no longer active', () => {
    const ahead = new AheadOfWatch();
    ahead.created(request('r1'));
    ahead.wrote('r2', '1', request('r2', 'job-pod', '2'));
    ahead.forgetAllBut(new Set(['r2']));
    assert.deepEqual(ahead.requestsOf('ns', 'job-pod', []), []);
    assert.equal(ahead.latest(request('r2', 'job-pod', '1')).metadata.resourceVersion, '2');
  });
});
