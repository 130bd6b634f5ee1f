import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { PodEvent, PodRef } from '../common/events.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { MAX_WARNED_PODS, UnreadablePodWarnings } from './unreadable-pods.ts';

describe('UnreadablePodWarnings (R48)', () => {
  it('warns on a Pod it cannot read once per uid, never without the Pod\'s identity, and keeps a bounded memory', () => {
    const sent: string[] = [];
    const warnings = new UnreadablePodWarnings({ emit: (pod: PodRef, e: PodEvent) => void sent.push(`${pod.namespace}/${pod.name}/${pod.uid} ${e.type} ${e.reason}`) });
    warnings.warn({ namespace: 'ns', name: 'big', uid: 'u1', resourceVersion: '5' });
    warnings.warn({ namespace: 'ns', name: 'big', uid: 'u1', resourceVersion: '6' });
    warnings.warn({ namespace: 'ns', name: 'big', uid: 'u2' });
    warnings.warn({ namespace: 'ns', name: 'who' });
    warnings.warn({});
    assert.deepEqual(sent, [`ns/big/u1 Warning ${EVENT_REASONS.podUnreadable}`, `ns/big/u2 Warning ${EVENT_REASONS.podUnreadable}`]);
    for (let i = 0; i < MAX_WARNED_PODS; i++) warnings.warn({ namespace: 'ns', name: `p${i}`, uid: `x${i}` });
    warnings.warn({ namespace: 'ns', name: 'big', uid: 'u1' });
    assert.equal(sent.at(-1), `ns/big/u1 Warning ${EVENT_REASONS.podUnreadable}`, 'past the bound, the memory started over');
  });
});
