import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { decideLifecycle, decideReadiness } from './lifecycle.ts';
import { MAX_REQUEUE_MS } from '../common/queue.ts';
import type { ContainerRecreateRequest, CRRContainer, CRRStatus } from '../api/container-recreate-request.ts';

const NOW = Date.parse('2026-01-01T00:10:00Z');
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();

function pod(over: { phase?: string; nodeName?: string; uid?: string; noID?: boolean } = {}): V1Pod {
  return {
    metadata: { name: 'p', namespace: 'ns', uid: over.uid ?? 'u1' },
    spec: { nodeName: over.nodeName ?? 'node-a', containers: [{ name: 'main' }, { name: 'proxy' }] },
    status: {
      phase: over.phase ?? 'Running',
      containerStatuses: [
        { name: 'main', image: 'i', imageID: '', ready: false, restartCount: 0, containerID: 'containerd://m' },
        { name: 'proxy', image: 'i', imageID: '', ready: true, restartCount: 2, containerID: over.noID ? undefined : 'containerd://p' },
      ],
    },
  };
}

interface CrrOver {
  labels?: Record<string, string>;
  containers?: Array<string | CRRContainer>;
  status?: CRRStatus;
  created?: string;
  deadline?: number;
  ttl?: number;
}
function crr(over: CrrOver = {}): ContainerRecreateRequest {
  return {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
    metadata: { name: 'r', namespace: 'ns', creationTimestamp: over.created ?? ago(5), labels: over.labels },
    spec: {
      podName: 'p',
      containers: (over.containers ?? ['proxy']).map((c) => (typeof c === 'string' ? { name: c } : c)),
      activeDeadlineSeconds: over.deadline,
      ttlSecondsAfterFinished: over.ttl,
    },
    status: over.status,
  };
}
const NODE_LABEL = 'crr.sidecar-terminator.dev/node-name';
const UID_LABEL = 'crr.sidecar-terminator.dev/pod-uid';
const ACTIVE_LABEL = 'crr.sidecar-terminator.dev/active';
const admitted = { [NODE_LABEL]: 'node-a', [UID_LABEL]: 'u1', [ACTIVE_LABEL]: 'true' };
/** A container as admission leaves it: pinned to its attempt. */
const pinned: CRRContainer = { name: 'proxy', statusContext: { containerID: 'containerd://p', restartCount: 2 } };
/** A request as admission (or its creator, fully) labelled it. */
const active = (over: CrrOver = {}) => crr({ labels: admitted, containers: [pinned], ...over });

describe('decideLifecycle', () => {
  const cases: { name: string; crr: ContainerRecreateRequest; pod?: V1Pod; kind: string; message?: RegExp; requeue?: number }[] = [
    { name: 'R28: admits: labels the request and fills statusContext from the Pod', crr: crr(), pod: pod(), kind: 'admit' },
    { name: 'R28: no such Pod', crr: crr(), kind: 'complete', message: /Pod p not found in namespace ns/ },
    ...['.', '..', 'a/b', ''].map((podName) => ({
      name: `R27: podName ${JSON.stringify(podName)} (not a Pod name; created before the CRD's pattern): completed unread`,
      crr: { ...crr(), spec: { ...crr().spec, podName } }, kind: 'complete', message: /is not a valid Pod name: request not executed/,
    })),
    { name: 'R28: Pod not on a node yet', crr: crr(), pod: pod({ nodeName: '' }), kind: 'complete', message: /not scheduled/ },
    { name: 'unknown container', crr: crr({ containers: ['nope'] }), pod: pod(), kind: 'complete', message: /no container nope/ },
    { name: 'R28: container without an ID', crr: crr(), pod: pod({ noID: true }), kind: 'complete', message: /no container ID yet/ },
    { name: 'finished Pod, request not ours', crr: crr(), pod: pod({ phase: 'Succeeded' }), kind: 'complete', message: /already finished/ },
    {
      name: 'R28: finished Pod: the created-by label exempts nobody',
      crr: crr({ labels: { 'crr.sidecar-terminator.dev/created-by': 'sidecar-terminator' } }),
      pod: pod({ phase: 'Succeeded' }),
      kind: 'complete',
      message: /already finished \(Succeeded\)/,
    },
    {
      name: 'finished Pod: a pre-set active label exempts nobody',
      crr: crr({ labels: { [ACTIVE_LABEL]: 'true' }, containers: [pinned] }),
      pod: pod({ phase: 'Failed' }),
      kind: 'complete',
      message: /already finished \(Failed\)/,
    },
    {
      name: 'finished Pod, fully labelled and pinned (our own requests are created so): left to the agent',
      crr: active(),
      pod: pod({ phase: 'Succeeded' }),
      kind: 'none',
      requeue: 55_001,
    },
    { name: 'a preset node label that does not match', crr: crr({ labels: { [NODE_LABEL]: 'node-z' } }), pod: pod(), kind: 'complete', message: /does not match/ },
    {
      name: 'R29: fully labelled and active, for another node: completed at once, never executed',
      crr: active({ labels: { ...admitted, [NODE_LABEL]: 'node-z' } }),
      pod: pod(),
      kind: 'complete',
      message: /^label crr\.sidecar-terminator\.dev\/node-name=node-z does not match the node of Pod p \(node-a\): request not executed$/,
    },
    {
      name: 'R29: fully labelled and active, for another Pod uid',
      crr: active({ labels: { ...admitted, [UID_LABEL]: 'u-other' } }),
      pod: pod(),
      kind: 'complete',
      message: /pod-uid=u-other does not match Pod p \(u1\).*request not executed/,
    },
    {
      name: 'R29: fully labelled and active, naming a container the Pod does not have',
      crr: active({ containers: [pinned, { name: 'ghost', statusContext: { containerID: 'containerd://g', restartCount: 0 } }] }),
      pod: pod(),
      kind: 'complete',
      message: /no container ghost/,
    },
    {
      name: 'R28: active label only: admitted (labelled and pinned) like any new request',
      crr: crr({ labels: { [ACTIVE_LABEL]: 'true' } }),
      pod: pod(),
      kind: 'admit',
    },
    { name: 'fully labelled, one container not pinned: admitted', crr: active({ containers: [pinned, { name: 'main' }] }), pod: pod(), kind: 'admit' },
    { name: 'fully labelled, not pinned, no container ID: completed', crr: active({ containers: ['proxy'] }), pod: pod({ noID: true }), kind: 'complete', message: /no container ID yet/ },
    { name: 'admitted, Pod gone', crr: active(), kind: 'complete', message: /no longer exists/ },
    { name: 'R29: admitted, Pod recreated with another uid', crr: active(), pod: pod({ uid: 'u2' }), kind: 'complete', message: /recreated/ },
    { name: 'R31: admitted, deadline passed', crr: active({ deadline: 3, status: { phase: 'Recreating' } }), pod: pod(), kind: 'complete', message: /activeDeadlineSeconds \(3s\)/ },
    {
      name: 'R31: admitted without a deadline: ended after the maximum life (3 h), whatever it waits for',
      crr: active({ created: ago(10_800), status: { phase: 'Recreating' } }),
      pod: pod(),
      kind: 'complete',
      message: /no activeDeadlineSeconds and is not kept running longer than 10800s/,
    },
    { name: 'admitted without a deadline, within the maximum life: looked at again by then', crr: active({ created: ago(10_000), status: { phase: 'Recreating' } }), pod: pod(), kind: 'none', requeue: 800_001 },
    { name: 'admitted, deadline ahead: looked at again then', crr: active({ deadline: 30, status: { phase: 'Recreating' } }), pod: pod(), kind: 'none', requeue: 25_001 },
    {
      name: 'admitted, a deadline past 2^31 ms: the requeue stays within a timer',
      crr: active({ deadline: 3_000_000, status: { phase: 'Recreating' } }),
      pod: pod(),
      kind: 'none',
      requeue: MAX_REQUEUE_MS,
    },
    { name: 'R31: no agent picked it up within a minute', crr: active({ created: ago(61) }), pod: pod(), kind: 'complete', message: /no agent on node node-a/ },
    { name: 'not yet picked up, within the minute', crr: active(), pod: pod(), kind: 'none', requeue: 55_001 },
    { name: 'R31: completed and still active: remove the label', crr: active({ status: { phase: 'Completed', completionTime: ago(1) } }), pod: pod(), kind: 'deactivate' },
    { name: 'completed, TTL ahead', crr: crr({ ttl: 10, status: { phase: 'Completed', completionTime: ago(4) } }), kind: 'none', requeue: 6_001 },
    {
      name: 'completed, a TTL past 2^31 ms: the requeue stays within a timer',
      crr: crr({ ttl: 30 * 86_400, status: { phase: 'Completed', completionTime: ago(4) } }),
      kind: 'none',
      requeue: MAX_REQUEUE_MS,
    },
    { name: 'R31: completed, TTL passed: delete', crr: crr({ ttl: 10, status: { phase: 'Completed', completionTime: ago(11) } }), kind: 'delete' },
    { name: 'completed, no TTL: kept for a day', crr: crr({ status: { phase: 'Completed', completionTime: ago(11) } }), kind: 'none', requeue: MAX_REQUEUE_MS },
    { name: 'R31: completed a day ago, no TTL: deleted', crr: crr({ status: { phase: 'Completed', completionTime: ago(86_401) } }), kind: 'delete' },
    { name: 'completed, no TTL and no completion time: a day from its creation', crr: crr({ created: ago(86_401), status: { phase: 'Completed' } }), kind: 'delete' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const action = decideLifecycle(c.crr, c.pod, NOW);
      assert.equal(action.kind, c.kind);
      if (c.message) assert.match((action as { message: string }).message, c.message);
      if (c.requeue !== undefined) assert.equal((action as { requeueAfterMs?: number }).requeueAfterMs, c.requeue);
    });
  }

  it('R28: admission sets the node, uid and active labels and keeps a given statusContext', () => {
    const given = crr();
    given.spec.containers = [{ name: 'proxy', statusContext: { containerID: 'containerd://given', restartCount: 0 } }, { name: 'main' }];
    const action = decideLifecycle(given, pod(), NOW);
    assert.equal(action.kind, 'admit');
    if (action.kind !== 'admit') return;
    assert.deepEqual(action.labels, admitted);
    assert.deepEqual(action.containers.map((c) => c.statusContext), [
      { containerID: 'containerd://given', restartCount: 0 },
      { containerID: 'containerd://m', restartCount: 0 },
    ]);
  });
});

describe('decideReadiness (R33)', () => {
  const withGate = (status?: string): V1Pod => {
    const p = pod();
    if (status) p.status!.conditions = [{ type: 'sidecar-terminator.dev/ready', status }];
    return p;
  };
  const fin = ['sidecar-terminator.dev/restore-readiness'];
  const running = (finalizers?: string[], status?: CRRStatus): ContainerRecreateRequest => {
    const r = active({ status });
    r.spec.strategy = { unreadyGracePeriodSeconds: 5 };
    r.metadata.finalizers = finalizers;
    return r;
  };
  const cases: { name: string; crr: ContainerRecreateRequest; pod?: V1Pod; want: object }[] = [
    { name: 'no unready grace: nothing', crr: crr({ labels: admitted }), pod: withGate(), want: { kind: 'none' } },
    { name: 'finalizer first', crr: running(), pod: withGate(), want: { kind: 'addFinalizer' } },
    { name: 'then the Pod is marked not-ready', crr: running(fin), pod: withGate('True'), want: { kind: 'setPodReady', ready: false, podUid: 'u1' } },
    { name: 'already not-ready: nothing', crr: running(fin), pod: withGate('False'), want: { kind: 'none' } },
    { name: 'completed: ready again', crr: running(fin, { phase: 'Completed' }), pod: withGate('False'), want: { kind: 'setPodReady', ready: true, podUid: 'u1' } },
    { name: 'completed and ready: finalizer off', crr: running(fin, { phase: 'Completed' }), pod: withGate('True'), want: { kind: 'removeFinalizer' } },
    { name: 'completed, Pod gone: finalizer off', crr: running(fin, { phase: 'Completed' }), want: { kind: 'removeFinalizer' } },
    { name: 'completed, Pod recreated under the name: finalizer off, the new Pod untouched', crr: running(fin, { phase: 'Completed' }), pod: { ...withGate('False'), metadata: { name: 'p', namespace: 'ns', uid: 'u2' } }, want: { kind: 'removeFinalizer' } },
    { name: 'labels naming another Pod (uid): the Pod is not touched', crr: running(fin), pod: { ...withGate('True'), metadata: { name: 'p', namespace: 'ns', uid: 'u2' } }, want: { kind: 'none' } },
    { name: 'labels naming another node: the Pod is not touched, not even a finalizer', crr: running(), pod: { ...withGate('True'), spec: { nodeName: 'node-b', containers: [{ name: 'proxy' }] } }, want: { kind: 'none' } },
    { name: 'created with the active label but no uid label (not yet admitted): nothing before admission', crr: (() => { const r = running(fin); r.metadata.labels = { [ACTIVE_LABEL]: 'true', [NODE_LABEL]: 'node-a' }; return r; })(), pod: withGate('True'), want: { kind: 'none' } },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(decideReadiness(c.crr, c.pod), c.want));
  it('a request deleted while running restores readiness', () => {
    const r = running(fin);
    r.metadata.deletionTimestamp = ago(0);
    assert.deepEqual(decideReadiness(r, withGate('False')), { kind: 'setPodReady', ready: true, podUid: 'u1' });
  });
});
