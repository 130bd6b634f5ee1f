// R55, the fast path's stop first and its record after, wired as agent/main.ts wires them: the exit
// handler, the Reconciler and its Stops, against the fake runtime and the fake API server. The stop
// is sent while the create is still on its way; a create that fails stops nothing less; the request,
// whichever way it arrives (the create's answer, the watch, the controller's, a restarted agent's
// reconcile), records the stop and never sends a second one.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { EventRecorder } from '../common/events.ts';
import { ANNOTATION_STOP_LAST } from '../api/names.ts';
import { createIfAbsent } from '../common/kube/errors.ts';
import { FakeKubeApi, apiError } from '../test/support/fake-api.ts';
import type { Logger } from '../common/log.ts';
import type { ContainerRecreateRequest, CRRStatus } from '../api/container-recreate-request.ts';
import { requestPath } from '../api/container-recreate-request.ts';
import { main, makePod, NODE, sidecar, UID } from '../test/support/pods.ts';
import { projectPod } from '../rules/projection.ts';
import { requestName } from '../rules/requests.ts';
import { ExitHandler } from './fast-path/exits.ts';
import { createAgentMetrics } from './metrics.ts';
import { projectAgentPod } from './pod.ts';
import type { ReconcilerDeps } from './reconciler.ts';
import { Reconciler } from './reconciler.ts';
import { FIRST_RECHECK_MS } from './returned-stops.ts';
import type { RuntimeContainer } from './runtime/types.ts';
import type { PodProjection } from '../rules/projection.ts';
import type { PolicyMarker } from '../rules/policy-marker.ts';
import { fakeRuntime } from '../test/support/fake-runtime.ts';
import { DiscoveredRuntimes } from './runtime/discover.ts';
import { containerIDOf, runtimeContainerID } from '../api/container-id.ts';

const KEY = 'ns/job-pod';
const MAIN_ID = runtimeContainerID('main-id');
const PROXY_ID = runtimeContainerID('proxy-id');
const REQUEST = requestPath('ns', requestName(UID, 1));
const quiet = { debug: () => quiet, info: () => quiet, warn: () => quiet, error: () => quiet } as unknown as Logger;

/**
 * A Job's Pod as kubelet last reported it: main and proxy running; `hook`: the proxy has a preStop
 * hook; `tiers`: a log shipper beside it, and the proxy stopped last (R53).
 */
function jobPod(hook = false, tiers = false): V1Pod {
  const pod = tiers
    ? makePod({ containers: [main('main'), sidecar('logs'), sidecar('proxy')], annotations: { [ANNOTATION_STOP_LAST]: 'proxy' } })
    : makePod({ containers: [main('main'), sidecar('proxy')] });
  if (hook) pod.spec!.containers[1]!.lifecycle = { preStop: { exec: { command: ['/bin/drain'] } } };
  return pod;
}

function withStopCommand(pod: PodProjection): PodProjection {
  const policy: PolicyMarker = { policy: 'ClusterSidecarPolicy/mesh', mode: 'Enforce', ignoreExitCode: false, stopTier: 0, stopCommand: ['/bin/quit'] };
  return { ...pod, containers: pod.containers.map((c) => (c.name === 'proxy' ? { ...c, policy } : c)) };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

interface HarnessOptions {
  hook?: boolean;
  /** A cluster policy's stop command for the proxy (R54), as the agent's policies lay it over the projection. */
  stopCommand?: boolean;
  tiers?: boolean;
  /** The stop returns, but the runtime still says running (containerd deletes the task first). */
  statusLagsStop?: boolean;
  /** Every stop fails once released (its deadline passed under a burst), the container still running. */
  stopFails?: boolean;
  /** The runtime's status says running whatever happens, until this says otherwise. */
  statusRunning?: () => boolean;
  now?: () => number;
}

function harness(o: HarnessOptions = {}) {
  const api = new FakeKubeApi();
  const v1pod = jobPod(o.hook, o.tiers);
  const pod = projectPod(v1pod);
  const agentPod = projectAgentPod(v1pod, { wholeHooks: true });
  /** Runtime calls, the create's send and return, and the status writes, in order. */
  const calls: string[] = [];
  /** The containers whose stop returned. */
  const stopped = new Set<string>();
  /** Each stop is held until released, so a test sees it in flight. */
  let stopHeld = deferred();
  /** The create is held until released: the API server under a burst. */
  let createHeld = deferred();
  const runtime = fakeRuntime({
    calls,
    status: (id): RuntimeContainer | undefined => {
      const owner = { podUid: UID, podNamespace: 'ns', podName: 'job-pod', container: id.replace(/-id$/, '') };
      const exited = id === MAIN_ID || (o.statusRunning ? !o.statusRunning() : stopped.has(id) && !o.statusLagsStop);
      return { id, state: exited ? 'exited' : 'running', ...(exited ? { exitCode: 0 } : {}), startedAtNs: 1n, finishedAtNs: 0n, owner };
    },
    stop: async (id) => {
      await stopHeld.promise;
      if (o.stopFails) throw new Error('deadline exceeded');
      stopped.add(id);
    },
  });
  const runtimes = new DiscoveredRuntimes([runtime]);
  /** The request bodies the fast path sent: the controller's are the same (decide, same name). */
  const sent: ContainerRecreateRequest[] = [];
  const recorder = new EventRecorder(api, 'sidecar-terminator-agent', quiet, { host: NODE });
  const metrics = createAgentMetrics();
  /** The Pods the Reconciler was asked to look at, in order. */
  const queued: string[] = [];
  const reconcilerDeps: ReconcilerDeps = {
    nodeName: NODE,
    client: {
      get: (path, query) => api.get(path, query),
      patch: (path, body, type) => {
        const { status } = body as { status: CRRStatus };
        calls.push(`patch ${status.phase}${status.containerRecreateStates?.some((s) => s.isKilled) ? ' isKilled' : ''}`);
        return api.patch(path, body, type);
      },
    },
    cache: {
      agentPod: () => agentPod,
      requests: (namespace) => api.list<ContainerRecreateRequest>(requestPath(namespace)),
      hasRequests: () => true,
      sidecarPod: () => (o.stopCommand ? withStopCommand(pod) : pod),
    },
    forContainer: (containerID) => runtimes.forContainer(containerID),
    events: recorder,
    metrics,
    log: quiet,
    requeue: (key) => queued.push(key),
    ...(o.now ? { now: o.now } : {}),
  };
  const agent = { reconciler: new Reconciler(reconcilerDeps) };
  const exits = new ExitHandler({
    nodeName: NODE,
    cache: {
      policiesCurrent: () => true,
      sidecarPod: () => pod,
      sidecarPodOfContainer: () => pod,
      // The watch has not delivered any request yet.
      activeRequests: () => [],
    },
    api: {
      create: async (body) => {
        calls.push('create sent');
        sent.push(structuredClone(body));
        await createHeld.promise;
        const created = await createIfAbsent(api, requestPath('ns'), body);
        calls.push('create returned');
        return created;
      },
      read: async (namespace, name) => api.object<ContainerRecreateRequest>(requestPath(namespace, name)),
    },
    runtimes,
    ownerOf: () => undefined,
    stopFirst: (first) => agent.reconciler.stopFirst(first),
    handOff: (handoff) => agent.reconciler.adopt(handoff),
    events: recorder,
    metrics,
    log: quiet,
    workers: 2,
    requestOptions: { activeDeadlineSeconds: 300, ttlSecondsAfterFinished: 600 },
  });
  /** Until the runtime has been asked to stop the proxy; fails if it is not within a few hundred turns. */
  const stopSent = async () => {
    for (let turn = 0; !calls.includes(`stop ${PROXY_ID}`); turn++) {
      assert.ok(turn < 500, `no stop sent: ${JSON.stringify(calls)}`);
      await new Promise((r) => setImmediate(r));
    }
  };
  /** The Reconciler's passes over the Pod until it has nothing more to do now (its watch events, its requeues). */
  const reconcile = async () => {
    while (queued.length > 0) {
      queued.shift();
      await agent.reconciler.reconcile(KEY);
    }
  };
  /**
   * The first stop sent at the main's exit and held there; the create answered and handed over, its
   * reconcile recording the stop in flight (isKilled); the exit queue stopped.
   */
  const firstStopRecorded = async () => {
    exits.containerExited(runtime, MAIN_ID, 0);
    await stopSent();
    createHeld.resolve();
    await exits.idle();
    exits.stop();
    await reconcile();
  };
  /** Until every stop under way has returned. */
  const stopsDone = async () => {
    while (agent.reconciler.stopsInFlight() > 0) await new Promise((r) => setImmediate(r));
  };
  const stopsSent = () => calls.filter((c) => c === `stop ${PROXY_ID}`).length;
  const status = () => api.object<ContainerRecreateRequest>(REQUEST)?.status;
  /** The same request, by the same name, as the controller creates it on seeing the mains done. */
  const controllerCreates = async () => {
    const built = sent[0];
    assert.ok(built, 'the fast path sent its create');
    await createIfAbsent(api, requestPath('ns'), built);
  };
  return {
    api, exits, runtime, calls, queued, agent, reconcilerDeps, metrics, firstStopRecorded, stopsSent, stopsDone, status, stopSent, reconcile, controllerCreates,
    releaseStop: () => stopHeld.resolve(),
    releaseCreate: () => createHeld.resolve(),
    /** A restarted agent: new process, nothing of the old one's memory; the API and the runtime as they are. */
    restart: () => {
      agent.reconciler = new Reconciler(reconcilerDeps);
      stopHeld = deferred();
      createHeld = deferred();
    },
  };
}

describe('Stop first, record after (R55)', () => {
  it('R55: the sidecar\'s stop is sent while the create is still on its way; the request, handed over, records it without a second stop', async () => {
    const h = harness();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.stopSent();
    assert.deepEqual(h.calls.filter((c) => c.startsWith('create') || c.startsWith('stop')).sort(), ['create sent', `stop ${PROXY_ID}`], 'the stop does not wait for the create');
    h.releaseCreate();
    await h.exits.idle();
    // The hand-off: the stop is in flight, so the request records it (isKilled) and sends none.
    await h.reconcile();
    assert.equal(h.status()?.phase, 'Recreating');
    assert.equal(h.status()?.containerRecreateStates?.[0]?.isKilled, true);
    h.releaseStop();
    await h.stopsDone();
    await h.reconcile();
    h.exits.stop();
    assert.equal(h.stopsSent(), 1);
    assert.equal(h.status()?.phase, 'Completed');
    assert.deepEqual(h.status()?.containerRecreateStates?.map((s) => [s.name, s.phase, s.isKilled, s.exitCode]), [['proxy', 'Succeeded', true, 0]]);
  });

  it('R55: a create that fails (forbidden) still stops the sidecar; the controller\'s request by the same name closes the record, with no second stop', async () => {
    const h = harness();
    h.api.inject({ method: 'create', path: requestPath('ns') }, apiError(403, 'POST', requestPath('ns')), 100);
    h.releaseCreate();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.stopSent();
    await h.exits.idle();
    h.exits.stop(); // the queue's retries are not what this test is about
    assert.equal(h.status(), undefined, 'no request: the create was refused');
    h.releaseStop();
    await h.stopsDone();
    h.api.clearFaults();
    await h.controllerCreates();
    h.queued.push(KEY); // the watch delivers the controller's request
    await h.reconcile();
    assert.equal(h.stopsSent(), 1);
    assert.equal(h.status()?.phase, 'Completed');
    // This process's own stop returned: the exit is recorded as its kill.
    assert.deepEqual(h.status()?.containerRecreateStates?.map((s) => [s.name, s.phase, s.isKilled, s.exitCode]), [['proxy', 'Succeeded', true, 0]]);
  });

  it('R55: the controller was first (409): its request, delivered by the watch while the fast path\'s stop is in flight, records it and sends no second stop', async () => {
    const h = harness();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.stopSent();
    await h.controllerCreates();
    h.releaseCreate();
    await h.exits.idle();
    h.exits.stop();
    assert.equal(h.queued.length, 0, 'a 409 on our name: nothing handed over, the watch brings it');
    h.queued.push(KEY);
    await h.reconcile();
    assert.deepEqual(h.calls.filter((c) => c.startsWith('patch')), ['patch Recreating isKilled'], 'recorded while in flight');
    h.releaseStop();
    await h.stopsDone();
    await h.reconcile();
    assert.equal(h.stopsSent(), 1);
    assert.deepEqual(h.calls.filter((c) => c.startsWith('patch')), ['patch Recreating isKilled', 'patch Completed isKilled']);
  });

  it('R55, R40: the stop returned while the runtime still says running: the request waits out the recheck instead of stopping again', async () => {
    const h = harness({ statusLagsStop: true });
    h.releaseStop();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.stopSent();
    await h.stopsDone();
    h.releaseCreate();
    await h.exits.idle();
    h.exits.stop();
    const delays: (number | undefined)[] = [];
    while (h.queued.length > 0) {
      h.queued.shift();
      const result = await h.agent.reconciler.reconcile(KEY);
      delays.push(result ? result.requeueAfterMs : undefined);
    }
    assert.equal(h.stopsSent(), 1);
    assert.equal(h.status()?.phase, 'Recreating');
    assert.ok(delays.some((ms) => ms !== undefined && ms <= FIRST_RECHECK_MS && ms > 0), `looked at again after the wait: ${JSON.stringify(delays)}`);
  });

  it('R55, R40: the stop fails (its deadline passed) after the request recorded it: looked at again after the wait, stopped once more, nothing counted as resumed', async () => {
    let now = 1_000_000;
    const h = harness({ stopFails: true, now: () => now });
    await h.firstStopRecorded();
    assert.equal(h.status()?.containerRecreateStates?.[0]?.isKilled, true, 'recorded while in flight');
    h.releaseStop();
    await h.stopsDone();
    const delays: (number | undefined)[] = [];
    for (let pass = 0; pass < 3; pass++) {
      h.queued.length = 0;
      const result = await h.agent.reconciler.reconcile(KEY);
      delays.push(result ? result.requeueAfterMs : undefined);
    }
    assert.equal(h.stopsSent(), 1, 'not stopped again at once');
    assert.ok(delays.every((ms) => ms !== undefined && ms <= FIRST_RECHECK_MS && ms > 0), `looked at again after the wait: ${JSON.stringify(delays)}`);
    now += FIRST_RECHECK_MS;
    await h.agent.reconciler.reconcile(KEY);
    await h.stopsDone();
    assert.equal(h.stopsSent(), 2);
    assert.equal((await h.metrics.stopsResumed.get()).values[0]?.value ?? 0, 0, 'this agent\'s own stop, not one another agent began');
  });

  it('R55, R40: the stop fails, but the runtime\'s exit stream reported the sidecar exited while its status says running (a burst\'s backlog): never stopped again, recorded once the status says exited', async () => {
    let now = 1_000_000;
    let statusLags = true;
    const h = harness({ stopFails: true, statusRunning: () => statusLags, now: () => now });
    await h.firstStopRecorded();
    h.agent.reconciler.containerExited(containerIDOf('containerd', PROXY_ID));
    h.releaseStop();
    await h.stopsDone();
    for (let wait = FIRST_RECHECK_MS; wait <= 8 * FIRST_RECHECK_MS; wait *= 2) {
      const result = await h.agent.reconciler.reconcile(KEY);
      assert.ok(result?.requeueAfterMs !== undefined && result.requeueAfterMs > 0 && result.requeueAfterMs <= wait, `looked at again: ${JSON.stringify(result)}`);
      now += wait;
    }
    await h.stopsDone();
    assert.equal(h.stopsSent(), 1, 'its process exited: nothing to stop again');
    statusLags = false;
    await h.agent.reconciler.reconcile(KEY);
    assert.equal(h.status()?.phase, 'Completed');
    assert.deepEqual(h.status()?.containerRecreateStates?.map((s) => [s.name, s.phase, s.isKilled]), [['proxy', 'Succeeded', true]]);
  });

  it('R40: a hooked sidecar\'s stop call fails after the runtime reported its exit: not recorded as failed; completed once the status says exited', async () => {
    let statusLags = true;
    const h = harness({ hook: true, stopFails: true, statusRunning: () => statusLags });
    h.releaseCreate();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    await h.reconcile();
    await h.stopSent();
    h.agent.reconciler.containerExited(containerIDOf('containerd', PROXY_ID));
    h.releaseStop();
    await h.stopsDone();
    await h.reconcile();
    assert.deepEqual(h.status()?.containerRecreateStates?.map((s) => [s.name, s.phase, s.isKilled]), [['proxy', 'Recreating', true]]);
    assert.equal((await h.metrics.containerStops.get()).values.find((v) => v.labels.result === 'failed'), undefined);
    statusLags = false;
    await h.agent.reconciler.reconcile(KEY);
    assert.equal(h.stopsSent(), 1);
    assert.equal(h.status()?.phase, 'Completed');
    assert.deepEqual(h.status()?.containerRecreateStates?.map((s) => [s.name, s.phase, s.isKilled]), [['proxy', 'Succeeded', true]]);
  });

  it('R55: the agent dies between the stop and the record; the restarted agent finds the sidecar exited and completes the controller\'s request, with no second stop', async () => {
    const h = harness();
    h.releaseStop();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.stopSent();
    await h.stopsDone();
    // The process ends with the create still on its way: nothing recorded.
    h.exits.stop();
    assert.equal(h.status(), undefined);
    h.restart();
    await h.controllerCreates();
    h.queued.length = 0;
    h.queued.push(KEY);
    await h.reconcile();
    assert.equal(h.stopsSent(), 1);
    assert.equal(h.status()?.phase, 'Completed');
    // A new process knows of no stop of its own: the exit is recorded as found.
    assert.deepEqual(h.status()?.containerRecreateStates?.map((s) => [s.name, s.phase, s.isKilled, s.exitCode]), [['proxy', 'Succeeded', false, 0]]);
  });

  for (const [name, options, exec] of [['a preStop hook', { hook: true }, '/bin/drain'], ['a cluster policy\'s stop command (R54)', { stopCommand: true }, '/bin/quit']] as const) {
    it(`R55, R39: a sidecar with ${name} is not stopped before its record: isKilled is written, then the command, then the stop`, async () => {
      const h = harness(options);
      h.releaseStop();
      h.exits.containerExited(h.runtime, MAIN_ID, 0);
      for (let turn = 0; turn < 50; turn++) await new Promise((r) => setImmediate(r));
      assert.ok(h.calls.includes('create sent'));
      assert.equal(h.stopsSent(), 0, 'nothing stopped while the create is on its way');
      h.releaseCreate();
      await h.exits.idle();
      h.exits.stop();
      await h.reconcile();
      await h.stopsDone();
      await h.reconcile();
      const order = h.calls.filter((c) => c.startsWith('patch') || c.startsWith('exec') || c.startsWith('stop'));
      assert.deepEqual(order.slice(0, 3), ['patch Recreating isKilled', `exec ${PROXY_ID} ${exec}`, `stop ${PROXY_ID}`]);
      assert.equal(h.stopsSent(), 1);
    });
  }

  it('R55, R53: only the first tier is stopped first: the log shipper, while the proxy stopped last waits for its own request', async () => {
    const h = harness({ tiers: true });
    h.releaseStop();
    h.releaseCreate();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    await h.stopsDone();
    h.exits.stop();
    assert.deepEqual(h.calls.filter((c) => c.startsWith('stop')), [`stop ${runtimeContainerID('logs-id')}`]);
    assert.deepEqual(h.api.object<ContainerRecreateRequest>(REQUEST)?.spec.containers.map((c) => c.name), ['logs']);
  });
});
