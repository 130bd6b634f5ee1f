// What the Reconciler keeps of the fast path's hand-offs (R43): the runtime's answers, once each, while fresh (counted from their arrival), awaited when still coming.
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

  it('a stale answer is not used; forgetStale drops answers handed over too long ago', async () => {
    let now = 1_000;
    const handed = new HandedOver(() => now);
    handed.accept({ request: request('r1'), answers: answers([['containerd://a', Promise.resolve({ container: PROXY, atMs: 1_000 })], ['containerd://b', Promise.resolve({ container: PROXY, atMs: 1_000 })]]), timing: TIMING });
    now = 2_001;
    assert.equal(await handed.takeAnswer('containerd://a'), undefined);
    handed.forgetStale();
    now = 1_000;
    assert.equal(await handed.takeAnswer('containerd://b'), undefined, 'forgotten');
  });
});
