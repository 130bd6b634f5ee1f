// e2e group: shared
// Attacks on the request path, tried on the real cluster as the people who could make them: a user
// holding only `create` (and reads) on requests in their own namespace, and an agent token bound to
// another node. Whatever they write, nothing is executed or stopped outside the Pod the request
// names, every refusal is visible (API error, request status, Warning event), and the agent and
// controller keep working (an agent rolled out in the middle of a stop: e2e/agent-crash.test.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import * as k8s from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../api/container-recreate-request.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { apiAs, requestsPath } from './support/api-as.ts';
import type { ApiAnswer, Caller } from './support/api-as.ts';
import { apiStatus, clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { AGENT, NAMESPACE, TEST_SIDECAR_START_TIMEOUT_SECONDS, agentPod, controllerLeader, deployProject, ourRestarts } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container, podEvents, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus, jobCondition, jobPods } from './support/workloads.ts';

const { core, rbac } = clients();
const LABEL = {
  node: 'crr.sidecar-terminator.dev/node-name',
  uid: 'crr.sidecar-terminator.dev/pod-uid',
  active: 'crr.sidecar-terminator.dev/active',
  createdBy: 'crr.sidecar-terminator.dev/created-by',
};
const FAKE_NODE = 'st-e2e-fake-node';
const MISSING_IMAGE = 'sidecar-terminator.local/not-there:1';

let victimNs: string;
let attackerNs: string;
let victim: { name: string; containerID: string };
/** Restart counts of our Pods when the suite starts (earlier suites crash them on purpose). */
let restartsBefore: Map<string, number>;

const attacker = (): Caller => ({ user: `system:serviceaccount:${attackerNs}:attacker` });

function request(name: string, podName: string, containers: object[], extra: { labels?: Record<string, string>; spec?: object } = {}): object {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'ContainerRecreateRequest',
    metadata: { name, namespace: attackerNs, ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: { podName, containers, ...extra.spec },
  };
}

async function create(caller: Caller, body: object): Promise<ApiAnswer> {
  return apiAs(caller, 'POST', requestsPath(attackerNs), body);
}

async function created(caller: Caller, body: object): Promise<void> {
  const answer = await create(caller, body);
  assert.equal(answer.status, 201, `create: ${answer.status} ${answer.body.message ?? ''}`);
}

const readRequest = (name: string) => jobs.readRequest(attackerNs, name);
const completed = (name: string, timeoutMs?: number) => jobs.completedRequest(attackerNs, name, timeoutMs);

function logs(namespace: string, pod: string, name: string): string {
  try {
    return kubectl('-n', namespace, 'logs', pod, '-c', name);
  } catch {
    return '';
  }
}

/** A Pod created by the admin (the attacker's namespace may well let its owner create Pods). */
async function startPod(namespace: string, name: string, containers: V1Container[], restartPolicy: 'Always' | 'Never' = 'Never'): Promise<V1Pod> {
  await core.createNamespacedPod({ namespace, body: { metadata: { name }, spec: { nodeName: clusterEnv().nodeName, restartPolicy, terminationGracePeriodSeconds: 10, containers } } });
  return waitFor(async () => {
    const p = await core.readNamespacedPod({ namespace, name });
    const statuses = p.status?.containerStatuses ?? [];
    const settled = statuses.length === containers.length && statuses.every((s) => s.state?.running || s.state?.waiting?.reason === 'ErrImageNeverPull');
    return settled ? p : undefined;
  }, { description: `Pod ${namespace}/${name} started`, timeoutMs: 90_000 });
}

/** The victim's container is as it was: same container, running, never stopped, no hook run in it. */
async function assertVictimUntouched(): Promise<void> {
  const p = await core.readNamespacedPod({ namespace: victimNs, name: victim.name });
  const s = p.status?.containerStatuses?.[0];
  assert.equal(s?.containerID, victim.containerID, 'the same container');
  assert.ok(s?.state?.running, `still running: ${JSON.stringify(s?.state)}`);
  assert.equal(s?.restartCount, 0);
  const out = logs(victimNs, victim.name, 'app');
  assert.doesNotMatch(out, /PWNED|TERMINATED/, out);
}

async function reasons(pod: V1Pod, reason: string): Promise<string[]> {
  return (await podEvents(pod)).filter((e) => e.includes(` ${reason}: `));
}

describe('security: a request reaches only the containers its creator may touch', { timeout: 900_000 }, () => {
  before(async () => {
    await deployProject();
    restartsBefore = await ourRestarts();
    victimNs = await createTestNamespace(core, 'victim');
    attackerNs = await createTestNamespace(core, 'attacker');
    const pod = await startPod(victimNs, 'victim', [container('app', "trap 'echo TERMINATED; exit 0' TERM; while true; do sleep 1; done")], 'Always');
    victim = { name: 'victim', containerID: pod.status!.containerStatuses![0]!.containerID! };
    // The attacker: a ServiceAccount allowed to create and read requests in its own namespace only.
    await core.createNamespacedServiceAccount({ namespace: attackerNs, body: { metadata: { name: 'attacker' } } });
    await rbac.createNamespacedRole({ namespace: attackerNs, body: {
      metadata: { name: 'requests' },
      rules: [{ apiGroups: [GROUP], resources: [PLURAL], verbs: ['create', 'get', 'list', 'watch'] }],
    } });
    await rbac.createNamespacedRoleBinding({ namespace: attackerNs, body: {
      metadata: { name: 'attacker-requests' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'requests' },
      subjects: [{ kind: 'ServiceAccount', name: 'attacker', namespace: attackerNs }],
    } });
  });
  after(async () => {
    for (const ns of [attackerNs, victimNs]) if (ns) await deleteTestNamespace(core, ns);
    try {
      await core.deleteNode({ name: FAKE_NODE });
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  });

  it('the attacker cannot reach other namespaces or write request status', async () => {
    const elsewhere = await apiAs(attacker(), 'POST', requestsPath(victimNs), request('x', victim.name, [{ name: 'app' }]));
    assert.equal(elsewhere.status, 403);
    await created(attacker(), request('status-probe', 'nobody', [{ name: 'app' }]));
    const status = await apiAs(attacker(), 'PATCH', `${requestsPath(attackerNs)}/status-probe/status`, { status: { phase: 'Completed' } });
    assert.equal(status.status, 403);
  });

  it("a creator's preStop hook and ports are not part of the request: only the Pod's own hook runs", async () => {
    await startPod(attackerNs, 'own', [container('app', "trap 'exit 0' TERM; while true; do sleep 1; done", {
      lifecycle: { preStop: { exec: { command: ['sh', '-c', 'echo OWN-HOOK > /proc/1/fd/1'] } } },
    })]);
    await created(attacker(), request('forged-hook', 'own', [{
      name: 'app',
      preStop: { exec: { command: ['sh', '-c', 'echo PWNED > /proc/1/fd/1'] } },
      ports: [{ containerPort: 1 }],
    }]));
    // Not in the schema: the API server drops them on the way in.
    const stored = (await readRequest('forged-hook'))!.spec.containers[0]! as object;
    assert.ok(!('preStop' in stored) && !('ports' in stored), JSON.stringify(stored));
    const done = await completed('forged-hook');
    assert.equal(done.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(done.status));
    const out = logs(attackerNs, 'own', 'app');
    assert.match(out, /OWN-HOOK/);
    assert.doesNotMatch(out, /PWNED/);
  });

  it("a forged container ID of another namespace's container is never stopped, plain or pre-labelled", async () => {
    const pod = await startPod(attackerNs, 'unstarted', [container('app', 'sleep 3600', { image: MISSING_IMAGE })]);
    const context = { containerID: victim.containerID, restartCount: 0 };
    await created(attacker(), request('forged-id', 'unstarted', [{ name: 'app', statusContext: context }], { spec: { activeDeadlineSeconds: 10, strategy: { forceRecreate: true } } }));
    const plain = await completed('forged-id');
    assert.notEqual(plain.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(plain.status));
    const labels = { [LABEL.node]: clusterEnv().nodeName, [LABEL.uid]: pod.metadata!.uid!, [LABEL.active]: 'true', [LABEL.createdBy]: 'sidecar-terminator' };
    await created(attacker(), request('forged-id-labelled', 'unstarted', [{ name: 'app', statusContext: context }], { labels, spec: { activeDeadlineSeconds: 10 } }));
    const labelled = await completed('forged-id-labelled');
    assert.notEqual(labelled.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(labelled.status));
    await assertVictimUntouched();
  });

  it("a pre-labelled request naming another Pod's uid is refused and stops nothing", async () => {
    const own = await startPod(attackerNs, 'bystander', [container('app', stopOnTerm(0))]);
    const victimPod = await core.readNamespacedPod({ namespace: victimNs, name: victim.name });
    const labels = { [LABEL.node]: clusterEnv().nodeName, [LABEL.uid]: victimPod.metadata!.uid!, [LABEL.active]: 'true' };
    const context = { containerID: own.status!.containerStatuses![0]!.containerID!, restartCount: 0 };
    await created(attacker(), request('forged-uid', 'bystander', [{ name: 'app', statusContext: context }], { labels }));
    const done = await completed('forged-uid');
    assert.match(done.status?.message ?? '', /uid/, JSON.stringify(done.status));
    const now = await core.readNamespacedPod({ namespace: attackerNs, name: 'bystander' });
    assert.ok(now.status?.containerStatuses?.[0]?.state?.running, 'the named Pod was not stopped either');
    await assertVictimUntouched();
  });

  it("the runtime's labels are checked before any exec or stop: a Pod status naming another Pod's container is refused", async () => {
    // A lying Pod status (as only a compromised status writer could make): the agent must still
    // check what the runtime says the container belongs to.
    const pod = await startPod(attackerNs, 'liar', [container('app', 'sleep 3600', {
      image: MISSING_IMAGE,
      lifecycle: { preStop: { exec: { command: ['sh', '-c', 'echo PWNED > /proc/1/fd/1'] } } },
    })]);
    await core.patchNamespacedPodStatus({ namespace: attackerNs, name: 'liar', body: { status: { containerStatuses: [{
      name: 'app', image: MISSING_IMAGE, imageID: '', ready: false, restartCount: 0, started: true,
      containerID: victim.containerID, state: { running: { startedAt: new Date() } },
    }] } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
    await created(attacker(), request('lying-status', 'liar', [{ name: 'app' }]));
    const done = await completed('lying-status');
    const text = JSON.stringify(done.status);
    assert.match(text, /refused/, text);
    assert.match(text, /nothing was executed/, text);
    await waitFor(async () => (await reasons(pod, EVENT_REASONS.requestRefused)).length > 0, { description: `a ${EVENT_REASONS.requestRefused} Warning on the Pod`, timeoutMs: 30_000 });
    await assertVictimUntouched();
  });

  const agentsCreate = versionFeatures().admissionPolicies;
  it(`a request whose node label disagrees with its Pod's node (forged by ${agentsCreate ? 'another node\'s agent' : 'the attacker'}) never runs and never holds the Job up`, async () => {
    // 1.30+: an agent token bound to another node (a Node object with no kubelet, kept off the
    // DaemonSet). Before 1.30 agents may create no request at all; the attacker, who may in its
    // namespace, forges it.
    let forger: Caller = attacker();
    if (agentsCreate) {
      const node = await core.createNode({ body: { metadata: { name: FAKE_NODE, labels: { type: 'virtual-kubelet' } } } });
      forger = { token: kubectl('-n', NAMESPACE, 'create', 'token', AGENT, '--bound-object-kind', 'Node', '--bound-object-name', FAKE_NODE, '--bound-object-uid', node.metadata!.uid!).trim() };
    }
    await jobs.runJob(attackerNs, 'held', { restartPolicy: 'Never', containers: [container('main', 'sleep 10'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    const pod = await waitFor(async () => {
      const [p] = await jobPods(core, attackerNs, 'held');
      return p?.status?.containerStatuses?.every((s) => s.state?.running) ? p : undefined;
    }, { description: 'Job Pod running', timeoutMs: 60_000 });
    const uid = pod.metadata!.uid!;
    const name = `sidecar-termination-${uid}`;
    const proxy = containerStatus(pod, 'proxy')!;
    await created(forger, request(name, pod.metadata!.name!, [{ name: 'proxy', statusContext: { containerID: proxy.containerID!, restartCount: 0 } }], {
      labels: { [LABEL.node]: FAKE_NODE, [LABEL.uid]: uid, [LABEL.active]: 'true', [LABEL.createdBy]: 'sidecar-terminator' },
    }));
    const forged = await completed(name, 30_000);
    assert.match(forged.status?.message ?? '', /does not match/, JSON.stringify(forged.status));
    assert.notEqual(forged.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');

    const { job, type } = await jobs.finishedJob(attackerNs, 'held', 90_000);
    assert.equal(type, 'Complete');
    const done = await core.readNamespacedPod({ namespace: attackerNs, name: pod.metadata!.name! });
    const mainEnd = jobs.finishedAt(done, 'main')!.getTime();
    const jobEnd = new Date(jobCondition(job, 'Complete')!.lastTransitionTime!).getTime();
    assert.ok(jobEnd - mainEnd < 30_000, `the Job completed ${jobEnd - mainEnd} ms after its main: not held up by the forged request`);
    const ours = await readRequest(`${name}-2`);
    assert.equal(ours?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(ours?.status));
    assert.deepEqual(await reasons(done, EVENT_REASONS.retrying), []);
    // The refusal is on the Pod too, once.
    await waitFor(async () => (await reasons(done, EVENT_REASONS.requestRefused)).length === 1, { description: `one ${EVENT_REASONS.requestRefused} Warning on the Pod`, timeoutMs: 30_000 });

    // Nor can that token write the status of a request of the real node (before 1.30 nothing
    // confines an agent's status writes: README, "Supported Kubernetes versions").
    if (!agentsCreate) return;
    const write = await apiAs(forger, 'PATCH', `${requestsPath(attackerNs)}/${name}-2/status`, { status: { message: 'forged' } });
    assert.notEqual(write.status, 200, JSON.stringify(write.body));
    assert.match(write.body.message ?? '', /may create and update requests only for Pods on its own node/);
  });

  it('durations past what a timer can hold are refused by the API with a clear error', async () => {
    for (const spec of [{ activeDeadlineSeconds: 2_200_000 }, { ttlSecondsAfterFinished: 1_000_000_000 }, { strategy: { minStartedSeconds: 2_000_000_000 } }]) {
      const answer = await create(attacker(), request('too-long', 'x', [{ name: 'app' }], { spec }));
      assert.equal(answer.status, 422, JSON.stringify(answer.body));
      assert.match(answer.body.message ?? '', /less than or equal to/);
    }
  });

  it('huge and odd annotation and env values give a bounded number of events, and the Job completes', async () => {
    const junk = Array.from({ length: 12_000 }, (_, i) => `junk-${i}`).join(',');
    assert.ok(junk.length > 100 * 1024);
    await jobs.runJob(attackerNs, 'noisy', {
      restartPolicy: 'Never',
      annotations: { 'sidecar-terminator.dev/sidecars': `proxy,${junk},${'x'.repeat(5000)}`, 'sidecar-terminator.dev/ignore-exit-code': `${junk},main` },
      containers: [
        container('main', 'sleep 2', { env: [{ name: 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE', value: 'true' }] }),
        container('proxy', stopOnTerm(0), { env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: `\u202e${'ü'.repeat(2000)}\n` }] }),
      ],
    });
    const { type } = await jobs.finishedJob(attackerNs, 'noisy', 90_000);
    assert.equal(type, 'Complete');
    const pod = await jobs.onlyPod(attackerNs, 'noisy');
    await sleep(3_000); // events are sent in the background
    const warnings = (await podEvents(pod)).filter((e) => e.startsWith('Warning'));
    assert.ok(warnings.length <= 4, `at most one Warning per reason and annotation, got ${warnings.length}:\n${warnings.map((w) => w.slice(0, 200)).join('\n')}`);
    assert.ok(warnings.some((w) => /SidecarAnnotationUnknownContainer/.test(w) && /more/.test(w)), warnings.map((w) => w.slice(0, 300)).join('\n'));
    assert.ok(warnings.every((w) => w.length < 4096), 'event messages stay short');
  });

  it('more sidecars than one request holds: every one is stopped, the Job completes', async () => {
    const sidecars = Array.from({ length: 65 }, (_, i) => container(`side-${i}`, stopOnTerm(0), { env: [SIDECAR_MARK], resources: { requests: { cpu: '1m', memory: '1Mi' } } }));
    await jobs.runJob(attackerNs, 'many', { restartPolicy: 'Never', containers: [container('main', 'sleep 5'), ...sidecars] });
    const { type } = await jobs.finishedJob(attackerNs, 'many', 300_000);
    assert.equal(type, 'Complete');
    const pod = await jobs.onlyPod(attackerNs, 'many');
    const requests = await jobs.requestsFor(pod);
    const stopped = requests.flatMap((r) => r.status?.containerRecreateStates ?? []).filter((s) => s.phase === 'Succeeded').map((s) => s.name);
    assert.equal(new Set(stopped).size, 65);
    assert.ok(requests.every((r) => r.spec.containers.length <= 64));
  });

  it('a sidecar that never starts: a Warning, then the Pod ends with its phase from the mains', async () => {
    await jobs.runJob(attackerNs, 'unstartable', { restartPolicy: 'Never', containers: [container('main', 'sleep 1'), container('proxy', 'sleep 3600', { image: MISSING_IMAGE, env: [SIDECAR_MARK] })] });
    const { type } = await jobs.finishedJob(attackerNs, 'unstartable', (TEST_SIDECAR_START_TIMEOUT_SECONDS + 60) * 1000);
    assert.equal(type, 'Complete');
    const pod = await jobs.onlyPod(attackerNs, 'unstartable');
    assert.equal(pod.status?.phase, 'Succeeded');
    assert.ok((await reasons(pod, EVENT_REASONS.sidecarNotStarted)).length === 1, (await podEvents(pod)).join('\n'));
  });

  it('the agent and the controller kept working through all of it', async () => {
    const agent = await agentPod();
    assert.ok(agent.status?.containerStatuses?.every((s) => s.ready), JSON.stringify(agent.status?.containerStatuses));
    await controllerLeader();
    // Any Pod of ours that was there from the start did not restart.
    for (const [name, restarts] of await ourRestarts()) {
      if (restartsBefore.has(name)) assert.equal(restarts, restartsBefore.get(name), `${name} restarted during the attacks`);
      else assert.equal(restarts, 0, `${name} restarted`);
    }
    await jobs.runJob(attackerNs, 'after', { restartPolicy: 'Never', containers: [container('main', 'sleep 1'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    assert.equal((await jobs.finishedJob(attackerNs, 'after')).type, 'Complete');
  });
});
