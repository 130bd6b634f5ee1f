// The I/O around decide(), against the fake API server (test/support/fake-api.ts) and the real event
// recorder: what reaches the API server, what it answers (a name taken, a rejected body, a stale
// resourceVersion, throttling, errors), and the Pod's events, each sent once.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { EventRecorder } from '../common/events.ts';
import { UrgentWrites } from '../common/urgent-writes.ts';
import { isConflict } from '../common/kube/errors.ts';
import { apiError, FakeKubeApi, networkError } from '../test/support/fake-api.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import { createLogger } from '../common/log.ts';
import { createControllerMetrics } from './metrics.ts';
import { ActedOnLog } from './policy-status.ts';
import { EXISTS_RECHECK_MS, isRejection, NODE_NOT_FOUND_RETRY_MS, POLICIES_UNREAD_WAIT_MS, REJECTED_RETRY_MS, SidecarController } from './sidecar-controller.ts';
import { ANNOTATION_SIDECARS, CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import type { NodeKind } from '../rules/classify.ts';
import { exited, IGNORE_EXIT_CODE, imageSidecar, main, makePod, NOW, sidecar, UID } from '../test/support/pods.ts';
import { projectPod, type PodProjection } from '../rules/projection.ts';
import { requestName, requestPodUids } from '../rules/requests.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID, requestPath } from '../api/container-recreate-request.ts';

import type { SidecarPolicy } from '../rules/policies.ts';
import { applyPolicies, parsePolicy } from '../rules/policies.ts';

const metrics = createControllerMetrics();
const log = createLogger('test', 'error');
const KEY = 'ns/job-pod';
const POD = podPath('ns', 'job-pod');
const REQUESTS = requestPath('ns');

interface HarnessOptions {
  pod?: V1Pod;
  node?: NodeKind;
  /** How the node's kind is found, instead of `node`. */
  nodeKind?: (name: string) => Promise<NodeKind>;
  policies?: SidecarPolicy[];
  /** --agentless-swap-images; none by default. */
  agentlessSwapImages?: string[];
  /** --settled-phase; true by default. */
  settledPhase?: boolean;
  /** Whether the policies and namespaces are all read (true by default). */
  policiesRead?: () => boolean;
}

function harness(o: HarnessOptions = {}) {
  const api = new FakeKubeApi({ now: () => NOW });
  api.set(POD, o.pod ?? makePod({ containers: [main('app', exited(0)), sidecar('proxy')] }));
  /** What the watches hold: what the API has now, unless a test pins a stale copy. */
  const cache: { pod?: PodProjection; requests?: ContainerRecreateRequest[] } = {};
  const urgent = new UrgentWrites();
  const recorder = new EventRecorder(api, 'sidecar-terminator', log, { urgent });
  const actedOn = new ActedOnLog();
  const controller = new SidecarController({
    client: api,
    actedOn,
    cachedPod: () => ({ pod: cache.pod ?? projectPod(api.object<V1Pod>(POD)!), receivedAtMs: NOW }),
    requestsForPod: (namespace, uid) => (cache.requests ?? api.list<ContainerRecreateRequest>(requestPath(namespace)))
      .filter((r) => requestPodUids(r).includes(uid)),
    withPolicies: (pod) => (o.policiesRead?.() ?? true ? applyPolicies(pod, {}, o.policies ?? []) : undefined),
    nodeKind: o.nodeKind ?? (async () => o.node ?? 'real'),
    events: recorder,
    creates: urgent,
    metrics,
    options: { activeDeadlineSeconds: 300, ttlSecondsAfterFinished: 600, retryBaseDelaySeconds: 10, retryMaxDelaySeconds: 300, sidecarStartTimeoutSeconds: 120, agentlessSwapImages: o.agentlessSwapImages ?? [], settledPhase: o.settledPhase ?? true },
    log,
    now: () => NOW,
  });
  const events = async () => {
    await recorder.flushed();
    return api.list<{ type: string; reason: string; message: string }>(resourcePath('v1', 'events', 'ns'));
  };
  const reasons = async () => (await events()).map((e) => `${e.type} ${e.reason}`);
  const creates = () => api.calls.filter((c) => c.method === 'create' && c.path === REQUESTS);
  return { api, controller, cache, events, reasons, creates, recorder, actedOn };
}

describe('isRejection (R17)', () => {
  const rows: Array<[number | undefined, boolean]> = [
    [400, true], [403, true], [404, true], [422, true], [409, false], [429, false], [500, false], [503, false], [undefined, false],
  ];
  for (const [code, want] of rows) it(`${code}: ${want}`, () => assert.equal(isRejection(code), want));
});

describe('SidecarController: a Pod bound to a node that does not exist (R17)', () => {
  it('one Warning, nothing created, looked at again slowly (not at the queue\'s pace); other errors are retried as before', async () => {
    const api404 = new FakeKubeApi();
    const reads: string[] = [];
    const h = harness({
      nodeKind: async (name) => {
        reads.push(name);
        return api404.get<never>(resourcePath('v1', 'nodes', undefined, name));
      },
    });
    for (let i = 0; i < 3; i++) assert.deepEqual(await h.controller.reconcile(KEY), { requeueAfterMs: NODE_NOT_FOUND_RETRY_MS });
    assert.ok(NODE_NOT_FOUND_RETRY_MS >= 60_000);
    // Looked at again (a resync): the node is not read again before the retry is due.
    assert.equal(reads.length, 1);
    assert.deepEqual(h.creates(), []);
    const events = await h.events();
    assert.deepEqual(events.map((e) => `${e.type} ${e.reason}`), [`Warning ${EVENT_REASONS.nodeNotFound}`]);
    assert.match(events[0]!.message, /bound to node node-1, which does not exist/);
    // Once it is due, read again; and a Pod that left the cache is forgotten.
    h.controller.forget(KEY);
    await h.controller.reconcile(KEY);
    assert.equal(reads.length, 2);
    const failing = harness({ nodeKind: async () => { throw networkError(); } });
    await assert.rejects(failing.controller.reconcile(KEY));
  });
});

describe('SidecarController: creating a request', () => {
  it('R54: a new leader decides nothing before the policies and namespaces are read: the Pod waits, then is decided', async () => {
    let read = false;
    const { controller, creates, reasons } = harness({ policiesRead: () => read });
    assert.deepEqual(await controller.reconcile(KEY), { requeueAfterMs: POLICIES_UNREAD_WAIT_MS });
    assert.equal(creates().length, 0);
    assert.deepEqual(await reasons(), []);
    read = true;
    await controller.reconcile(KEY);
    assert.equal(creates().length, 1);
  });

  it('R10, R47: creates it and emits the Normal event once, however often the Pod is looked at', async () => {
    const h = harness();
    assert.equal(await h.controller.reconcile(KEY), undefined);
    await h.controller.reconcile(KEY);
    await h.controller.reconcile(KEY);
    assert.deepEqual(h.api.lines({ method: 'create', path: REQUESTS }), [`POST ${REQUESTS} 201`]);
    assert.deepEqual(h.api.list<ContainerRecreateRequest>(REQUESTS).map((r) => r.metadata.name), [requestName(UID, 1)]);
    assert.deepEqual(await h.reasons(), [`Normal ${EVENT_REASONS.stopping}`]);
  });

  it('a request create goes before the events: one waiting is sent only once the create returned', async () => {
    const h = harness();
    let createReturns!: () => void;
    h.api.inject({ method: 'create', path: REQUESTS }, () => new Promise<void>((resolve) => (createReturns = resolve)));
    const reconciling = h.controller.reconcile(KEY);
    await new Promise((resolve) => setTimeout(resolve, 5));
    h.recorder.emit({ namespace: 'ns', name: 'other-pod', uid: 'u2' }, { type: 'Normal', reason: 'Earlier', message: 'of another Pod' });
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(h.api.calls.filter((c) => c.path.endsWith('/events')), [], 'an event went out while the create was in flight');
    createReturns();
    await reconciling;
    assert.deepEqual((await h.reasons()).sort(), ['Normal Earlier', `Normal ${EVENT_REASONS.stopping}`]);
  });

  it('R17: the name is taken (409: the agent was first, not yet in the watch): treated as created elsewhere, no event, looked at again soon', async () => {
    const h = harness();
    h.cache.requests = [];
    h.api.set(requestPath('ns', requestName(UID, 1)), {
      metadata: { labels: { [LABEL_NODE_NAME]: 'node-1', [LABEL_POD_UID]: UID, [LABEL_ACTIVE]: 'true' } },
      spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] },
    });
    assert.deepEqual(await h.controller.reconcile(KEY), { requeueAfterMs: EXISTS_RECHECK_MS });
    assert.deepEqual(h.api.lines({ method: 'create', path: REQUESTS }), [`POST ${REQUESTS} 409`]);
    assert.deepEqual(await h.reasons(), []);
    // Once the watch has it: waited for, still without an event.
    h.cache.requests = undefined;
    assert.equal(await h.controller.reconcile(KEY), undefined);
    assert.equal(h.creates().length, 1);
    assert.deepEqual(await h.reasons(), []);
  });

  for (const [code, message] of [
    [422, 'spec.activeDeadlineSeconds: Invalid value: 999999'],
    [403, 'containerrecreaterequests is forbidden'],
    [404, 'namespaces "ns" not found'],
  ] as const) {
    it(`R17: a request the API server rejects (${code}): one Warning with its message, a long requeue, no hot loop`, async () => {
      const h = harness();
      h.api.inject({ method: 'create', path: REQUESTS }, apiError(code, 'POST', REQUESTS, message), 2);
      assert.deepEqual(await h.controller.reconcile(KEY), { requeueAfterMs: REJECTED_RETRY_MS });
      const events = await h.events();
      assert.deepEqual(events.map((e) => `${e.type} ${e.reason}`), [`Warning ${EVENT_REASONS.requestRejected}`]);
      assert.ok(events[0]?.message.includes(`for sidecar "proxy": ${message}. Trying again in 300s`), events[0]?.message);
      // The next try gives no second Warning; the request announced never was.
      assert.deepEqual(await h.controller.reconcile(KEY), { requeueAfterMs: REJECTED_RETRY_MS });
      assert.equal((await h.events()).length, 1);
      assert.deepEqual(h.api.list(REQUESTS), []);
    });
  }

  for (const [name, fault] of [['429', 429], ['500', 500], ['no answer', networkError()]] as const) {
    it(`a create answered with ${name} is thrown, for the queue's own backoff; the retry creates it`, async () => {
      const h = harness();
      h.api.inject({ method: 'create', path: REQUESTS }, fault);
      await assert.rejects(h.controller.reconcile(KEY));
      assert.deepEqual(await h.events(), []);
      await h.controller.reconcile(KEY);
      assert.equal(h.api.list(REQUESTS).length, 1);
      assert.deepEqual(await h.reasons(), [`Normal ${EVENT_REASONS.stopping}`]);
    });
  }

  it('R11, R30: a request that took our name for another node: skipped, the next name is created', async () => {
    const h = harness();
    h.api.set(requestPath('ns', requestName(UID, 1)), {
      apiVersion: 'sidecar-terminator.dev/v1alpha1',
      kind: 'ContainerRecreateRequest',
      metadata: { labels: { [LABEL_NODE_NAME]: 'node-2', [LABEL_POD_UID]: UID, [LABEL_ACTIVE]: 'true' } },
      spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] },
    });
    await h.controller.reconcile(KEY);
    assert.deepEqual(h.creates().map((c) => (c.body as ContainerRecreateRequest).metadata.name), [requestName(UID, 2)]);
    assert.deepEqual(await h.reasons(), [`Normal ${EVENT_REASONS.stopping}`]);
  });

  it('a wait with a requeue time is requeued; its Warning goes out once however often it is decided', async () => {
    const h = harness({ pod: makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'waiting', [], { id: null })] }) });
    for (let i = 0; i < 3; i++) assert.deepEqual(await h.controller.reconcile(KEY), { requeueAfterMs: 110_000 });
    assert.deepEqual(await h.reasons(), [`Warning ${EVENT_REASONS.sidecarNotStarted}`]);
  });
});

describe('SidecarController: writes carrying the Pod\'s resourceVersion', () => {
  it('image swap from a stale Pod: 409, no event; the retry from the fresh Pod swaps, one event', async () => {
    const h = harness({ node: 'virtual', pod: makePod({ containers: [main('app', exited(0)), imageSidecar('proxy', 'exit0:1')] }) });
    h.cache.pod = projectPod(h.api.object<V1Pod>(POD)!);
    // kubelet writes the Pod status meanwhile.
    const fresh = h.api.object<V1Pod>(POD)!;
    h.api.set(POD, { ...fresh, status: { ...fresh.status, podIP: '10.0.0.9' } });
    await assert.rejects(h.controller.reconcile(KEY), (err) => isConflict(err));
    assert.deepEqual(await h.events(), []);
    h.cache.pod = undefined;
    await h.controller.reconcile(KEY);
    assert.deepEqual(h.api.lines({ method: 'patch' }), [`PATCH ${POD} 409`, `PATCH ${POD} 200`]);
    assert.deepEqual(h.api.object<V1Pod>(POD)?.spec?.containers.map((c) => `${c.name}=${c.image}`), ['app=app:1', 'proxy=exit0:1']);
    // Swapped: the next look waits for kubelet, without a second event.
    await h.controller.reconcile(KEY);
    assert.deepEqual(await h.reasons(), [`Normal ${EVENT_REASONS.replacingImage}`]);
  });

  it('phase patch from a stale Pod: 409, no event; the retry sets the phase and the condition, one event', async () => {
    const h = harness({ pod: makePod({ containers: [main('app', exited(0)), sidecar('proxy', 'running', [IGNORE_EXIT_CODE])] }) });
    // Our request asked the ignore-exit-code sidecar to stop: the phase follows (R23).
    await h.controller.reconcile(KEY);
    assert.equal(h.api.list<ContainerRecreateRequest>(requestPath('ns')).length, 1);
    h.cache.pod = projectPod(h.api.object<V1Pod>(POD)!);
    const fresh = h.api.object<V1Pod>(POD)!;
    h.api.set(POD, { ...fresh, metadata: { ...fresh.metadata, labels: { touched: 'yes' } } });
    await assert.rejects(h.controller.reconcile(KEY), (err) => isConflict(err));
    assert.deepEqual(await h.reasons(), [`Normal ${EVENT_REASONS.stopping}`], 'no event for the phase not set');
    h.cache.pod = undefined;
    await h.controller.reconcile(KEY);
    assert.deepEqual(h.api.lines({ method: 'patch' }), [`PATCH ${POD}/status 409`, `PATCH ${POD}/status 200`]);
    const status = h.api.object<V1Pod>(POD)?.status;
    assert.equal(status?.phase, 'Succeeded');
    assert.deepEqual(status?.conditions?.map((c) => `${c.type}=${c.status}`), [`${CONDITION_SIDECAR_TERMINATED}=True`]);
    assert.deepEqual(await h.reasons(), [`Normal ${EVENT_REASONS.stopping}`, `Normal ${EVENT_REASONS.phaseSet}`]);
  });
});

describe('SidecarController: the phase kubelet settled (R56)', () => {
  const allExited = () => makePod({ containers: [main('app', exited(0)), sidecar('proxy', exited(0))] });

  it('every container exited 0 as kubelet reports: Succeeded and the condition, compare-and-swap, no event', async () => {
    const h = harness({ pod: allExited() });
    await h.controller.reconcile(KEY);
    assert.deepEqual(h.api.lines({ method: 'patch' }), [`PATCH ${POD}/status 200`]);
    const status = h.api.object<V1Pod>(POD)?.status;
    assert.equal(status?.phase, 'Succeeded');
    assert.deepEqual(status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}`), [`${CONDITION_SIDECAR_TERMINATED}=True/AllContainersSucceeded`]);
    assert.deepEqual(await h.events(), []);
  });

  it('--settled-phase=false: kubelet writes it', async () => {
    const h = harness({ pod: allExited(), settledPhase: false });
    await h.controller.reconcile(KEY);
    assert.deepEqual(h.api.lines({ method: 'patch' }), []);
    assert.equal(h.api.object<V1Pod>(POD)?.status?.phase, 'Running');
  });
});

describe('SidecarController: remembered events are bounded by the Pods (R48)', () => {
  it('forget drops a Pod; its events may go out again for a new one of that name', async () => {
    const h = harness();
    h.api.inject({ method: 'create', path: REQUESTS }, 422, 2);
    await h.controller.reconcile(KEY);
    assert.equal(h.controller.rememberedPods(), 1);
    h.controller.forget(KEY);
    assert.equal(h.controller.rememberedPods(), 0);
    await h.controller.reconcile(KEY);
    assert.equal((await h.events()).length, 2);
  });
});

describe('SidecarController: Pods held by a well-known sidecar nobody marked (R52)', () => {
  const held = async () => (await metrics.heldPods.get()).values.filter((v) => v.value !== 0).map((v) => `${v.labels.sidecar}=${v.value}`);

  it('one Warning, no request, the Pod counted in the gauge while held; out of it once marked, or once forgotten', async () => {
    metrics.heldPods.reset();
    const h = harness({ pod: makePod({ containers: [main('app', exited(0)), main('istio-proxy')] }) });
    for (let i = 0; i < 3; i++) await h.controller.reconcile(KEY);
    assert.deepEqual(await h.reasons(), [`Warning ${EVENT_REASONS.unmarkedSidecarHoldsPod}`]);
    assert.deepEqual(h.creates(), []);
    assert.deepEqual(await held(), ['istio=1']);

    h.api.set(POD, makePod({ containers: [main('app', exited(0)), main('istio-proxy')], annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy' } }));
    await h.controller.reconcile(KEY);
    assert.equal(h.creates().length, 1, 'marked: a request stops it');
    assert.deepEqual(await held(), []);

    h.api.set(POD, makePod({ containers: [main('app', exited(0)), main('istio-proxy')] }));
    await h.controller.reconcile(KEY);
    assert.deepEqual(await held(), ['istio=1']);
    h.controller.forget(KEY);
    assert.deepEqual(await held(), []);
  });
});

describe('SidecarController: sidecar policies (R54)', () => {
  const policy = (name: string, spec: object, scope: 'cluster' | 'namespaced' = 'cluster', namespace = 'ns'): SidecarPolicy => {
    const parsed = parsePolicy({ metadata: { name, namespace }, spec: { mode: 'Enforce', ...spec } }, scope);
    assert.ok(parsed.valid);
    return parsed.policy;
  };
  const held = makePod({ containers: [main('app', exited(0)), main('mesh-proxy')] });

  it('Enforce: the policy-marked container is stopped through a request, and the event names the policy', async () => {
    const h = harness({ pod: held, policies: [policy('mesh', { containers: [{ name: 'mesh-*' }] })] });
    await h.controller.reconcile(KEY);
    assert.equal(h.creates().length, 1);
    const stopping = (await h.events()).find((e) => e.reason === EVENT_REASONS.stopping);
    assert.match(stopping!.message, /"mesh-proxy" \(ClusterSidecarPolicy\/mesh\)/);
    assert.deepEqual([...h.controller.matchedPods()], [['ClusterSidecarPolicy/mesh', 1]]);
    h.controller.forget(KEY);
    assert.deepEqual([...h.controller.matchedPods()], []);
  });

  it('Audit: nothing stopped; one Event per Pod naming the policy and what it would do, counted once by policy', async () => {
    metrics.policyAuditPods.reset();
    const h = harness({ pod: held, policies: [policy('mesh', { mode: 'Audit', containers: [{ name: 'mesh-proxy' }] }, 'namespaced')] });
    for (let i = 0; i < 3; i++) await h.controller.reconcile(KEY);
    assert.deepEqual(h.creates(), []);
    const audits = (await h.events()).filter((e) => e.reason === EVENT_REASONS.policyAudit);
    assert.equal(audits.length, 1);
    assert.match(audits[0]!.message, /would now stop "mesh-proxy" \(SidecarPolicy\/ns\/mesh, tier 0\) through ContainerRecreateRequests/);
    const counted = (await metrics.policyAuditPods.get()).values.map((v) => `${v.labels.policy}=${v.value}`);
    assert.deepEqual(counted, ['SidecarPolicy/ns=1'], 'namespaced policies are counted by namespace');
    assert.equal(h.actedOn.pendingFor('SidecarPolicy/ns/mesh')?.audit?.pods, 1, 'each policy\'s status by the policy itself');
  });

  it('Audit names the phase enforcing would set, from the mains as enforcing sees them (the audited containers are sidecars there)', async () => {
    const h = harness({ pod: held, policies: [policy('mesh', { mode: 'Audit', containers: [{ name: 'mesh-proxy', ignoreExitCode: true }] })] });
    await h.controller.reconcile(KEY);
    const audit = (await h.events()).find((e) => e.reason === EVENT_REASONS.policyAudit)!;
    assert.match(audit.message, /Then the Pod's phase would be set to Succeeded from the main containers, before the exit code of "mesh-proxy" could count/);
  });

  it('Enforce: each Pod counted once by policy, whatever the requests it takes', async () => {
    metrics.policyEnforcedPods.reset();
    const h = harness({ pod: held, policies: [policy('mesh', { containers: [{ name: 'mesh-proxy' }] })] });
    for (let i = 0; i < 3; i++) await h.controller.reconcile(KEY);
    assert.equal(h.creates().length, 1);
    const counted = (await metrics.policyEnforcedPods.get()).values.map((v) => `${v.labels.policy}=${v.value}`);
    assert.deepEqual(counted, ['ClusterSidecarPolicy/mesh=1']);
    assert.deepEqual(h.actedOn.pendingFor('ClusterSidecarPolicy/mesh'), { enforce: { pods: 1, recent: [{ namespace: 'ns', name: 'job-pod', time: new Date(NOW).toISOString() }] } }, 'for the policy\'s status');
  });

  it('Audit before Enforce: the first matching policy decides, so the container is only reported; Enforce first: it is stopped, and not reported', async () => {
    const audited = harness({
      pod: held,
      policies: [policy('a-audit', { mode: 'Audit', containers: [{ name: 'mesh-proxy' }] }), policy('b-enforce', { containers: [{ name: 'mesh-proxy' }] })],
    });
    await audited.controller.reconcile(KEY);
    assert.equal(audited.creates().length, 0);
    assert.ok((await audited.reasons()).includes(`Normal ${EVENT_REASONS.policyAudit}`));
    const enforced = harness({
      pod: held,
      policies: [policy('a-enforce', { containers: [{ name: 'mesh-proxy' }] }), policy('b-audit', { mode: 'Audit', containers: [{ name: 'mesh-proxy' }] })],
    });
    await enforced.controller.reconcile(KEY);
    assert.equal(enforced.creates().length, 1);
    assert.ok(!(await enforced.reasons()).includes(`Normal ${EVENT_REASONS.policyAudit}`));
  });
});

describe('SidecarController: swaps refused where no agent runs (R22)', () => {
  it('an image off --agentless-swap-images: no patch, one Warning, counted once per Pod; an allowed one is swapped and not counted', async () => {
    const refused = async () => (await metrics.swapsRefused.get()).values[0]?.value ?? 0;
    const before = await refused();
    const h = harness({ node: 'agentless', agentlessSwapImages: ['registry.example/quick-exit'], pod: makePod({ containers: [main('app', exited(0)), imageSidecar('proxy', 'evil.example/miner:1')] }) });
    for (let i = 0; i < 3; i++) await h.controller.reconcile(KEY);
    assert.deepEqual(h.api.lines({ method: 'patch' }), []);
    assert.deepEqual(await h.reasons(), [`Warning ${EVENT_REASONS.notStoppable}`]);
    assert.equal(await refused(), before + 1);

    const allowed = harness({ node: 'agentless', agentlessSwapImages: ['registry.example/quick-exit'], pod: makePod({ containers: [main('app', exited(0)), imageSidecar('proxy', 'registry.example/quick-exit:2')] }) });
    await allowed.controller.reconcile(KEY);
    assert.deepEqual(allowed.api.lines({ method: 'patch' }), [`PATCH ${POD} 200`]);
    assert.equal(await refused(), before + 1);
  });
});
