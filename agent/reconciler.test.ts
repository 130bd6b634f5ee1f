// The reconciler's I/O order against fakes: status write before hook and stop, the re-check of the
// runtime labels right before the stop, refusals, resumed stops, and a shutdown's drain.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EventRecorder, PodEvent } from '../common/events.ts';
import type { KubeClient } from '../common/kube/client.ts';
import type { Logger } from '../common/log.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRStatus } from '../api/container-recreate-request.ts';
import { MAX_STRATEGY_SECONDS } from '../api/container-recreate-request.ts';
import type { AgentMetrics } from './metrics.ts';
import type { AgentPod } from './pod.ts';
import { Reconciler } from './reconciler.ts';
import type { ContainerOwner, ContainerRuntime, RuntimeContainer } from './runtime/types.ts';

const KEY = 'ns/job-pod';
const OWN: ContainerOwner = { podUid: 'uid-1', podNamespace: 'ns', podName: 'job-pod', container: 'proxy' };

function agentPod(over: Partial<AgentPod> = {}): AgentPod {
  return {
    namespace: 'ns', name: 'job-pod', uid: 'uid-1', nodeName: 'node-a', phase: 'Running', restartPolicy: 'Never',
    terminationGracePeriodSeconds: 30, deleting: false,
    containers: [{ name: 'main' }, { name: 'proxy', preStop: { exec: { command: ['/bin/drain'] } } }],
    statuses: [
      { name: 'main', containerID: 'containerd://main-1', restartCount: 0, ready: false, state: 'terminated', exitCode: 0 },
      { name: 'proxy', containerID: 'containerd://proxy-1', restartCount: 0, ready: true, state: 'running' },
    ],
    ...over,
  };
}

function request(states?: ContainerRecreateState[], statusContextID = 'containerd://proxy-1'): ContainerRecreateRequest {
  return {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
    metadata: { name: 'r1', namespace: 'ns', uid: 'req-1', resourceVersion: '1', creationTimestamp: new Date().toISOString(), labels: { 'crr.sidecar-terminator.dev/pod-uid': 'uid-1' } },
    spec: { podName: 'job-pod', containers: [{ name: 'proxy', statusContext: { containerID: statusContextID, restartCount: 0 } }], activeDeadlineSeconds: 300 },
    status: states ? { phase: 'Recreating', containerRecreateStates: states } : undefined,
  };
}

interface Harness {
  reconciler: Reconciler;
  calls: string[];
  patches: CRRStatus[];
  events: PodEvent[];
  counts: Map<string, number>;
  stopTimeouts: number[];
  /** Resolves a stop held by `holdStops`. */
  release: () => void;
}

interface HarnessOptions {
  pod?: AgentPod;
  crr?: ContainerRecreateRequest;
  /** What the runtime answers for status(id), by call number (0-based). */
  status?: (id: string, call: number) => RuntimeContainer | undefined | Promise<RuntimeContainer | undefined>;
  holdStops?: boolean;
}

/** `owner` null: a container without kubelet's labels. */
function running(id: string, owner: ContainerOwner | null = OWN): RuntimeContainer {
  return { id, state: 'running', startedAtNs: 1n, finishedAtNs: 0n, ...(owner ? { owner } : {}) };
}

function harness(options: HarnessOptions = {}): Harness {
  const calls: string[] = [];
  const patches: CRRStatus[] = [];
  const events: PodEvent[] = [];
  const counts = new Map<string, number>();
  const stopTimeouts: number[] = [];
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let current = options.crr ?? request();
  let statusCalls = 0;

  const runtime: ContainerRuntime = {
    idPrefix: 'containerd',
    version: async () => ({ runtimeName: 'containerd', runtimeVersion: 'test' }),
    status: async (id) => {
      calls.push(`status ${id}`);
      return options.status ? options.status(id, statusCalls++) : running(id);
    },
    stop: async (id, timeoutSeconds) => {
      calls.push(`stop ${id}`);
      stopTimeouts.push(timeoutSeconds);
      if (options.holdStops) await held;
    },
    exec: async (id, command) => {
      calls.push(`exec ${id} ${command.join(' ')}`);
      return { exitCode: 0, stdout: '', stderr: '' };
    },
    close: () => {},
  };
  const client = {
    get: async () => {
      throw Object.assign(new Error('not found'), { code: 404 });
    },
    patch: async (_path: string, body: { status: CRRStatus }) => {
      calls.push(`patch ${body.status.phase}${body.status.containerRecreateStates?.some((s) => s.isKilled) ? ' isKilled' : ''}`);
      patches.push(body.status);
      const version = String(Number(current.metadata.resourceVersion) + 1);
      current = { ...current, metadata: { ...current.metadata, resourceVersion: version }, status: body.status };
      return current;
    },
  } as unknown as KubeClient;
  const counter = (name: string) => ({
    inc: (labels?: Record<string, string>) => {
      const key = `${name}${labels ? JSON.stringify(labels) : ''}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    },
    observe: () => {},
  });
  const metrics = {
    requestsCompleted: counter('completed'), requestsRefused: counter('refused'), stopsResumed: counter('resumed'),
    containerStops: counter('stops'), runtimeErrors: counter('runtimeErrors'), stopSeconds: counter('stopSeconds'),
  } as unknown as AgentMetrics;
  const quiet = { info: () => quiet, warn: () => quiet, error: () => quiet } as unknown as Logger;
  const pod = options.pod ?? agentPod();
  const cached = options.crr ?? request();
  const reconciler = new Reconciler({
    nodeName: 'node-a',
    client,
    cachedPod: () => pod,
    cachedRequests: () => [cached],
    runtimeFor: (prefix) => (prefix === 'containerd' ? runtime : undefined),
    events: { emit: (_ref: unknown, event: PodEvent) => events.push(event) } as unknown as EventRecorder,
    metrics,
    log: quiet,
    requeue: () => {},
  });
  return { reconciler, calls, patches, events, counts, stopTimeouts, release: () => release() };
}

describe('Reconciler', () => {
  it('records isKilled, checks the labels again, runs the Pod spec\'s hook, then stops: in that order', async () => {
    const h = harness();
    await h.reconciler.reconcile(KEY);
    assert.equal(await h.reconciler.drain(5_000), true);
    assert.deepEqual(h.calls, [
      'status proxy-1',
      'patch Recreating isKilled',
      'status proxy-1',
      'exec proxy-1 /bin/drain',
      'stop proxy-1',
    ]);
    assert.deepEqual(h.events.map((e) => e.reason), [EVENT_REASONS.killing]);
  });

  it('a forged statusContext while the Pod status has no ID: the runtime is not even asked, nothing stopped', async () => {
    const pod = agentPod({ statuses: [{ name: 'proxy', restartCount: 0, ready: false, state: 'waiting' }] });
    const h = harness({ pod, crr: request(undefined, 'containerd://victim') });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['patch Recreating']);
    assert.match(h.patches[0]?.containerRecreateStates?.[0]?.message ?? '', /container proxy has not started yet \(no container ID in the Pod status\)/);
  });

  it('runtime labels of another namespace: refused, completed, a Warning, a metric, nothing executed', async () => {
    const h = harness({ status: (id) => running(id, { ...OWN, podNamespace: 'kube-system' }) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Completed']);
    assert.match(h.patches[0]?.message ?? '', /^refused: .*kube-system\/job-pod.*; nothing was executed$/);
    assert.deepEqual(h.events.map((e) => [e.type, e.reason]), [['Warning', EVENT_REASONS.requestRefused]]);
    assert.equal(h.counts.get('refused{"reason":"runtime-owner-mismatch"}'), 1);
    assert.equal(h.counts.get('completed{"outcome":"refused"}'), 1);
  });

  it('labels checked again right before the stop: a mismatch then refuses, nothing executed', async () => {
    const h = harness({ status: (id, call) => (call === 0 ? running(id) : running(id, null)) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    // isKilled stays as recorded (a stop was ordered); the state says that nothing was executed.
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled', 'status proxy-1', 'patch Completed isKilled']);
    assert.equal(h.patches[1]?.containerRecreateStates?.[0]?.phase, 'Failed');
    assert.match(h.patches[1]?.message ?? '', /no kubelet labels.*nothing was executed$/);
    assert.deepEqual(h.events.map((e) => e.reason), [EVENT_REASONS.requestRefused]);
    assert.equal(h.counts.get('refused{"reason":"runtime-owner-missing"}'), 1);
  });

  it('resumes a stop an earlier agent began: no hook, no Killing event', async () => {
    const h = harness({ crr: request([{ name: 'proxy', phase: 'Recreating', isKilled: true }]) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'status proxy-1', 'stop proxy-1']);
    assert.deepEqual(h.events, []);
    assert.equal(h.counts.get('resumed'), 1);
  });

  it('caps the grace period handed to the runtime', async () => {
    const h = harness({ pod: agentPod({ terminationGracePeriodSeconds: 10 ** 9 }) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.equal(h.stopTimeouts.length, 1);
    assert.ok(h.stopTimeouts[0]! <= MAX_STRATEGY_SECONDS && h.stopTimeouts[0]! >= MAX_STRATEGY_SECONDS - 1, `timeout ${h.stopTimeouts[0]}`);
  });

  it('drain waits for a stop under way, then takes no new work', async () => {
    const h = harness({ holdStops: true });
    await h.reconciler.reconcile(KEY);
    assert.equal(h.reconciler.stopsInFlight(), 1);
    let drained: boolean | undefined;
    const draining = h.reconciler.drain(5_000).then((d) => {
      drained = d;
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(drained, undefined, 'still waiting for the stop');
    h.release();
    await draining;
    assert.equal(drained, true);
    assert.equal(h.reconciler.stopsInFlight(), 0);
    const before = h.calls.length;
    await h.reconciler.reconcile(KEY);
    assert.equal(h.calls.length, before, 'nothing done after the drain');
  });

  it('drain gives up after its bound', async () => {
    const h = harness({ holdStops: true });
    await h.reconciler.reconcile(KEY);
    assert.equal(await h.reconciler.drain(30), false);
    h.release();
  });

  it('a stop not yet recorded when the shutdown began is left whole to the next agent', async () => {
    let answer = (_c: RuntimeContainer) => {};
    const h = harness({ status: (id, call) => (call === 0 ? new Promise((resolve) => { answer = resolve; }) : running(id)) });
    const reconciling = h.reconciler.reconcile(KEY);
    await new Promise((r) => setTimeout(r, 10));
    const draining = h.reconciler.drain(5_000);
    answer(running('proxy-1'));
    await reconciling;
    assert.equal(await draining, true);
    assert.deepEqual(h.calls, ['status proxy-1']);
  });
});
