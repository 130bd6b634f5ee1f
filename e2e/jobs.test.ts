// e2e group: shared
// The Job sidecar terminator end to end: real Jobs on the local cluster with the controller and the
// agent running, one test per scenario S1–S10 of docs/design.md (a virtual node's:
// e2e/virtual-node.test.ts). Each prints its timeline.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_SIDECARS, CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import type { JobSpec } from './support/jobs.ts';
import * as jobs from './support/jobs.ts';
import { BUSYBOX, container, finishedAt, IGNORE_EXIT_MARK, podEvents, requestsFor, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { CONTROLLER_METRICS_PORT, controllerLeader, deployProject, podMetric } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus, jobPods, toDate } from './support/workloads.ts';

const { core } = clients();
let namespace: string;

const runJob = (name: string, spec: JobSpec) => jobs.runJob(namespace, name, spec);
const finishedJob = (name: string, timeoutMs?: number) => jobs.finishedJob(namespace, name, timeoutMs);
const onlyPod = (job: string) => jobs.onlyPod(namespace, job);
const timeline = (...args: Parameters<typeof jobs.timeline>) => console.log(`# ${jobs.timeline(...args)}`);

/** Kubelet's "Pod attempted illegal phase transition" lines: a Pod moved off a phase in the API. */
function illegalTransitions(): string[] {
  const { logsDir } = clusterEnv();
  const logs = readdirSync(logsDir).filter((f) => /^kubelet.*\.log$/.test(f));
  return logs.flatMap((f) => readFileSync(join(logsDir, f), 'utf8').split('\n')).filter((line) => line.includes('illegal phase transition'));
}

function terminated(pod: V1Pod, name: string): { exitCode?: number; reason?: string } {
  const t = containerStatus(pod, name)?.state?.terminated;
  return { exitCode: t?.exitCode, reason: t?.reason };
}

describe('Job sidecar termination on the local cluster', () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'jobs');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('Never, main exits 0, sidecar exits 0 on SIGTERM: Job Complete', async () => {
    await runJob('ok', { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    const { job, type } = await finishedJob('ok');
    const pod = await onlyPod('ok');
    const [request] = await requestsFor(pod);
    timeline('Never, exit 0', job, pod, 'main', 'proxy', request);
    assert.equal(type, 'Complete');
    assert.deepEqual(terminated(pod, 'proxy').exitCode, 0);
    assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
    const ev = await podEvents(pod);
    assert.ok(ev.some((e) => e.startsWith('Normal') && e.includes('"proxy"') && e.includes(request!.metadata.name!)), ev.join('\n'));
    assert.ok(ev.some((e) => e.startsWith('Normal Killing')), ev.join('\n'));
  });

  it('R56: the phase kubelet settled is written at its report of the last exit, and kubelet keeps it; a Guaranteed Pod\'s is kubelet\'s', async () => {
    const names = [1, 2, 3, 4, 5].map((i) => `settled-${i}`);
    const guaranteed = { requests: { cpu: '50m', memory: '32Mi' }, limits: { cpu: '50m', memory: '32Mi' } };
    await Promise.all([
      ...names.map((name) => runJob(name, { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] })),
      runJob('guaranteed', {
        restartPolicy: 'Never',
        containers: [container('main', 'sleep 2', { resources: guaranteed }), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK], resources: guaranteed })],
      }),
    ]);
    const finished = [];
    for (const name of names) finished.push({ name, ...(await finishedJob(name)) });
    // Kubelet's own syncs of the terminal Pods come after: give them time to move a phase, if they would.
    await sleep(10_000);
    const illegal = illegalTransitions();
    let written = 0;
    for (const { name, job, type } of finished) {
      const pod = await onlyPod(name);
      const condition = pod.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED);
      timeline(`R56 ${name} (${condition?.reason ?? 'phase by kubelet'})`, job, pod, 'main', 'proxy');
      assert.equal(type, 'Complete');
      assert.equal(pod.status?.phase, 'Succeeded');
      assert.equal(job.status?.failed ?? 0, 0);
      assert.deepEqual(illegal.filter((line) => line.includes(pod.metadata!.name!)), []);
      if (condition) {
        assert.equal(condition.reason, 'AllContainersSucceeded');
        written++;
      }
    }
    // Kubelet reports the exits a second or more before its own phase write: ours comes first.
    assert.ok(written > 0, 'no Pod got its phase from the controller');
    // Kubelet frees a Guaranteed Pod's CPUs and memory only as it tears the Pod down: its phase is kubelet's.
    const { type } = await finishedJob('guaranteed');
    const pod = await onlyPod('guaranteed');
    assert.equal(type, 'Complete');
    assert.equal(pod.status?.qosClass, 'Guaranteed');
    assert.equal(pod.status?.phase, 'Succeeded');
    assert.equal(pod.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED), undefined, 'the phase was kubelet\'s');
  });

  it('Never, main exits 1: sidecar released, Job Failed', async () => {
    await runJob('main-fails', { restartPolicy: 'Never', containers: [container('main', 'sleep 1; exit 1'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    const { job, type } = await finishedJob('main-fails');
    const pod = await onlyPod('main-fails');
    timeline('Never, main exit 1', job, pod, 'main', 'proxy', (await requestsFor(pod))[0]);
    assert.equal(type, 'Failed');
    assert.equal(terminated(pod, 'main').exitCode, 1);
    assert.equal(terminated(pod, 'proxy').exitCode, 0);
    assert.equal(pod.status?.phase, 'Failed');
  });

  it('OnFailure, main exits 1 then succeeds: no termination until the success, then Job Complete', async () => {
    const once = 'if [ -f /work/failed-once ]; then sleep 1; exit 0; else touch /work/failed-once; sleep 1; exit 1; fi';
    await runJob('retry', {
      restartPolicy: 'OnFailure',
      backoffLimit: 6, // with OnFailure the Job controller counts container restarts against it
      volumes: [{ name: 'work', emptyDir: {} }],
      containers: [
        container('main', once, { volumeMounts: [{ name: 'work', mountPath: '/work' }] }),
        container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] }),
      ],
    });
    const { job, type } = await finishedJob('retry');
    const pod = await onlyPod('retry');
    const requests = await requestsFor(pod);
    timeline('OnFailure, main fails once', job, pod, 'main', 'proxy', requests[0]);
    assert.equal(type, 'Complete');
    assert.equal(containerStatus(pod, 'main')?.restartCount, 1);
    assert.equal(containerStatus(pod, 'proxy')?.restartCount, 0);
    assert.equal(requests.length, 1);
    // The request came after the main's successful second run, not after its failure.
    assert.ok(toDate(requests[0]!.metadata.creationTimestamp)! >= finishedAt(pod, 'main')!);
  });

  it('OnFailure, main exits 0, sidecar exits 143 on SIGTERM: not left hanging', async () => {
    await runJob('exit-143', { restartPolicy: 'OnFailure', backoffLimit: 6, containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(143), { env: [SIDECAR_MARK] })] });
    const { job, type } = await finishedJob('exit-143');
    // The controller's Succeeded ends kubelet's restart loop. Once on 1.35.4 (1 run of 4) the Pod read
    // right after the Job's end said Running, not seen again in three more runs: the Pod must be
    // Succeeded within 30 s (the controller decides from the Pod as it is, each time it changes).
    const pod = await waitFor(async () => {
      const now = await onlyPod('exit-143');
      return now.status?.phase === 'Succeeded' ? now : undefined;
    }, { description: 'the Pod Succeeded', timeoutMs: 30_000 });
    timeline('OnFailure, sidecar 143', job, pod, 'main', 'proxy', (await requestsFor(pod))[0]);
    assert.equal(type, 'Complete');
    assert.equal(terminated(pod, 'main').exitCode, 0);
    const ev = await podEvents(pod);
    assert.ok(ev.some((e) => e.startsWith('Warning')), `a Warning says the restart loop was ended:\n${ev.join('\n')}`);
    // Once the Pod is terminal: no new request, none left waiting, no "still running" retry Warning.
    await waitFor(async () => (await requestsFor(pod)).every((r) => r.status?.phase === 'Completed'), { description: 'no request left waiting', timeoutMs: 30_000 });
    await sleep(5_000);
    const requests = await requestsFor(pod);
    assert.equal(requests.length, 1, requests.map((r) => r.metadata.name).join(', '));
    assert.ok(!(await podEvents(pod)).some((e) => e.includes(EVENT_REASONS.retrying)));
  });

  it('Never, sidecar ignores SIGTERM, ignore-exit-code: Job Complete', async () => {
    await runJob('ignore-exit', {
      restartPolicy: 'Never', grace: 3,
      containers: [container('main', 'sleep 2'), container('proxy', "trap '' TERM; while true; do sleep 1; done", { env: [SIDECAR_MARK, IGNORE_EXIT_MARK] })],
    });
    const { job, type } = await finishedJob('ignore-exit');
    const pod = await onlyPod('ignore-exit');
    timeline('Never, ignore-exit-code', job, pod, 'main', 'proxy');
    assert.equal(type, 'Complete');
    assert.equal(pod.status?.phase, 'Succeeded');
    assert.equal(pod.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED)?.status, 'True');
    await waitFor(async () => {
      const p = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
      return containerStatus(p, 'proxy')?.state?.terminated;
    // A terminal Pod gets no new request: the agent stops what is left within its grace (R45;
    // e2e/security-queue.test.ts times it), where kubelet alone waits for its next sync (85 s).
    }, { description: 'the ignore-exit-code sidecar stopped', timeoutMs: 180_000 });
  });

  it('two mains and three sidecars, one already exited: only the running ones are stopped', async () => {
    await runJob('many', {
      restartPolicy: 'Never',
      containers: [
        container('main-a', 'sleep 2'),
        container('main-b', 'sleep 3'),
        container('early', 'sleep 1', { env: [SIDECAR_MARK] }),
        container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] }),
        container('logs', stopOnTerm(0), { env: [SIDECAR_MARK] }),
      ],
    });
    const { job, type } = await finishedJob('many');
    const pod = await onlyPod('many');
    const requests = await requestsFor(pod);
    timeline('two mains, three sidecars', job, pod, 'main-b', 'logs', requests[0]);
    assert.equal(type, 'Complete');
    assert.equal(requests.length, 1);
    assert.deepEqual(requests[0]!.spec.containers.map((c) => c.name).sort(), ['logs', 'proxy']);
  });

  it('annotation-marked sidecar with no env: stopped', async () => {
    await runJob('annotated', {
      restartPolicy: 'Never',
      annotations: { 'sidecar-terminator.dev/sidecars': 'istio-proxy' },
      containers: [container('main', 'sleep 2'), container('istio-proxy', stopOnTerm(0))],
    });
    const { job, type } = await finishedJob('annotated');
    const pod = await onlyPod('annotated');
    timeline('annotation', job, pod, 'main', 'istio-proxy', (await requestsFor(pod))[0]);
    assert.equal(type, 'Complete');
    assert.equal(terminated(pod, 'istio-proxy').exitCode, 0);
  });

  it('main exits before the sidecar has started: stopped once it has', async () => {
    // The sidecar's image is not on the node yet, so it cannot start until the test imports it.
    const late = `sidecar-terminator.local/late:${Date.now()}`;
    await runJob('late', {
      restartPolicy: 'Never',
      containers: [container('main', 'sleep 1'), { ...container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] }), image: late, imagePullPolicy: 'IfNotPresent' }],
    });
    const waitingPod = await waitFor(async () => {
      const pods = await jobPods(core, namespace, 'late');
      return pods[0] && containerStatus(pods[0], 'main')?.state?.terminated ? pods[0] : undefined;
    }, { description: 'main finished while the sidecar waits for its image' });
    assert.deepEqual(await requestsFor(waitingPod), [], 'nothing is requested for a sidecar without a container ID');
    execFileSync('ctr', ['-a', clusterEnv().containerdSocket, '-n', 'k8s.io', 'images', 'tag', BUSYBOX, late]);
    try {
      const { job, type } = await finishedJob('late', 180_000);
      const pod = await onlyPod('late');
      timeline('sidecar started late', job, pod, 'main', 'proxy', (await requestsFor(pod))[0]);
      assert.equal(type, 'Complete');
    } finally {
      execFileSync('ctr', ['-a', clusterEnv().containerdSocket, '-n', 'k8s.io', 'images', 'rm', late]);
    }
  });

  // Native sidecars exist from 1.29 (alpha and off in 1.28): before, only the Always Pod is tried.
  const native = versionFeatures().nativeSidecars;
  it(`${native ? 'native sidecar and ' : ''}a restartPolicy Always Pod with the env: never touched`, async () => {
    if (native) {
      await runJob('native', {
        restartPolicy: 'Never',
        initContainers: [container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK], restartPolicy: 'Always' })],
        containers: [container('main', 'sleep 2')],
      });
    }
    const always: V1Pod = {
      metadata: { name: 'always' },
      spec: { nodeName: clusterEnv().nodeName, restartPolicy: 'Always', containers: [container('main', 'sleep 1'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] },
    };
    await core.createNamespacedPod({ namespace, body: always });
    if (native) assert.equal((await finishedJob('native')).type, 'Complete');
    // Its sidecar running first (a busy node takes a while to start it), then several resyncs of the controller.
    await waitFor(async () => containerStatus(await core.readNamespacedPod({ namespace, name: 'always' }), 'proxy')?.state?.running,
      { description: 'the Always Pod\'s sidecar running', timeoutMs: 60_000 });
    await sleep(8_000);
    const pod = await core.readNamespacedPod({ namespace, name: 'always' });
    assert.deepEqual(await requestsFor(pod), []);
    if (native) assert.deepEqual(await requestsFor(await onlyPod('native')), []);
    assert.equal(containerStatus(pod, 'proxy')?.restartCount, 0);
    assert.ok(containerStatus(pod, 'proxy')?.state?.running);
  });

  it('R52: an istio-proxy nobody marked holds the Pod: one Warning naming it and the gauge; the annotation added to the running Pod releases it', async () => {
    await runJob('unmarked', { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('istio-proxy', stopOnTerm(0))] });
    const pod = await waitFor(async () => {
      const p = await onlyPod('unmarked');
      return (await podEvents(p)).some((e) => e.startsWith(`Warning ${EVENT_REASONS.unmarkedSidecarHoldsPod}:`)) ? p : undefined;
    }, { description: `an ${EVENT_REASONS.unmarkedSidecarHoldsPod} Warning`, timeoutMs: 60_000 });
    const warning = (await podEvents(pod)).find((e) => e.startsWith(`Warning ${EVENT_REASONS.unmarkedSidecarHoldsPod}:`))!;
    assert.match(warning, /"istio-proxy" \(Istio's proxy\) still running after every other container finished/);
    assert.ok(containerStatus(await core.readNamespacedPod({ namespace, name: pod.metadata!.name! }), 'istio-proxy')?.state?.running, 'not stopped: nothing marks it');
    const held = `sidecar_terminator_controller_pods_held_by_unmarked_sidecars{sidecar="istio"}`;
    assert.ok(await podMetric(await controllerLeader(), CONTROLLER_METRICS_PORT, held) >= 1, `${held} counts the Pod`);
    kubectl('-n', namespace, 'annotate', 'pod', pod.metadata!.name!, `${ANNOTATION_SIDECARS}=istio-proxy`);
    const { job, type } = await finishedJob('unmarked');
    timeline('unmarked istio-proxy, then annotated', job, await onlyPod('unmarked'), 'main', 'istio-proxy');
    assert.equal(type, 'Complete');
    await waitFor(async () => await podMetric(await controllerLeader(), CONTROLLER_METRICS_PORT, held) === 0,
      { description: `${held} back to 0`, timeoutMs: 30_000 });
  });
});
