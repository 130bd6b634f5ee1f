// The reconciler's I/O against a fake runtime and the fake API server (test/support/fake-api.ts):
// the order of status write, hook and stop, the re-check of the runtime labels right before the
// stop, refusals, resumed stops, a shutdown's drain, and what the API server answers: a Pod or a
// request gone (404), a stale write (409), throttling, errors and no answer at all.
import { describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { EventRecorder } from '../common/events.ts';
import type { KubeApi, PatchType, Query } from '../common/kube/api.ts';
import { isConflict, isNotFound } from '../common/kube/errors.ts';
import { FakeKubeApi, networkError } from '../test/support/fake-api.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import type { Logger } from '../common/log.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { ContainerRecreateRequest, ContainerRecreateState, CRRStatus } from '../api/container-recreate-request.ts';
import { MAX_STRATEGY_SECONDS, requestPath } from '../api/container-recreate-request.ts';
import type { AgentMetrics } from './metrics.ts';
import type { AgentPod } from './pod.ts';
import { projectAgentPod } from './pod.ts';
import type { ReconcilerDeps } from './reconciler.ts';
import { POD_REQUESTS_PAGE_SIZE } from '../rules/requests.ts';
import { Reconciler } from './reconciler.ts';
import { STOPS_PER_POD } from './stops.ts';
import { FIRST_RECHECK_MS } from './returned-stops.ts';
import type { ContainerOwner, ExecResult, RuntimeContainer } from './runtime/types.ts';
import type { PodProjection } from '../rules/projection.ts';
import type { PolicyMarker } from '../rules/policy-marker.ts';
import { fakeRuntime } from '../test/support/fake-runtime.ts';
import type { ContainerID, RuntimeContainerID } from '../api/container-id.ts';
import { runtimeContainerID } from '../api/container-id.ts';
import { DiscoveredRuntimes } from './runtime/discover.ts';
import type { RuntimeAnswer } from './fast-path/handoff.ts';
import type { CreatedOnExit } from './timeline.ts';

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
  /** What it was built with: a second Reconciler on them is a restarted agent. */
  reconcilerDeps: ReconcilerDeps;
  /** The fake API server: the request is stored at REQUEST; Pods are there only when a test puts them. */
  api: FakeKubeApi;
  /** Runtime calls and status writes, in order. */
  calls: string[];
  /** The statuses written, in order (the bodies of the status patches sent, failed ones too). */
  patches: CRRStatus[];
  /** The Pod's events as recorded in the API. */
  events: () => Promise<{ type: string; reason: string }[]>;
  counts: Map<string, number>;
  stopTimeouts: number[];
  /** The signal each stop was sent with (undefined: the container's own). */
  stopSignals: (string | undefined)[];
  /** The requests the watch cache holds: what the API has now, unless a test pins a stale copy. */
  cache: { stale?: ContainerRecreateRequest[] };
  /** The fields of each 'container stopped' log line. */
  stoppedLogs: Record<string, unknown>[];
  /** Resolves a stop held by `holdStops`. */
  release: () => void;
}

interface HarnessOptions {
  /** The Pod in the watch cache; null: not there. */
  pod?: AgentPod | null;
  crr?: ContainerRecreateRequest;
  /** What the runtime answers for status(id), by call number (0-based). */
  status?: (id: RuntimeContainerID, call: number) => RuntimeContainer | undefined | Promise<RuntimeContainer | undefined>;
  /** What the runtime's stop does (default: stops). */
  stop?: () => Promise<void>;
  holdStops?: boolean;
  /** The reconciler's clock (default: Date.now). */
  now?: () => number;
  /** A cluster policy's stop command for `proxy` (R54), in the projection of the Pod of `uid` (default the Pod's). */
  stopCommand?: { command: string[]; uid?: string };
  /** What the runtime's exec answers (default: exit 0). */
  exec?: (id: RuntimeContainerID, command: string[]) => Promise<ExecResult>;
}

const REQUEST = requestPath('ns', 'r1');

/** `owner` null: a container without kubelet's labels. */
function running(id: string, owner: ContainerOwner | null = OWN): RuntimeContainer {
  return { id: runtimeContainerID(id), state: 'running', startedAtNs: 1n, finishedAtNs: 0n, ...(owner ? { owner } : {}) };
}

function harness(options: HarnessOptions = {}): Harness {
  const calls: string[] = [];
  const counts = new Map<string, number>();
  const stopTimeouts: number[] = [];
  const stopSignals: (string | undefined)[] = [];
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const api = new FakeKubeApi();
  api.set(REQUEST, options.crr ?? request());
  const cache: Harness['cache'] = {};

  const runtime = fakeRuntime({
    calls,
    status: options.status ?? ((id) => running(id)),
    stop: async (_id, timeoutSeconds, signal) => {
      stopTimeouts.push(timeoutSeconds);
      stopSignals.push(signal);
      if (options.holdStops) await held;
      await options.stop?.();
    },
    ...(options.exec ? { exec: options.exec } : {}),
  });
  // The status writes are logged beside the runtime calls, to check their order.
  const client: Pick<KubeApi, 'get' | 'patch'> = {
    get: <T>(path: string, query?: Query) => api.get<T>(path, query).then((answer) => asServed(path, answer)),
    patch: <T>(path: string, body: unknown, type: PatchType) => {
      const { status } = body as { status: CRRStatus };
      calls.push(`patch ${status.phase}${status.containerRecreateStates?.some((s) => s.isKilled) ? ' isKilled' : ''}`);
      return api.patch<T>(path, body, type).then((answer) => asServed(path, answer));
    },
  };
  const counter = (name: string) => ({
    inc: (labels?: Record<string, string>) => {
      const key = `${name}${labels ? JSON.stringify(labels) : ''}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    },
    observe: () => counts.set(`${name} observed`, (counts.get(`${name} observed`) ?? 0) + 1),
  });
  const metrics = {
    requestsCompleted: counter('completed'), requestsRefused: counter('refused'), stopsResumed: counter('resumed'),
    containerStops: counter('stops'), runtimeErrors: counter('runtimeErrors'), stopSeconds: counter('stopSeconds'),
    stopSteps: counter('steps'), exitToStopSent: counter('exitToStopSent'),
  } as unknown as AgentMetrics;
  const pod = options.pod === undefined ? agentPod() : options.pod;
  const recorder = new EventRecorder(api, 'sidecar-terminator-agent', quiet, { host: 'node-a' });
  const stoppedLogs: Record<string, unknown>[] = [];
  const log = {
    ...quiet,
    info: (message: string, fields: Record<string, unknown>) => {
      if (message === 'container stopped') stoppedLogs.push(fields);
      return log;
    },
  } as unknown as Logger;
  const reconcilerDeps: ReconcilerDeps = {
    nodeName: 'node-a',
    client,
    cache: {
      agentPod: () => pod ?? undefined,
      requests: (namespace) => asServed(requestPath(namespace), cache.stale ?? api.list<ContainerRecreateRequest>(requestPath(namespace))),
      hasRequests: () => false,
      sidecarPod: () => policyProjection(options.stopCommand),
    },
    forContainer: (containerID) => new DiscoveredRuntimes([runtime]).forContainer(containerID),
    events: recorder,
    metrics,
    log,
    requeue: () => {},
    ...(options.now ? { now: options.now } : {}),
  };
  const reconciler = new Reconciler(reconcilerDeps);
  const events = async () => {
    await recorder.flushed();
    return api.list<{ type: string; reason: string }>(resourcePath('v1', 'events', 'ns')).map(({ type, reason }) => ({ type, reason }));
  };
  const patches = () => api.calls.filter((c) => c.method === 'patch').map((c) => (c.body as { status: CRRStatus }).status);
  return {
    reconciler, reconcilerDeps, api, calls, events, counts, stopTimeouts, stopSignals, cache, stoppedLogs, release: () => release(),
    get patches() { return patches(); },
  };
}

/**
 * A request as the API server sends it, in answers and watch events: a custom resource's keys
 * sorted (Go maps), whatever order they were written in. The fake keeps the writer's order.
 */
function asServed<T>(path: string, answer: T): T {
  const sorted = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sorted);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sorted((value as Record<string, unknown>)[key])]));
  };
  return path.startsWith(requestPath('ns')) ? sorted(answer) as T : answer;
}

/** The rules' projection of the Pod as far as stop commands read it: `proxy` marked by a cluster policy naming one. */
function policyProjection(stopCommand: HarnessOptions['stopCommand']): PodProjection | undefined {
  if (!stopCommand) return undefined;
  const policy: PolicyMarker = { policy: 'ClusterSidecarPolicy/mesh', mode: 'Enforce', ignoreExitCode: false, stopTier: 0, stopCommand: stopCommand.command };
  return { uid: stopCommand.uid ?? 'uid-1', containers: [{ name: 'main' }, { name: 'proxy', policy }] } as unknown as PodProjection;
}

const quiet = { info: () => quiet, warn: () => quiet, error: () => quiet } as unknown as Logger;
const reasons = async (h: Harness) => (await h.events()).map((e) => e.reason);


const NO_TIMING: CreatedOnExit = { exitEventAtMs: 0, createdAtMs: 0, apiCreateMs: 0 };

/** The fast path's hand-off of a request it created, with the runtime's answers (arrived at `atMs`, default now). */
function handoff(request: ContainerRecreateRequest, timing: CreatedOnExit, answers: [string, RuntimeContainer][] = [], atMs = Date.now()) {
  return { request, timing, answers: new Map(answers.map(([id, container]) => [id as ContainerID, Promise.resolve({ container, atMs })])) };
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
    assert.deepEqual(await reasons(h), [EVENT_REASONS.killing]);
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
    assert.deepEqual(await h.events(), [{ type: 'Warning', reason: EVENT_REASONS.requestRefused }]);
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
    assert.deepEqual(await reasons(h), [EVENT_REASONS.requestRefused]);
    assert.equal(h.counts.get('refused{"reason":"runtime-owner-missing"}'), 1);
  });

  it('R40: resumes a stop an earlier agent began: no hook, no Killing event', async () => {
    const h = harness({ crr: request([{ name: 'proxy', phase: 'Recreating', isKilled: true }]) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    // No hook to run again: the stop is sent at once, on the view just taken.
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1']);
    assert.deepEqual(await h.events(), []);
    assert.equal(h.counts.get('resumed'), 1);
  });

  it('caps the grace period handed to the runtime', async () => {
    const h = harness({ pod: agentPod({ terminationGracePeriodSeconds: 10 ** 9 }) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.equal(h.stopTimeouts.length, 1);
    assert.ok(h.stopTimeouts[0]! <= MAX_STRATEGY_SECONDS && h.stopTimeouts[0]! >= MAX_STRATEGY_SECONDS - 1, `timeout ${h.stopTimeouts[0]}`);
  });

  it('R42: drain waits for a stop under way, then takes no new work', async () => {
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

  it('R42: drain gives up after its bound', async () => {
    const h = harness({ holdStops: true });
    await h.reconciler.reconcile(KEY);
    assert.equal(await h.reconciler.drain(30), false);
    h.release();
  });

  it('R42: a stop not yet recorded when the shutdown began is left whole to the next agent', async () => {
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

/** The Pod as the API server has it (agentPod() is its projection). */
function apiPod(uid = 'uid-1'): V1Pod {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { namespace: 'ns', name: 'job-pod', uid },
    spec: {
      nodeName: 'node-a', restartPolicy: 'Never', terminationGracePeriodSeconds: 30,
      containers: [{ name: 'main', image: 'app' }, { name: 'proxy', image: 'proxy', lifecycle: { preStop: { exec: { command: ['/bin/drain'] } } } }],
    },
    status: {
      phase: 'Running',
      containerStatuses: [
        { name: 'main', containerID: 'containerd://main-1', restartCount: 0, ready: false, image: 'app', imageID: '', state: { terminated: { exitCode: 0 } } },
        { name: 'proxy', containerID: 'containerd://proxy-1', restartCount: 0, ready: true, image: 'proxy', imageID: '', state: { running: {} } },
      ],
    },
  };
}

const POD_PATH = podPath('ns', 'job-pod');
const STOPPED = ['status proxy-1', 'patch Recreating isKilled', 'status proxy-1', 'exec proxy-1 /bin/drain', 'stop proxy-1'];

describe('Reconciler: the API server\'s answers', () => {
  const rows: { name: string; cached: AgentPod | null; inApi: boolean; stops: boolean }[] = [
    { name: 'the Pod not cached, gone from the API (404)', cached: null, inApi: false, stops: false },
    { name: 'an older Pod of that name cached, the request\'s gone from the API (404)', cached: agentPod({ uid: 'old-uid' }), inApi: false, stops: false },
    { name: 'an older Pod of that name cached, the request\'s in the API', cached: agentPod({ uid: 'old-uid' }), inApi: true, stops: true },
    { name: 'the Pod not cached yet, in the API', cached: null, inApi: true, stops: true },
  ];
  for (const row of rows) {
    it(`${row.name}: ${row.stops ? 'read from the API and stopped' : 'the request is completed, nothing executed, no event'}`, async () => {
      const h = harness({ pod: row.cached });
      if (row.inApi) h.api.set(POD_PATH, apiPod());
      await h.reconciler.reconcile(KEY);
      await h.reconciler.drain(5_000);
      // A stop with a hook also asks whether another request of the Pod started the hook already.
      const hookCheck = row.stops ? [`GET ${requestPath('ns')} 200`] : [];
      assert.deepEqual(h.api.lines({ method: 'get' }), [`GET ${POD_PATH} ${row.inApi ? 200 : 404}`, ...hookCheck]);
      if (row.stops) {
        assert.deepEqual(h.calls, STOPPED);
        return;
      }
      assert.deepEqual(h.calls, ['patch Completed']);
      const stored = h.api.object<ContainerRecreateRequest>(REQUEST);
      assert.equal(stored?.status?.phase, 'Completed');
      assert.equal(stored?.status?.message, 'Pod ns/job-pod not found');
      assert.deepEqual(await h.events(), []);
      assert.equal(h.counts.get('completed{"outcome":"refused"}'), 1);
    });
  }

  it('a hook too large to cache: the Pod is read from the API for the stop, and the hook run', async () => {
    const big = ['/bin/drain', ...Array.from({ length: 200 }, () => 'x'.repeat(40))];
    const fat = apiPod();
    fat.spec!.containers[1]!.lifecycle = { preStop: { exec: { command: big } } };
    const cached = projectAgentPod(fat);
    assert.deepEqual(cached.containers[1], { name: 'proxy', preStopNotKept: true, ports: undefined });
    const h = harness({ pod: cached });
    h.api.set(POD_PATH, fat);
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.api.lines({ method: 'get' })[0], `GET ${POD_PATH} 200`);
    assert.ok(h.calls.includes(`exec proxy-1 ${big.join(' ')}`), h.calls.join('\n'));
  });

  it('a request for Pod "." (stored before the CRD\'s pattern): completed, no read', async () => {
    const r = request();
    r.spec.podName = '.';
    const h = harness({ pod: null, crr: r });
    await h.reconciler.reconcile('ns/.');
    assert.deepEqual(h.api.lines({ method: 'get' }), []);
    assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)?.status?.phase, 'Completed');
  });

  it('a Pod read that fails (500, no answer) fails the reconcile for the queue to retry: nothing written', async () => {
    for (const fault of [500, networkError()]) {
      const h = harness({ pod: null });
      h.api.inject({ method: 'get', path: POD_PATH }, fault);
      await assert.rejects(h.reconciler.reconcile(KEY));
      assert.deepEqual(h.calls, []);
      assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)?.status, undefined);
    }
  });

  for (const [name, fault] of [['answered 409', 409], ['answered 429', 429], ['answered 500', 500], ['got no answer', networkError()]] as const) {
    it(`the isKilled write ${name}: the reconcile fails, nothing is stopped; the queue's retry stops once`, async () => {
      const h = harness();
      h.api.inject({ method: 'patch', path: `${REQUEST}/status` }, fault);
      await assert.rejects(h.reconciler.reconcile(KEY));
      assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled']);
      assert.equal(h.reconciler.stopsInFlight(), 0);
      assert.deepEqual(await h.events(), []);
      await h.reconciler.reconcile(KEY);
      await h.reconciler.drain(5_000);
      assert.deepEqual(h.calls.slice(2), STOPPED);
      assert.deepEqual(await reasons(h), [EVENT_REASONS.killing]);
    });
  }

  it('a stale cache (the controller wrote since): 409, nothing stopped; the retry from the fresh request stops', async () => {
    const h = harness();
    const cached = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    h.cache.stale = [cached];
    h.api.set(REQUEST, { ...cached, metadata: { ...cached.metadata, annotations: { 'written-by': 'controller' } } });
    await assert.rejects(h.reconciler.reconcile(KEY), (err) => isConflict(err));
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled']);
    h.cache.stale = undefined; // the watch brings the controller's write
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls.slice(2), STOPPED);
    assert.deepEqual(h.api.lines({ method: 'patch' }), [`PATCH ${REQUEST}/status 409`, `PATCH ${REQUEST}/status 200`]);
    const stored = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    assert.equal(stored.metadata.annotations?.['written-by'], 'controller');
    assert.equal(stored.status?.containerRecreateStates?.[0]?.isKilled, true);
  });

  it('a stale cache while the controller completed the request: 409, and the retry stops nothing', async () => {
    const h = harness();
    const cached = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    h.cache.stale = [cached];
    h.api.set(REQUEST, { ...cached, status: { phase: 'Completed', message: 'deadline passed' } });
    await assert.rejects(h.reconciler.reconcile(KEY), (err) => isConflict(err));
    h.cache.stale = undefined;
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled']);
    assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)?.status?.message, 'deadline passed');
  });

  it('a request deleted meanwhile (404 on the write): nothing stopped, and nothing more once the cache has caught up', async () => {
    const h = harness();
    h.cache.stale = [h.api.object<ContainerRecreateRequest>(REQUEST)!];
    h.api.remove(REQUEST);
    await assert.rejects(h.reconciler.reconcile(KEY), (err) => isNotFound(err));
    h.cache.stale = undefined;
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled']);
  });

  it('a failed stop is recorded over the latest status: a conflict with another writer is retried', async () => {
    const h = harness({
      stop: async () => {
        // Another writer goes first: the failure's write conflicts once.
        h.api.inject({ method: 'patch' }, () => {
          const latest = h.api.object<ContainerRecreateRequest>(REQUEST)!;
          h.api.set(REQUEST, { ...latest, metadata: { ...latest.metadata, annotations: { 'written-by': 'controller' } } });
        });
        throw new Error('container did not stop');
      },
    });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.api.lines({ method: 'patch' }), [`PATCH ${REQUEST}/status 200`, `PATCH ${REQUEST}/status 409`, `PATCH ${REQUEST}/status 200`]);
    const stored = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    assert.equal(stored.metadata.annotations?.['written-by'], 'controller');
    assert.deepEqual(stored.status?.containerRecreateStates, [{ name: 'proxy', phase: 'Failed', isKilled: true, preStopContainerID: 'containerd://proxy-1', message: 'stop: container did not stop' }]);
    assert.equal(h.counts.get('stops{"result":"failed"}'), 1);
  });

  it('refused right before the stop while every write conflicts: the refusal is counted, no Warning for what was not recorded', async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const h = harness({ status: (id, call) => (call === 0 ? running(id) : running(id, null)) });
      h.api.inject({ method: 'patch' }, () => {}); // the isKilled write goes through
      h.api.inject({ method: 'patch' }, 409, Infinity);
      await h.reconciler.reconcile(KEY);
      // The five tries of updateLatest, 100 ms more apart each time.
      const draining = h.reconciler.drain(60_000);
      for (let i = 0; i < 50; i++) {
        await new Promise((r) => setImmediate(r));
        mock.timers.tick(100);
      }
      assert.equal(await draining, true);
      assert.deepEqual(h.api.lines({ method: 'patch' }).map((l) => l.split(' ').at(-1)), ['200', '409', '409', '409', '409', '409']);
      assert.equal(h.counts.get('refused{"reason":"runtime-owner-missing"}'), 1);
      assert.deepEqual(await h.events(), []);
    } finally {
      mock.timers.reset();
    }
  });
});

/** The Pod without the proxy's preStop hook. */
const hookless = () => agentPod({ containers: [{ name: 'main' }, { name: 'proxy' }] });

describe('Reconciler: the worker given back once only status writes are left (R39)', () => {
  /** The harness with every status write held until `open()`; `released` says whether the worker was given back. */
  function heldWrites(pod?: AgentPod) {
    const h = harness(pod ? { pod } : {});
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const patch = h.reconcilerDeps.client.patch;
    h.reconcilerDeps.client.patch = async (...args) => {
      await gate;
      return patch(...args);
    };
    const worker = { released: false, release() { this.released = true; } };
    return { h, worker, open };
  }
  const settle = async () => {
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  it('a stop without a hook: given back once the stop is sent, before the status write, which still lands', async () => {
    const { h, worker, open } = heldWrites(hookless());
    const run = h.reconciler.reconcile(KEY, worker);
    await settle();
    assert.ok(h.calls.includes('stop proxy-1'), h.calls.join(', '));
    assert.equal(worker.released, true);
    assert.deepEqual(h.patches, [], 'the write is still held');
    open();
    await run;
    await h.reconciler.drain(5_000);
    assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)?.status?.containerRecreateStates?.[0]?.isKilled, true);
  });

  it('a stop with a hook: kept until the write (isKilled before the hook) is done', async () => {
    const { h, worker, open } = heldWrites();
    const run = h.reconciler.reconcile(KEY, worker);
    await settle();
    assert.equal(worker.released, false);
    assert.ok(!h.calls.some((c) => c.startsWith('exec') || c.startsWith('stop')), h.calls.join(', '));
    open();
    await run;
    await h.reconciler.drain(5_000);
    assert.equal(worker.released, false);
    assert.ok(h.calls.includes('stop proxy-1'), h.calls.join(', '));
  });
});

describe('Reconciler: a stop without a hook (R39)', () => {
  it('is sent at once, on the runtime view just taken, beside the isKilled write: one status call, one stop', async () => {
    const h = harness({ pod: hookless() });
    await h.reconciler.reconcile(KEY);
    assert.equal(await h.reconciler.drain(5_000), true);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled']);
    assert.deepEqual(await reasons(h), [EVENT_REASONS.killing]);
    assert.equal(h.counts.get('stops{"result":"stopped"}'), 1);
  });

  it('the isKilled write fails after the stop was sent: the retry finds the container exited and records it, no second stop', async () => {
    let stopped = false;
    const h = harness({
      pod: hookless(),
      status: (id) => (stopped ? { ...running(id), state: 'exited', exitCode: 0 } : running(id)),
      stop: async () => { stopped = true; },
    });
    h.api.inject({ method: 'patch', path: `${REQUEST}/status` }, 500);
    await assert.rejects(h.reconciler.reconcile(KEY));
    await h.reconciler.drain(5_000);
    const retry = new Reconciler(h.reconcilerDeps);
    await retry.reconcile(KEY);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled', 'status proxy-1', 'patch Completed']);
    const stored = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    assert.deepEqual(stored.status?.containerRecreateStates, [{ name: 'proxy', phase: 'Succeeded', isKilled: false, exitCode: 0 }]);
  });

  it('an agent that died after the stop was sent, before isKilled was recorded: the next one stops again (harmless: the same ID), with no hook to repeat', async () => {
    const h = harness({ pod: hookless() });
    h.api.inject({ method: 'patch', path: `${REQUEST}/status` }, networkError());
    await assert.rejects(h.reconciler.reconcile(KEY));
    await h.reconciler.drain(5_000);
    // A new process: nothing remembered but what the API has (isKilled not recorded).
    const next = new Reconciler(h.reconcilerDeps);
    await next.reconcile(KEY);
    await next.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled', 'status proxy-1', 'stop proxy-1', 'patch Recreating isKilled']);
    assert.ok(!h.calls.some((c) => c.startsWith('exec')));
  });

  it('a stop under way is not sent again by a reconcile meanwhile', async () => {
    const h = harness({ pod: hookless(), holdStops: true });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.reconcile(KEY);
    h.release();
    await h.reconciler.drain(5_000);
    assert.equal(h.calls.filter((c) => c.startsWith('stop')).length, 1);
  });

  it(`R39: a Pod's stops are sent ${STOPS_PER_POD} at a time (one containerd 2 shim serves the whole Pod), the next as one ends`, async () => {
    const names = Array.from({ length: STOPS_PER_POD + 4 }, (_, i) => `side-${i}`);
    const pod = agentPod({
      containers: [{ name: 'main' }, ...names.map((name) => ({ name }))],
      statuses: [agentPod().statuses[0]!, ...names.map((name) => ({ name, containerID: `containerd://${name}-1`, restartCount: 0, ready: true, state: 'running' as const }))],
    });
    const crr = request();
    crr.spec.containers = names.map((name) => ({ name, statusContext: { containerID: `containerd://${name}-1`, restartCount: 0 } }));
    const h = harness({ pod, crr, holdStops: true, status: (id) => running(id, { ...OWN, container: id.replace(/-1$/, '') }) });
    await h.reconciler.reconcile(KEY);
    const stops = () => h.calls.filter((c) => c.startsWith('stop')).length;
    assert.equal(stops(), STOPS_PER_POD);
    h.release();
    assert.equal(await h.reconciler.drain(5_000), true);
    assert.equal(stops(), names.length);
  });

  it('R43, R44: a request this agent created is carried out before its watch event, once, and logged with its timeline', async () => {
    const h = harness({ pod: hookless() });
    const created = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    h.cache.stale = [];
    const now = Date.now();
    h.reconciler.adopt(handoff(created, { mainExitedAtMs: now - 20, exitEventAtMs: now - 18, createdAtMs: now, apiCreateMs: 15 }));
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled']);
    // The watch delivers it, then the status written: the cache is the truth again; nothing is repeated.
    h.cache.stale = undefined;
    await h.reconciler.reconcile(KEY);
    assert.equal(h.calls.filter((c) => c.startsWith('stop')).length, 1);
    const timeline = h.stoppedLogs[0]?.timeline as Record<string, number>;
    assert.deepEqual(Object.keys(timeline), ['exitEvent', 'requestCreated', 'apiCreate', 'acting', 'runtimeCheck', 'stopSent', 'containerExited', 'exitToStopSent']);
    assert.equal(timeline.exitEvent, 2);
    assert.equal(timeline.apiCreate, 15);
    assert.ok(timeline.exitToStopSent! >= 20);
    assert.equal(h.counts.get('exitToStopSent observed'), 1);
    assert.equal(h.counts.get('steps observed'), 3, 'acting, stop_sent, container_exited (no hook)');
  });

  it('with the runtime\'s answer handed over: not asked again before the stop, whether the create or the watch brings the request first', async () => {
    for (const firstBy of ['create', 'watch']) {
      const h = harness({ pod: hookless() });
      if (firstBy === 'create') h.cache.stale = [];
      h.reconciler.adopt(handoff(h.api.object<ContainerRecreateRequest>(REQUEST)!, NO_TIMING, [['containerd://proxy-1', running('proxy-1')]]));
      await h.reconciler.reconcile(KEY);
      while (h.reconciler.stopsInFlight() > 0) await new Promise((r) => setTimeout(r, 1));
      assert.deepEqual(h.calls, ['stop proxy-1', 'patch Recreating isKilled'], firstBy);
      // Used once: the next look asks the runtime.
      await h.reconciler.reconcile(KEY);
      await h.reconciler.drain(5_000);
      assert.equal(h.calls[2], 'status proxy-1', `${firstBy}: ${h.calls.join(', ')}`);
    }
  });

  it('an answer still on its way when the reconcile plans is waited for, not asked again', async () => {
    const h = harness({ pod: hookless() });
    let arrive: (answer: RuntimeAnswer) => void = () => {};
    const coming = new Promise<RuntimeAnswer>((resolve) => { arrive = resolve; });
    h.reconciler.adopt({ request: h.api.object<ContainerRecreateRequest>(REQUEST)!, answers: new Map([['containerd://proxy-1' as ContainerID, coming]]), timing: NO_TIMING });
    const reconciled = h.reconciler.reconcile(KEY);
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(h.calls, []);
    arrive({ container: running('proxy-1'), atMs: Date.now() });
    await reconciled;
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['stop proxy-1', 'patch Recreating isKilled']);
  });

  it('an answer about another container ID, or labels naming another Pod, is not taken for the target\'s', async () => {
    const other = harness({ pod: hookless() });
    other.reconciler.adopt(handoff(other.api.object<ContainerRecreateRequest>(REQUEST)!, NO_TIMING, [['containerd://proxy-0', running('proxy-0')]]));
    await other.reconciler.reconcile(KEY);
    await other.reconciler.drain(5_000);
    assert.deepEqual(other.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled']);

    const forged = harness({ pod: hookless() });
    forged.reconciler.adopt(handoff(forged.api.object<ContainerRecreateRequest>(REQUEST)!, NO_TIMING, [['containerd://proxy-1', running('proxy-1', { ...OWN, podName: 'victim' })]]));
    await forged.reconciler.reconcile(KEY);
    await forged.reconciler.drain(5_000);
    assert.deepEqual(forged.calls, ['patch Completed']);
    assert.equal(forged.counts.get('refused{"reason":"runtime-owner-mismatch"}'), 1);
  });

  it('an answer that arrived more than a second before the reconcile is not used', async () => {
    let now = 1_000_000;
    const h = harness({ pod: hookless(), now: () => now });
    h.reconciler.adopt(handoff(h.api.object<ContainerRecreateRequest>(REQUEST)!, NO_TIMING, [['containerd://proxy-1', running('proxy-1')]], now));
    now += 1_001;
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled']);
  });

  it('an adopted request of another Pod is not acted on for this one', async () => {
    const h = harness({ pod: hookless() });
    const created = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    h.cache.stale = [];
    h.reconciler.adopt(handoff({ ...created, spec: { ...created.spec, podName: 'other-pod' } }, NO_TIMING));
    await h.reconciler.reconcile(KEY);
    assert.deepEqual(h.calls, []);
  });
});

describe('Reconciler: status writes per Job (R37, R39, R43)', () => {
  // One Job's request, looked at again by everything that wakes its Pod while the stop is under way
  // (the watch bringing the request and the agent's own write, kubelet reporting the main's exit),
  // then when the stop returns and when the watch brings the outcome. The rules need two writes:
  // isKilled (before a hook, beside a stop alone), then the outcome.
  const rows: { name: string; pod: () => AgentPod; first: 'handed over' | 'watch' | 'watch, then handed over' }[] = [
    { name: 'fast path: handed over, then the watch', pod: hookless, first: 'handed over' },
    { name: 'fast path: the watch before the create\'s answer', pod: hookless, first: 'watch, then handed over' },
    { name: 'created by the controller', pod: hookless, first: 'watch' },
    { name: 'created by the controller, a preStop hook', pod: agentPod, first: 'watch' },
  ];
  for (const row of rows) {
    it(`${row.name}: isKilled, then the outcome; one stop, one Killing event`, async () => {
      let exited = false;
      const h = harness({
        pod: row.pod(), holdStops: true,
        status: (id) => (exited ? { ...running(id), state: 'exited', exitCode: 143 } : running(id)),
        stop: async () => { exited = true; },
      });
      const handOver = () => h.reconciler.adopt(handoff(h.api.object<ContainerRecreateRequest>(REQUEST)!, NO_TIMING, [['containerd://proxy-1', running('proxy-1')]]));
      if (row.first === 'handed over') {
        h.cache.stale = [];
        handOver();
      }
      await h.reconciler.reconcile(KEY);
      if (row.first === 'watch, then handed over') handOver();
      h.cache.stale = undefined;
      await h.reconciler.reconcile(KEY); // the watch: the request, the isKilled write
      await h.reconciler.reconcile(KEY); // kubelet reports the main's exit
      h.release();
      while (h.reconciler.stopsInFlight() > 0) await new Promise((r) => setTimeout(r, 1));
      await h.reconciler.reconcile(KEY); // the stop returned
      await h.reconciler.reconcile(KEY); // the watch: the outcome
      await h.reconciler.drain(5_000);
      assert.deepEqual(h.calls.filter((c) => c.startsWith('patch')), ['patch Recreating isKilled', 'patch Completed isKilled']);
      assert.deepEqual(h.api.lines({ method: 'patch' }), [`PATCH ${REQUEST}/status 200`, `PATCH ${REQUEST}/status 200`]);
      assert.deepEqual(h.api.object<ContainerRecreateRequest>(REQUEST)?.status?.containerRecreateStates?.map(({ phase, isKilled, exitCode }) => ({ phase, isKilled, exitCode })),
        [{ phase: 'Succeeded', isKilled: true, exitCode: 143 }]);
      assert.equal(h.calls.filter((c) => c.startsWith('stop')).length, 1);
      assert.deepEqual(await reasons(h), [EVENT_REASONS.killing]);
      assert.equal(h.counts.get('resumed'), undefined);
    });
  }
});

describe('Reconciler: stop semantics as kubelet\'s, and hooks it does not run (R38)', () => {
  it('the Pod spec\'s stopSignal is handed to the runtime with the stop', async () => {
    const h = harness({ pod: agentPod({ containers: [{ name: 'main' }, { name: 'proxy', stopSignal: 'SIGUSR1' }] }) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.stopSignals, ['SIGUSR1']);
  });

  for (const [name, preStop, httpHooks] of [
    ['a tcpSocket hook', { tcpSocket: { port: 22 } }, true],
    ['a hook kind unknown to the agent', { grpc: { port: 9000 } }, true],
    ['an httpGet hook with HTTP hooks turned off', { httpGet: { port: 8080 } }, false],
  ] as const) {
    it(`${name}: not run, a PreStopHookNotRun Warning on the Pod, and the stop goes on at once`, async () => {
      const h = harness({ pod: agentPod({ containers: [{ name: 'main' }, { name: 'proxy', preStop: preStop as object }] }) });
      const reconciler = new Reconciler({ ...h.reconcilerDeps, httpHooks });
      await reconciler.reconcile(KEY);
      await reconciler.drain(5_000);
      assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'patch Recreating isKilled']);
      assert.deepEqual(await h.events(), [{ type: 'Normal', reason: EVENT_REASONS.killing }, { type: 'Warning', reason: EVENT_REASONS.preStopHookNotRun }]);
    });
  }

  it('R39: a hook runs at most once per container: a request past its deadline while the agent was down, then the next request', async () => {
    // The first agent records isKilled and the hook's container, runs the hook, and dies before the stop.
    const h = harness({ stop: () => new Promise(() => {}) });
    await h.reconciler.reconcile(KEY);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(h.calls.filter((c) => c.startsWith('exec')), ['exec proxy-1 /bin/drain']);
    const first = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    assert.equal(first.status?.containerRecreateStates?.[0]?.preStopContainerID, 'containerd://proxy-1');
    // Its deadline passes (the controller completes it); the controller creates the next attempt.
    h.api.set(REQUEST, { ...first, status: { ...first.status, phase: 'Completed', message: 'activeDeadlineSeconds passed' } });
    const second = request();
    h.api.set(requestPath('ns', 'r2'), { ...second, metadata: { ...second.metadata, name: 'r2', uid: 'req-2', creationTimestamp: new Date(Date.now() + 1000).toISOString() } });
    const next = new Reconciler({ ...h.reconcilerDeps });
    h.calls.length = 0;
    const stops = h.stopTimeouts.length;
    await next.reconcile(KEY);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(h.calls.filter((c) => c.startsWith('exec')), [], 'the hook is not run a second time');
    assert.equal(h.stopTimeouts.length, stops + 1, 'the container is stopped');
    const r2 = h.api.object<ContainerRecreateRequest>(requestPath('ns', 'r2'))!;
    assert.deepEqual(r2.status?.containerRecreateStates, [{ name: 'proxy', phase: 'Recreating', isKilled: true }]);
  });

  it('R34: an ordered user request stuck on its first container does not hold ours; if both would stop the sidecar in one pass, its hook runs once and one request waits', async () => {
    // The user's request: main, then proxy, in order; main stopped and not yet final. Main has
    // exited for good (restartPolicy Never), so this very pass it turns final and proxy is reached.
    const pinned = (name: string) => ({ name, statusContext: { containerID: `containerd://${name}-1`, restartCount: 0 } });
    const user = request([{ name: 'main', phase: 'Recreating', isKilled: true }]);
    user.spec = { ...user.spec, containers: [pinned('main'), pinned('proxy')], strategy: { orderedRecreate: true } };
    const mainExited = (id: string): RuntimeContainer => ({ ...running(id, { ...OWN, container: 'main' }), state: 'exited', exitCode: 0, finishedAtNs: 2n });
    const h = harness({ crr: user, status: (id) => (id === 'main-1' ? mainExited(id) : running(id)) });
    const ours = request();
    h.api.set(requestPath('ns', 'r2'), { ...ours, metadata: { ...ours.metadata, name: 'r2', uid: 'req-2', creationTimestamp: new Date(Date.now() + 1000).toISOString() } });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls.filter((c) => c.startsWith('exec')), ['exec proxy-1 /bin/drain'], 'the hook ran once');
    const phases = ['r1', 'r2'].map((name) => h.api.object<ContainerRecreateRequest>(requestPath('ns', name))!.status!);
    const waiting = phases.filter((st) => st.phase === 'Pending');
    assert.equal(waiting.length, 1, JSON.stringify(phases));
    assert.match(waiting[0]!.message ?? '', /^waiting for r[12], which holds a container of this request$/);
  });

  it('the Pod\'s other requests are read in pages (a Pod with many requests)', async () => {
    const h = harness();
    for (let i = 0; i < 250; i++) {
      const r = request([{ name: 'proxy', phase: 'Succeeded', isKilled: true, ...(i === 249 ? { preStopContainerID: 'containerd://proxy-1' } : {}) }]);
      h.api.set(requestPath('ns', `old-${i}`), { ...r, metadata: { ...r.metadata, name: `old-${i}`, uid: `old-${i}` }, status: { ...r.status, phase: 'Completed' } });
    }
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.ok(!h.calls.some((c) => c.startsWith('exec')), 'the record on the last page counts');
    const lists = h.api.calls.filter((c) => c.method === 'get' && c.path === requestPath('ns'));
    assert.equal(lists.length, Math.ceil(251 / POD_REQUESTS_PAGE_SIZE));
  });
});

describe('Reconciler: a cluster policy\'s stop command (R54)', () => {
  const QUIT = ['pilot-agent', 'request', 'POST', 'quitquitquit'];

  it('runs inside the sidecar once isKilled is recorded, before the Pod\'s hook and the signal; the Killing event names the policy', async () => {
    const h = harness({ stopCommand: { command: QUIT } });
    await h.reconciler.reconcile(KEY);
    assert.equal(await h.reconciler.drain(5_000), true);
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled', 'status proxy-1', `exec proxy-1 ${QUIT.join(' ')}`, 'exec proxy-1 /bin/drain', 'stop proxy-1']);
    assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)!.status?.containerRecreateStates?.[0]?.preStopContainerID, 'containerd://proxy-1');
    const killing = h.api.list<{ reason: string; message: string }>(resourcePath('v1', 'events', 'ns')).find((e) => e.reason === EVENT_REASONS.killing);
    assert.match(killing?.message ?? '', /first running the stop command of ClusterSidecarPolicy\/mesh/);
  });

  it('a sidecar without a hook: the command is still recorded first (it runs once), then run, then the stop', async () => {
    const h = harness({ stopCommand: { command: QUIT }, pod: agentPod({ containers: [{ name: 'main' }, { name: 'proxy' }] }) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'patch Recreating isKilled', 'status proxy-1', `exec proxy-1 ${QUIT.join(' ')}`, 'stop proxy-1']);
  });

  it('a command that fails: a FailedStopCommand Warning naming the policy, and the hook and the stop go on', async () => {
    const h = harness({ stopCommand: { command: QUIT }, exec: async (_id, command) => ({ exitCode: command[0] === QUIT[0] ? 7 : 0, stdout: '', stderr: 'no agent here' }) });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls.slice(-3), [`exec proxy-1 ${QUIT.join(' ')}`, 'exec proxy-1 /bin/drain', 'stop proxy-1']);
    const warning = h.api.list<{ reason: string; message: string }>(resourcePath('v1', 'events', 'ns')).find((e) => e.reason === EVENT_REASONS.failedStopCommand);
    assert.match(warning?.message ?? '', /container proxy \(ClusterSidecarPolicy\/mesh\) failed: exec .* exited with code 7: no agent here; the stop goes on/);
  });

  it('R40: a resumed stop runs it no more; nor does a later request of the Pod once one started it', async () => {
    const resumed = harness({ stopCommand: { command: QUIT }, crr: request([{ name: 'proxy', phase: 'Recreating', isKilled: true }]) });
    await resumed.reconciler.reconcile(KEY);
    await resumed.reconciler.drain(5_000);
    assert.deepEqual(resumed.calls, ['status proxy-1', 'stop proxy-1']);

    const h = harness({ stopCommand: { command: QUIT }, stop: () => new Promise(() => {}) });
    await h.reconciler.reconcile(KEY);
    await new Promise((r) => setTimeout(r, 50));
    const first = h.api.object<ContainerRecreateRequest>(REQUEST)!;
    h.api.set(REQUEST, { ...first, status: { ...first.status, phase: 'Completed', message: 'activeDeadlineSeconds passed' } });
    const second = request();
    h.api.set(requestPath('ns', 'r2'), { ...second, metadata: { ...second.metadata, name: 'r2', uid: 'req-2', creationTimestamp: new Date(Date.now() + 1000).toISOString() } });
    h.calls.length = 0;
    await new Reconciler({ ...h.reconcilerDeps }).reconcile(KEY);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(h.calls.filter((c) => c.startsWith('exec')), [], 'neither the command nor the hook runs a second time');
  });

  it('the projection of another Pod of the same name (an older uid): no command', async () => {
    const h = harness({ stopCommand: { command: QUIT, uid: 'uid-0' } });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls.filter((c) => c.startsWith('exec')), ['exec proxy-1 /bin/drain']);
  });
});

describe('Reconciler: a Pod\'s requests side by side (R34, R35)', () => {
  /** Another request of the Pod, stored next to r1 (created a minute earlier unless `createdAgoMs`). */
  function another(h: Harness, name: string, over: { uidLabel?: string | null; contextID?: string; strategy?: object; createdAgoMs?: number } = {}): void {
    const base = request(undefined, over.contextID ?? 'containerd://proxy-1');
    const labels = over.uidLabel === null ? {} : { 'crr.sidecar-terminator.dev/pod-uid': over.uidLabel ?? 'uid-1' };
    h.api.set(requestPath('ns', name), {
      ...base,
      metadata: { ...base.metadata, name, uid: `uid-${name}`, creationTimestamp: new Date(Date.now() - (over.createdAgoMs ?? 60_000)).toISOString(), labels },
      spec: { ...base.spec, activeDeadlineSeconds: undefined, ...(over.strategy ? { strategy: over.strategy } : {}) },
    });
  }

  it('an older user request with a stale statusContext, minStartedSeconds 3600 and no deadline does not hold ours for the sidecar', async () => {
    const h = harness({ pod: hookless() });
    another(h, 'user', { contextID: 'containerd://proxy-0', strategy: { minStartedSeconds: 3600 } });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.ok(h.calls.includes('stop proxy-1'), h.calls.join(', '));
    const user = h.api.object<ContainerRecreateRequest>(requestPath('ns', 'user'));
    assert.equal(user?.status?.phase, 'Recreating', 'the stale one only waits');
    assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)?.status?.containerRecreateStates?.[0]?.isKilled, true);
  });

  it('requests created in the same second: the first by name (code-unit order) holds the container, the other waits for it', async () => {
    const h = harness({ pod: hookless(), holdStops: true });
    another(h, 'zz', { createdAgoMs: 120_000 });
    another(h, 'aa', { createdAgoMs: 120_000 });
    // The API server's timestamps have whole seconds: the same for both.
    const sameSecond = new Date(Math.floor(Date.now() / 1000) * 1000 - 120_000).toISOString();
    for (const name of ['zz', 'aa']) {
      const r = h.api.object<ContainerRecreateRequest>(requestPath('ns', name))!;
      h.api.set(requestPath('ns', name), { ...r, metadata: { ...r.metadata, creationTimestamp: sameSecond } });
    }
    await h.reconciler.reconcile(KEY);
    assert.match(h.api.object<ContainerRecreateRequest>(requestPath('ns', 'zz'))?.status?.message ?? '', /^waiting for aa, which holds a container of this request$/);
    h.release();
    await h.reconciler.drain(5_000);
  });

  it('an older request that still has to stop the same container holds the later one Pending', async () => {
    const h = harness({ pod: hookless(), holdStops: true });
    another(h, 'user');
    await h.reconciler.reconcile(KEY);
    assert.match(h.api.object<ContainerRecreateRequest>(REQUEST)?.status?.message ?? '', /^waiting for user, which holds a container of this request$/);
    h.release();
    await h.reconciler.drain(5_000);
    assert.equal(h.calls.filter((c) => c === 'stop proxy-1').length, 1);
  });

  it('R35: a request not admitted yet (no pod-uid label) is left to the controller: no status written, and it holds nothing', async () => {
    const h = harness({ pod: hookless() });
    another(h, 'prelabelled', { uidLabel: null });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.ok(h.calls.includes('stop proxy-1'), h.calls.join(', '));
    assert.equal(h.api.object<ContainerRecreateRequest>(requestPath('ns', 'prelabelled'))?.status, undefined);
    assert.equal(h.counts.get('completed{"outcome":"refused"}'), undefined);
  });

  it('refusals: every request counted and completed, one RequestRefused Warning for the Pod', async () => {
    // The Pod as a forged status would show it: on another node than this agent's.
    const h = harness({ pod: agentPod({ nodeName: 'node-b', containers: [{ name: 'main' }, { name: 'proxy' }] }) });
    for (const name of ['f1', 'f2', 'f3']) another(h, name);
    await h.reconciler.reconcile(KEY);
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.equal(h.counts.get('refused{"reason":"other-node"}'), 4);
    assert.equal(h.counts.get('completed{"outcome":"refused"}'), 4);
    assert.deepEqual(await reasons(h), [EVENT_REASONS.requestRefused]);
  });
});

describe('Reconciler: containers left running in a Pod whose phase the controller set (R45)', () => {
  const finished = () => agentPod({
    phase: 'Succeeded', phaseSetBySidecarTerminator: true, terminationGracePeriodSeconds: 12,
    containers: [{ name: 'main' }, { name: 'proxy' }],
  });

  it('stopped at once within the Pod\'s grace, with no request: one stop, a Killing event, nothing written', async () => {
    const h = harness({ pod: finished() });
    h.cache.stale = []; // no request of the Pod
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1']);
    assert.deepEqual(h.stopTimeouts, [12]);
    assert.deepEqual(await h.events(), [{ type: 'Normal', reason: EVENT_REASONS.killing }]);
    assert.equal(h.counts.get('stops{"result":"stopped"}'), 1);
  });

  it('a restarted agent decides the same, and a container found exited is not stopped again', async () => {
    let exitedNow = false;
    const h = harness({ pod: finished(), status: (id) => (exitedNow ? { id, state: 'exited', exitCode: 137, startedAtNs: 1n, finishedAtNs: 2n, owner: OWN } : running(id)) });
    h.cache.stale = []; // no request of the Pod
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    exitedNow = true;
    const restarted = new Reconciler(h.reconcilerDeps);
    await restarted.reconcile(KEY);
    await restarted.drain(5_000);
    assert.deepEqual(h.calls, ['status proxy-1', 'stop proxy-1', 'status proxy-1']);
  });

  it('a container an active request asks is left to that request (R23: its stop command and hook come first): one stop, by the request', async () => {
    const h = harness({ pod: finished() });
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.equal(h.calls.filter((c) => c.startsWith('stop ')).length, 1);
    assert.equal(h.stoppedLogs.length, 1, 'stopped as the request asks, not as a leftover');
  });

  it('a container with a preStop hook is left to kubelet, whose kill runs the hook', async () => {
    const h = harness({ pod: { ...finished(), containers: [{ name: 'main' }, { name: 'proxy', preStop: { exec: { command: ['/bin/drain'] } } }] } });
    h.cache.stale = []; // no request of the Pod
    await h.reconciler.reconcile(KEY);
    await h.reconciler.drain(5_000);
    assert.deepEqual(h.calls, []);
  });
});

describe('Reconciler: a stop this agent saw return, while the runtime still says running (R40)', () => {
  /** Waits until the stops begun have finished, without draining (a drained reconciler takes no more work). */
  const settled = async (r: Reconciler) => {
    while (r.stopsInFlight() > 0) await new Promise((resolve) => setTimeout(resolve, 1));
  };
  const stopsSent = (h: Harness) => h.calls.filter((c) => c.startsWith('stop ')).length;
  /**
   * From the first reconcile: one stop; `looks` more reconciles (the stop's requeue, Pod updates)
   * each ask to look again after the first wait and stop nothing; once `advance` has let that wait
   * pass, one more stop, and the next wait is twice as long.
   */
  const oneStopPerWait = async (h: Harness, advance: (ms: number) => void, looks: number) => {
    await h.reconciler.reconcile(KEY);
    await settled(h.reconciler);
    assert.equal(stopsSent(h), 1);
    for (let i = 0; i < looks; i++) assert.deepEqual(await h.reconciler.reconcile(KEY), { requeueAfterMs: FIRST_RECHECK_MS });
    assert.equal(stopsSent(h), 1);
    advance(FIRST_RECHECK_MS);
    await h.reconciler.reconcile(KEY);
    await settled(h.reconciler);
    assert.equal(stopsSent(h), 2);
    assert.deepEqual(await h.reconciler.reconcile(KEY), { requeueAfterMs: FIRST_RECHECK_MS * 2 });
    assert.equal(stopsSent(h), 2);
  };

  it('not stopped again at once; once per wait, which doubles: no hook, no Killing event, nothing counted as resumed', async () => {
    let now = 1_000_000;
    const h = harness({ now: () => now }); // the runtime says running, whatever happens
    // The stop's own requeue, and a burst of Pod updates: each looks, none stops.
    await oneStopPerWait(h, (ms) => { now += ms; }, 5);
    assert.equal(h.calls.filter((c) => c.startsWith('exec ')).length, 1);
    assert.deepEqual(await reasons(h), [EVENT_REASONS.killing]);
    assert.equal(h.counts.get('resumed'), undefined);
    // R44: the first stop is timed; a repeat is not (its steps would count from the first's start).
    assert.deepEqual(h.stoppedLogs.map((l) => l.timeline !== undefined), [true, false]);
    assert.equal(h.counts.get('stopSeconds observed'), 1);
  });

  it('a restarted agent resumes the recorded stop once, counted as resumed; then waits likewise', async () => {
    let now = 1_000_000;
    const h = harness({ now: () => now, crr: request([{ name: 'proxy', phase: 'Recreating', isKilled: true }]) });
    await h.reconciler.reconcile(KEY);
    await settled(h.reconciler);
    await h.reconciler.reconcile(KEY);
    now += FIRST_RECHECK_MS - 1;
    await h.reconciler.reconcile(KEY);
    assert.equal(stopsSent(h), 1);
    assert.equal(h.counts.get('resumed'), 1);
  });

  const stopOutcomes: { outcome: string; stop?: () => Promise<void>; result: string }[] = [
    { outcome: 'returned', result: 'stopped' },
    { outcome: 'failed (its deadline passed under a burst)', stop: async () => { throw new Error('deadline exceeded'); }, result: 'failed' },
  ];
  for (const { outcome, stop, result } of stopOutcomes) {
    it(`leftovers of a finished Pod, a stop that ${outcome}: the same wait, doubling; the reconcile asks to look again then; one Killing event`, async () => {
      let now = 1_000_000;
      const h = harness({ now: () => now, pod: agentPod({ phase: 'Succeeded', phaseSetBySidecarTerminator: true, containers: [{ name: 'main' }, { name: 'proxy' }] }), ...(stop ? { stop } : {}) });
      h.cache.stale = []; // no request of the Pod
      await oneStopPerWait(h, (ms) => { now += ms; }, 3);
      assert.equal(h.counts.get(`stops{"result":"${result}"}`), 2);
      assert.deepEqual(await reasons(h), [EVENT_REASONS.killing]);
    });
  }
});
