// The fast path's I/O (R43) against a fake runtime and the fake API server: a main's exit leads to
// its Pod and the first request, created as agent/main.ts creates it (createIfAbsent); a request the
// controller created first (409) is no error and gives no event; a create that fails is retried by
// the handler's queue.
import { describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { EventRecorder } from '../../common/events.ts';
import { createIfAbsent } from '../../common/kube/errors.ts';
import { FakeKubeApi, networkError } from '../../test/support/fake-api.ts';
import { resourcePath } from '../../common/kube/paths.ts';
import { createLogger } from '../../common/log.ts';
import { EVENT_REASONS } from '../../api/names.ts';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { LABEL_NODE_NAME, LABEL_POD_UID, requestPath } from '../../api/container-recreate-request.ts';
import { main, makePod, NODE, sidecar, UID } from '../../test/support/pods.ts';
import { projectPod } from '../../rules/projection.ts';
import type { PodProjection } from '../../rules/projection.ts';
import { requestName } from '../../rules/requests.ts';
import { ExitHandler } from './exits.ts';
import { createAgentMetrics } from '../metrics.ts';
import type { ContainerOwner, PodContainer, RuntimeContainer } from '../runtime/types.ts';
import { fakeRuntime } from '../../test/support/fake-runtime.ts';
import { DiscoveredRuntimes } from '../runtime/discover.ts';
import type { RuntimeContainerID } from '../../api/container-id.ts';
import { runtimeContainerID } from '../../api/container-id.ts';
import type { FirstStop, Handoff } from './handoff.ts';

const log = createLogger('test', 'error');
const REQUEST = requestPath('ns', requestName(UID, 1));
/** The Pod as kubelet last reported it: main and proxy running (container IDs `containerd://<name>-id`). */
const POD = projectPod(makePod({ containers: [main('main'), sidecar('proxy')] }));
const MAIN_ID = runtimeContainerID('main-id');
const PROXY_ID = runtimeContainerID('proxy-id');
const OWNER: ContainerOwner = { podUid: UID, podNamespace: 'ns', podName: 'job-pod', container: 'main' };

interface HarnessOptions {
  /** The Pods the watch cache holds (default: POD). */
  pods?: PodProjection[];
  /** What the runtime's status answers for a container ID. */
  status?: (id: RuntimeContainerID) => RuntimeContainer | undefined;
  /** The runtime's listing of a Pod's containers. */
  podContainers?: PodContainer[];
  /** Sidecar labels read ahead, by `<runtime>://<id>`. */
  owners?: Map<string, ContainerOwner>;
  /** The containers whose stop the Reconciler says it began before the create (default none). */
  stoppedFirst?: string[];
}

function harness(o: HarnessOptions = {}) {
  const api = new FakeKubeApi();
  const runtimeCalls: string[] = [];
  const pods = o.pods ?? [POD];
  /** The requests the watch cache holds: what the API has now, unless a test pins a stale copy. */
  const cache: { stale?: ContainerRecreateRequest[] } = {};
  /** The requests handed over for carrying out, as created, with the runtime's answers and their timings. */
  const handedOver: Handoff[] = [];
  /** The requests whose stops were asked to begin before their create. */
  const firstStops: FirstStop[] = [];
  /** The agent's clock: moves only when a test moves it. */
  const clock = { nowMs: 1_000_000 };
  const runtime = fakeRuntime({
    calls: runtimeCalls,
    status: (id) => o.status?.(id),
    stop: async () => assert.fail('the fast path stops nothing'),
    exec: async () => assert.fail('the fast path runs nothing'),
    podContainers: () => o.podContainers ?? [],
  });
  const metrics = createAgentMetrics();
  const recorder = new EventRecorder(api, 'sidecar-terminator-agent', log, { host: NODE });
  const exits = new ExitHandler({
    nodeName: NODE,
    cache: {
      policiesCurrent: () => true,
      sidecarPod: (namespace, name) => pods.find((p) => p.namespace === namespace && p.name === name),
      sidecarPodOfContainer: (containerID) => pods.find((p) => p.statuses.some((s) => s.containerID === containerID)),
      activeRequests: (namespace, podUid) => (cache.stale ?? api.list<ContainerRecreateRequest>(requestPath(namespace)))
        .filter((r) => r.metadata.labels?.[LABEL_POD_UID] === podUid),
    },
    api: {
      // As agent/fast-path/fast-path.ts does.
      create: (body) => createIfAbsent(api, requestPath(body.metadata.namespace), body),
      read: async (namespace, name) => api.object<ContainerRecreateRequest>(requestPath(namespace, name)),
    },
    runtimes: new DiscoveredRuntimes([runtime]),
    // The Reconciler begins them (agent/stop-first.test.ts): here, what was asked of it.
    stopFirst: async (first) => {
      firstStops.push(first);
      return new Set(o.stoppedFirst);
    },
    handOff: (handoff) => {
      handedOver.push(handoff);
    },
    ownerOf: (containerID) => o.owners?.get(containerID),
    events: recorder,
    metrics,
    log,
    workers: 2,
    requestOptions: { activeDeadlineSeconds: 300, ttlSecondsAfterFinished: 600 },
    now: () => clock.nowMs,
  });
  /** The runtime's answers handed over with the first request, as they arrived. */
  const answers = async () => {
    const given = [...(handedOver[0]?.answers ?? new Map()).entries()];
    return (await Promise.all(given.map(async ([containerID, answer]) => ({ containerID, answer: await answer }))))
      .flatMap(({ containerID, answer }) => (answer ? [{ containerID, container: answer.container, atMs: answer.atMs }] : []));
  };
  const onExit = async (result: 'created' | 'existed') =>
    (await metrics.requestsOnExit.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
  const events = async () => {
    await recorder.flushed();
    return api.list<{ type: string; reason: string }>(resourcePath('v1', 'events', 'ns')).map((e) => `${e.type} ${e.reason}`);
  };
  return { api, exits, runtime, runtimeCalls, cache, onExit, events, handedOver, firstStops, answers, clock };
}

describe('ExitHandler', () => {
  it('a main\'s exit creates the Pod\'s first request, once, with the StoppingSidecars event', async () => {
    const h = harness();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    const created = h.api.object<ContainerRecreateRequest>(REQUEST);
    assert.deepEqual(created?.spec.containers.map((c) => c.name), ['proxy']);
    assert.deepEqual(h.api.lines({ method: 'create', path: requestPath('ns') }), [`POST ${requestPath('ns')} 201`]);
    assert.deepEqual(await h.events(), [`Normal ${EVENT_REASONS.stopping}`]);
    // kubelet reported every container: the runtime was asked only about the sidecar to stop.
    assert.deepEqual(h.runtimeCalls, ['status proxy-id']);
  });

  it('the request as created is handed over at once, with the exit\'s and the create\'s times', async () => {
    const h = harness({ status: (id) => ({ id, state: 'running', startedAtNs: 1n, finishedAtNs: 0n, owner: { ...OWNER, container: 'proxy' } }) });
    const exitedAtMs = h.clock.nowMs - 3;
    // The create takes 7 ms by the agent's clock.
    const create = h.api.create.bind(h.api);
    h.api.create = (async (...args: Parameters<typeof create>) => {
      h.clock.nowMs += 7;
      return create(...args);
    }) as typeof create;
    h.exits.containerExited(h.runtime, MAIN_ID, 0, exitedAtMs);
    await h.exits.idle();
    h.exits.stop();
    const { request, timing } = h.handedOver[0]!;
    assert.deepEqual(request, h.api.object<ContainerRecreateRequest>(REQUEST), 'with the uid and resourceVersion the API server gave it');
    assert.deepEqual(timing, { mainExitedAtMs: exitedAtMs, exitEventAtMs: exitedAtMs + 3, createdAtMs: exitedAtMs + 10, apiCreateMs: 7 });
    // Labels not read ahead: the runtime is asked about the sidecar (by the ID the request pins;
    // the main is not a target) while the request is created, and its answer handed over with it.
    assert.deepEqual(h.runtimeCalls, ['status proxy-id']);
    assert.deepEqual((await h.answers()).map((a) => `${a.containerID} ${a.container.state}`), ['containerd://proxy-id running']);
  });

  it('R55: the stops are asked to begin before the create is sent, with the request, the runtime\'s answers and the exit; no answer from before a stop begun is handed over', async () => {
    const owner = { ...OWNER, container: 'proxy' };
    const h = harness({ owners: new Map([['containerd://proxy-id', owner]]), stoppedFirst: ['containerd://proxy-id'] });
    /** How many stops were asked for when each create was sent. */
    const stopsAtCreate: number[] = [];
    const create = h.api.create.bind(h.api);
    h.api.create = (async (...args: Parameters<typeof create>) => {
      if (args[0] === requestPath('ns')) stopsAtCreate.push(h.firstStops.length);
      return create(...args);
    }) as typeof create;
    const exitedAtMs = h.clock.nowMs - 3;
    h.exits.containerExited(h.runtime, MAIN_ID, 0, exitedAtMs);
    await h.exits.idle();
    h.exits.stop();
    assert.deepEqual(stopsAtCreate, [1]);
    const [first] = h.firstStops;
    assert.equal(first?.request.metadata.name, requestName(UID, 1));
    assert.deepEqual(first?.exit, { mainExitedAtMs: exitedAtMs, exitEventAtMs: exitedAtMs + 3 });
    assert.deepEqual((await first!.answers.get('containerd://proxy-id' as never))?.container.state, 'running');
    assert.equal(h.handedOver.length, 1);
    assert.deepEqual(await h.answers(), [], 'the Reconciler asks the runtime itself about a container it began to stop');
  });

  it('R55: once a Pod\'s stop has begun, its create holds no worker: a burst\'s stops wait on no one\'s create', async () => {
    // Three Pods, two workers, every create held up at the API server.
    const pods = [0, 1, 2].map((i) => {
      const pod = makePod({ containers: [main('main', 'running', { id: `containerd://main-${i}` }), sidecar('proxy', 'running', [], { id: `containerd://proxy-${i}` })] });
      pod.metadata!.name = `job-pod-${i}`;
      pod.metadata!.uid = `uid-${i}`;
      return projectPod(pod);
    });
    const h = harness({ pods });
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const create = h.api.create.bind(h.api);
    h.api.create = (async (...args: Parameters<typeof create>) => {
      if (args[0] === requestPath('ns')) await held;
      return create(...args);
    }) as typeof create;
    for (const i of [0, 1, 2]) h.exits.containerExited(h.runtime, runtimeContainerID(`main-${i}`), 0);
    for (let turn = 0; turn < 50 && h.firstStops.length < 3; turn++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(h.firstStops.map((f) => f.request.spec.podName), ['job-pod-0', 'job-pod-1', 'job-pod-2']);
    release();
    await h.exits.idle();
    h.exits.stop();
    assert.equal(h.handedOver.length, 3);
  });

  it('labels read ahead: the answer is made from them and the announced exits as the create returns, without a runtime call', async () => {
    const owner = { ...OWNER, container: 'proxy' };
    const h = harness({ owners: new Map([['containerd://proxy-id', owner]]) });
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    assert.deepEqual(h.runtimeCalls, []);
    assert.deepEqual(await h.answers(), [{ containerID: 'containerd://proxy-id', container: { id: 'proxy-id', state: 'running', startedAtNs: 0n, finishedAtNs: 0n, owner }, atMs: h.clock.nowMs }]);
  });

  it('labels read ahead and a slow create: the answer is as fresh as the create\'s return, with the exits announced meanwhile', async () => {
    const owner = { ...OWNER, container: 'proxy' };
    const h = harness({ owners: new Map([['containerd://proxy-id', owner]]) });
    // The create takes 3 s by the agent's clock (a burst's), and the sidecar exits by itself meanwhile.
    const create = h.api.create.bind(h.api);
    h.api.create = (async (...args: Parameters<typeof create>) => {
      h.clock.nowMs += 3_000;
      h.exits.containerExited(h.runtime, PROXY_ID, 0);
      return create(...args);
    }) as typeof create;
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    assert.deepEqual(h.runtimeCalls, []);
    const { createdAtMs } = h.handedOver[0]!.timing;
    assert.deepEqual(await h.answers(), [{ containerID: 'containerd://proxy-id', container: { id: 'proxy-id', state: 'exited', exitCode: 0, startedAtNs: 0n, finishedAtNs: 0n, owner }, atMs: createdAtMs }]);
  });

  it('a runtime that fails to answer about the sidecar: no answer given (the reconciler asks again)', async () => {
    const h = harness({ status: () => { throw new Error('runtime down'); } });
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    assert.deepEqual(await h.answers(), []);
  });

  it('the controller created it first (409, unseen by the watch yet): counted as existed, no event, no Warning', async () => {
    const h = harness();
    h.cache.stale = [];
    h.api.set(REQUEST, { metadata: { labels: { [LABEL_POD_UID]: UID, [LABEL_NODE_NAME]: NODE, 'written-by': 'controller' } }, spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] } });
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    assert.deepEqual(h.api.lines({ method: 'create', path: requestPath('ns') }), [`POST ${requestPath('ns')} 409`]);
    assert.equal(await h.onExit('created'), 0);
    assert.deepEqual(h.handedOver, [], 'the watch delivers the controller\'s request');
    assert.deepEqual(await h.events(), []);
    assert.equal(h.api.object<ContainerRecreateRequest>(REQUEST)?.metadata.labels?.['written-by'], 'controller');
  });

  describe('our name taken by a request not ours (unseen by the watch: another node\'s label)', () => {
    const squat = (attempt: number) => ({
      metadata: { labels: { [LABEL_POD_UID]: UID, [LABEL_NODE_NAME]: 'elsewhere' } },
      spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] },
      path: requestPath('ns', requestName(UID, attempt)),
    });
    it('-<uid> taken: the next free name is created at once, with its own event', async () => {
      const h = harness();
      h.cache.stale = [];
      const taken = squat(1);
      h.api.set(taken.path, { metadata: taken.metadata, spec: taken.spec });
      h.exits.containerExited(h.runtime, MAIN_ID, 0);
      await h.exits.idle();
      h.exits.stop();
      assert.equal(h.handedOver[0]?.request.metadata.name, requestName(UID, 2));
      assert.deepEqual(h.api.lines({ method: 'create', path: requestPath('ns') }), [`POST ${requestPath('ns')} 409`, `POST ${requestPath('ns')} 201`]);
      assert.equal(await h.onExit('created'), 1);
      assert.deepEqual(await h.events(), [`Normal ${EVENT_REASONS.stopping}`]);
    });

    it('-<uid> and -<uid>-2 taken, then -3 held by ours (the controller was first): nothing created, counted as existed', async () => {
      const h = harness();
      h.cache.stale = [];
      for (const attempt of [1, 2]) {
        const taken = squat(attempt);
        h.api.set(taken.path, { metadata: taken.metadata, spec: taken.spec });
      }
      h.api.set(requestPath('ns', requestName(UID, 3)), { metadata: { labels: { [LABEL_POD_UID]: UID, [LABEL_NODE_NAME]: NODE } }, spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] } });
      h.exits.containerExited(h.runtime, MAIN_ID, 0);
      await h.exits.idle();
      h.exits.stop();
      assert.equal(h.api.lines({ method: 'create', path: requestPath('ns') }).length, 3);
      assert.deepEqual(h.handedOver, []);
    });

    it('taken names without end: after a few tries the request is left to the controller', async () => {
      const h = harness();
      h.cache.stale = [];
      for (let attempt = 1; attempt <= 10; attempt++) {
        const taken = squat(attempt);
        h.api.set(taken.path, { metadata: taken.metadata, spec: taken.spec });
      }
      h.exits.containerExited(h.runtime, MAIN_ID, 0);
      await h.exits.idle();
      h.exits.stop();
      assert.equal(h.api.lines({ method: 'create', path: requestPath('ns') }).length, 4);
    });
  });

  it('a request the watch already shows: nothing is created', async () => {
    const h = harness();
    // The watch holds only requests labelled with this node.
    h.api.set(REQUEST, { metadata: { labels: { [LABEL_POD_UID]: UID, [LABEL_NODE_NAME]: NODE } }, spec: { podName: 'job-pod', containers: [{ name: 'proxy' }] } });
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    assert.deepEqual(h.api.lines({ method: 'create' }), []);
  });

  for (const [name, fault] of [['answered 429', 429], ['answered 500', 500], ['that got no answer', networkError()]] as const) {
    it(`a create ${name} is retried by the queue, then created: one event`, async () => {
      mock.timers.enable({ apis: ['setTimeout'] });
      try {
        const h = harness();
        h.api.inject({ method: 'create', path: requestPath('ns') }, fault);
        h.exits.containerExited(h.runtime, MAIN_ID, 0);
        await h.exits.idle();
        const status = typeof fault === 'number' ? fault : 0;
        assert.deepEqual(h.api.lines({ method: 'create', path: requestPath('ns') }), [`POST ${requestPath('ns')} ${status}`], 'nothing before the queue\'s backoff');
        mock.timers.tick(199);
        await h.exits.idle();
        assert.equal(h.api.lines({ method: 'create', path: requestPath('ns') }).length, 1);
        mock.timers.tick(1);
        await h.exits.idle();
        h.exits.stop();
        assert.deepEqual(h.api.lines({ method: 'create', path: requestPath('ns') }), [`POST ${requestPath('ns')} ${status}`, `POST ${requestPath('ns')} 201`]);
        assert.equal(await h.onExit('created'), 1);
        assert.deepEqual(await h.events(), [`Normal ${EVENT_REASONS.stopping}`]);
      } finally {
        mock.timers.reset();
      }
    });
  }

  it('an exit kubelet has not reported yet: the runtime\'s labels name the Pod, its listing gives the containers', async () => {
    const pending = projectPod(makePod({ phase: 'Pending', containers: [main('main', 'noStatus'), sidecar('proxy', 'noStatus')] }));
    const h = harness({
      pods: [pending],
      status: (id) => ({ id, state: 'exited', exitCode: 0, startedAtNs: 1n, finishedAtNs: 2n, owner: OWNER }),
      podContainers: [{ id: MAIN_ID, name: 'main', attempt: 0, state: 'running' }, { id: PROXY_ID, name: 'proxy', attempt: 0, state: 'running' }],
    });
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    h.exits.stop();
    // The listing still shows the main running: the exit event's code stands.
    assert.deepEqual(h.runtimeCalls, ['status main-id', `podContainers ${UID}`, 'status proxy-id']);
    assert.deepEqual(h.api.object<ContainerRecreateRequest>(REQUEST)?.spec.containers.map((c) => c.name), ['proxy']);
  });

  it('an exit in a container of no cached Pod, or of a Pod on another node: nothing', async () => {
    const elsewhere = projectPod(makePod({ containers: [main('main'), sidecar('proxy')], nodeName: 'node-2' }));
    for (const o of [{ pods: [] }, { pods: [elsewhere] }] as HarnessOptions[]) {
      const h = harness({ ...o, status: (id) => ({ id, state: 'exited', exitCode: 0, startedAtNs: 1n, finishedAtNs: 2n, owner: OWNER }) });
      h.exits.containerExited(h.runtime, MAIN_ID, 0);
      await h.exits.idle();
      h.exits.stop();
      assert.deepEqual(h.api.calls, []);
    }
  });

  it('R7, R43: a main kubelet may restart whatever its code (OnFailure, liveness probe) waits for kubelet\'s report, then goes on the Pod\'s next update', async () => {
    const probed = (state: 'running' | { exit: number }) => {
      const raw = makePod({ restartPolicy: 'OnFailure', containers: [main('main', state), sidecar('proxy')] });
      raw.spec!.containers[0]!.livenessProbe = { exec: { command: ['check'] } };
      return projectPod(raw);
    };
    const pods = [probed('running')];
    const h = harness({ pods });
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    assert.deepEqual(h.api.lines({ method: 'create' }), [], 'the runtime\'s exit 0 alone may be a probe kill kubelet restarts');
    // An update where kubelet still shows the main running: still waiting, looked at again later.
    h.exits.podChanged('ns', 'job-pod');
    await h.exits.idle();
    assert.deepEqual(h.api.lines({ method: 'create' }), []);
    // Kubelet reports that very container terminated with 0: it does not restart it.
    pods[0] = probed({ exit: 0 });
    h.exits.podChanged('ns', 'job-pod');
    await h.exits.idle();
    assert.deepEqual(h.api.object<ContainerRecreateRequest>(REQUEST)?.spec.containers.map((c) => c.name), ['proxy']);
    // Nothing waits any more: a further update does not look again.
    h.exits.podChanged('ns', 'job-pod');
    await h.exits.idle();
    h.exits.stop();
    assert.equal(h.api.lines({ method: 'create', path: requestPath('ns') }).length, 1);
  });

  it('after stop(), exits are not acted on', async () => {
    const h = harness();
    h.exits.stop();
    h.exits.containerExited(h.runtime, MAIN_ID, 0);
    await h.exits.idle();
    assert.deepEqual(h.api.calls, []);
  });
});
