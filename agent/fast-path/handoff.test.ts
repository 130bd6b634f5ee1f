// What the Reconciler keeps of the fast path's hand-offs (R43): requests until their watch event,
// answers once each, while fresh (counted from their arrival), awaited when still coming.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import type { ContainerID } from '../../api/container-id.ts';
import { runtimeContainerID } from '../../api/container-id.ts';
import type { RuntimeContainer } from '../runtime/types.ts';
import type { RuntimeAnswer } from './handoff.ts';
import { HandedOver } from './handoff.ts';

const TIMING = { exitEventAtMs: 0, createdAtMs: 0, apiCreateMs: 0 };
const PROXY: RuntimeContainer = { id: runtimeContainerID('proxy-id'), state: 'running', startedAtNs: 1n, finishedAtNs: 0n };
const request = (uid: string, podName = 'job-pod'): ContainerRecreateRequest => ({
  metadata: { uid, name: uid, namespace: 'ns' }, spec: { podName, containers: [{ name: 'proxy' }] },
}) as ContainerRecreateRequest;
const answers = (entries: [string, Promise<RuntimeAnswer | undefined>][]) => new Map(entries.map(([id, a]) => [id as ContainerID, a]));

describe('HandedOver (R43)', () => {
  it('a request handed over counts for its Pod until the watch delivers it, then the watch\'s copy stands', () => {
    const handed = new HandedOver(() => 0);
    handed.accept({ request: request('r1'), answers: new Map(), timing: TIMING });
    handed.accept({ request: request('r2', 'other-pod'), answers: new Map(), timing: TIMING });
    assert.deepEqual(handed.requestsOf('ns', 'job-pod', []).map((r) => r.metadata.uid), ['r1']);
    assert.deepEqual(handed.requestsOf('other', 'job-pod', []), [], 'another namespace');
    const watched = { ...request('r1'), status: { phase: 'Recreating' as const } };
    assert.deepEqual(handed.requestsOf('ns', 'job-pod', [watched]), [watched]);
    assert.deepEqual(handed.requestsOf('ns', 'job-pod', []), [], 'dropped once the watch had it');
  });

  it('an answer is taken once, within a second of its arrival, and waited for while it comes', async () => {
    let now = 1_000;
    const handed = new HandedOver(() => now);
    let arrive: (answer: RuntimeAnswer) => void = () => {};
    const coming = new Promise<RuntimeAnswer>((resolve) => { arrive = resolve; });
    handed.accept({
      request: request('r1'),
      answers: answers([['containerd://proxy-id', Promise.resolve({ container: PROXY, atMs: 1_000 })], ['containerd://late-id', coming]]),
      timing: TIMING,
    });
    assert.deepEqual(await handed.takeAnswer('containerd://proxy-id'), PROXY);
    assert.equal(await handed.takeAnswer('containerd://proxy-id'), undefined, 'once');
    const late = handed.takeAnswer('containerd://late-id');
    now = 2_500;
    arrive({ container: { ...PROXY, id: runtimeContainerID('late-id') }, atMs: 2_000 });
    assert.equal((await late)?.id, 'late-id', 'fresh from its arrival, not from the hand-off');
  });

  it('a stale answer is not used; forgetAllBut drops inactive requests and answers handed over too long ago', async () => {
    let now = 1_000;
    const handed = new HandedOver(() => now);
    handed.accept({ request: request('r1'), answers: answers([['containerd://a', Promise.resolve({ container: PROXY, atMs: 1_000 })], ['containerd://b', Promise.resolve({ container: PROXY, atMs: 1_000 })]]), timing: TIMING });
    now = 2_001;
    assert.equal(await handed.takeAnswer('containerd://a'), undefined);
    handed.forgetAllBut(new Set());
    assert.deepEqual(handed.requestsOf('ns', 'job-pod', []), []);
    now = 1_000;
    assert.equal(await handed.takeAnswer('containerd://b'), undefined, 'forgotten');
  });
});
