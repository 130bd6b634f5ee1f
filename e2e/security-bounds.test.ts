// e2e group: serial — its fat requests slow every list of the API server, and it changes the controller's leader.
// Hostile namespaces, round three: what a namespace's user can make big is bounded before our parts
// read it, on the real cluster with the shipped memory limits (R48).
// - Fat requests: forty requests of ~1.2 MB (their labels) naming a hooked Job Pod's uid, and a
//   hundred more in another namespace, then a change of the controller's leader (which lists every
//   request anew). The agent lists the Pod's requests before the hook; the new leader lists them
//   all. Neither part restarts, and the Job completes within 60 s of its main. On 1.30+ an admission
//   policy refuses such requests in the first place (tried on its own): the attack runs on 1.27-1.29.
// Exec hooks writing megabytes, which load only the agent, run beside other files:
// e2e/security-hook-output.test.ts.
// The peak memory of each part under each attack is printed against its limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../api/container-recreate-request.ts';
import { apiStatus, clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { AGENT_METRICS_PORT, CONTROLLER, CONTROLLER_METRICS_PORT, NAMESPACE, agentPod, controllerLeader, controllerPods, deployProject, noControllerLeft } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { health, memoryLimit, mib, peakRss } from './support/parts-health.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const features = versionFeatures();
const POD_UID_LABEL = 'crr.sidecar-terminator.dev/pod-uid';

let ns: string;
let other: string;

/** Labels of about `bytes` in all: keys and values as long as the API allows each. */
function fatLabels(n: number, bytes: number): Record<string, string> {
  const prefix = ['a', 'b', 'c'].map((c) => c.repeat(63)).join('.') + '.' + 'd'.repeat(61);
  const labels: Record<string, string> = {};
  for (let i = 0, size = 0; size < bytes; i++) {
    const key = `${prefix}/l-${n}-${i}-${'x'.repeat(60)}`.slice(0, prefix.length + 1 + 63);
    const value = `v${n}-${i}-${'y'.repeat(60)}`.slice(0, 63);
    labels[key] = value;
    size += key.length + value.length + 6;
  }
  return labels;
}

/** Runs the tasks eight at a time, each as the one before it on its lane ends. */
async function eightAtATime(tasks: Array<() => Promise<unknown>>): Promise<void> {
  const left = [...tasks];
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let next = left.shift(); next; next = left.shift()) await next();
  }));
}

function request(namespace: string, name: string, podName: string, labels: Record<string, string>, annotations?: Record<string, string>) {
  return custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, body: {
    apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest',
    metadata: { name, namespace, labels, ...(annotations ? { annotations } : {}) },
    spec: { podName, containers: [{ name: 'proxy' }] },
  } });
}

describe('security: hostile namespaces, round three (R48)', { timeout: 1_200_000 }, () => {
  before(async () => {
    await deployProject();
    ns = await createTestNamespace(core, 'bounds');
    other = await createTestNamespace(core, 'bounds-other');
  });
  after(async () => {
    if (ns) await deleteTestNamespace(core, ns, { timeoutMs: 300_000 });
    if (other) await deleteTestNamespace(core, other, { timeoutMs: 300_000 });
  });

  const noPolicies = !features.admissionPolicies && `Kubernetes ${clusterEnv().k8sVersion} serves no ValidatingAdmissionPolicy v1 (1.30+)`;
  it('1.30+: a request with more than 32 labels, or 16 KiB of annotations, is refused by the API server', { skip: noPolicies }, async () => {
    const refused = async (name: string, labels: Record<string, string>, annotations?: Record<string, string>) => {
      const err = await request(ns, name, 'nothing', labels, annotations).then(() => undefined, (e: unknown) => e);
      assert.equal(apiStatus(err), 422, `${name}: ${String(err)}`);
      assert.match(String((err as { body?: unknown }).body ?? err), /request-metadata\.sidecar-terminator\.dev/);
    };
    await refused('many-labels', Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`l${i}`, 'v'])));
    await refused('fat-annotation', {}, { note: 'x'.repeat(16_400) });
    // Within the bounds: stored.
    await request(ns, 'within-bounds', 'nothing', Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`l${i}`, 'v'])), { note: 'x'.repeat(1_000) });
  });

  // On 1.30+ the request-metadata policy refuses such requests (the first test): the attack runs where
  // nothing refuses it. Its objects cost the API server minutes to delete, so it runs there alone.
  const refused = features.admissionPolicies && `on Kubernetes ${clusterEnv().k8sVersion} the request-metadata policy refuses such requests (tried above)`;
  it('1.27-1.29: forty ~1.2 MB requests naming a hooked Pod, a hundred more elsewhere, a leader change: no restart, no OOM, the Job completes within 60 s of its main', { skip: refused }, async (t) => {
    // The main ends when the test says so (/tmp/go), once the requests are in place.
    await jobs.runJob(ns, 'hooked', {
      restartPolicy: 'Never',
      grace: 20,
      containers: [
        container('main', 'until [ -e /tmp/go ]; do sleep 0.2; done; echo main done'),
        container('proxy', 'trap \'echo "got SIGTERM"; exit 0\' TERM; while :; do sleep 1 & wait $!; done', {
          env: [SIDECAR_MARK],
          lifecycle: { preStop: { exec: { command: ['sh', '-c', 'echo "hook ran" > /proc/1/fd/1'] } } },
        }),
      ],
    });
    const pod = await waitFor(async () => {
      const [p] = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'job-name=hooked' })).items;
      return p && containerStatus(p, 'proxy')?.state?.running ? p : undefined;
    }, { description: 'the hooked Job Pod running', timeoutMs: 90_000 });
    const podName = pod.metadata!.name!;
    const before = await health();
    const limits = { agent: memoryLimit(await agentPod()), controller: memoryLimit(await controllerLeader()) };
    const agentPeak = peakRss(agentPod, AGENT_METRICS_PORT);
    const controllerPeak = peakRss(() => controllerLeader(5_000), CONTROLLER_METRICS_PORT);
    let bytes = 0;
    const create = async (namespace: string, name: string, podName: string, labels: Record<string, string>) => {
      bytes += JSON.stringify(labels).length;
      await request(namespace, name, podName, labels);
    };
    // Labelled with the Pod's uid but naming another Pod: refused by the controller, and kept (their
    // TTL) where the agent reads them before the hooked stop (a hook runs once, whichever request asks).
    const creates = [
      ...Array.from({ length: 40 }, (_, n) => () => create(ns, `fat-${n}`, 'another-pod', { ...fatLabels(n, 600_000), [POD_UID_LABEL]: pod.metadata!.uid! })),
      ...Array.from({ length: 100 }, (_, n) => () => create(other, `fat-${n}`, 'nothing', fatLabels(n, 600_000))),
    ];
    // Eight at a time, as a user's script would.
    await eightAtATime(creates);
    t.diagnostic(`140 requests created, ${mib(bytes)} of labels in all`);
    try {
      // A leader change: the standby lists every request of the cluster when it takes over.
      const leader = await controllerLeader();
      kubectl('-n', NAMESPACE, 'delete', 'pod', leader.metadata!.name!, '--wait=false');
      await waitFor(async () => {
        const now = await controllerLeader(120_000);
        return now.metadata!.name !== leader.metadata!.name ? now : undefined;
      }, { description: 'another controller replica leading', timeoutMs: 120_000 });
      await sleep(10_000);
      kubectl('-n', ns, 'exec', podName, '-c', 'main', '--', 'touch', '/tmp/go');
      const { type } = await jobs.finishedJob(ns, 'hooked', 120_000);
      const done = await jobs.onlyPod(ns, 'hooked');
      const peaks = { agent: await agentPeak(), controller: await controllerPeak() };
      t.diagnostic(`peak RSS: agent ${mib(peaks.agent)} (limit ${limits.agent}), controller leader ${mib(peaks.controller)} (limit ${limits.controller})`);
      const proxy = timestampedLogs(ns, podName, 'proxy');
      const mainEnd = jobs.finishedAt(done, 'main');
      const term = firstLine(proxy, /^got SIGTERM$/);
      assert.ok(firstLine(proxy, /^hook ran$/) && term && mainEnd, showLines(proxy));
      t.diagnostic(`main finished → sidecar's SIGTERM: ${term.atMs - mainEnd.getTime()} ms`);
      // finishedAt is whole seconds.
      assert.ok(term.atMs >= mainEnd.getTime() - 1_000, `the sidecar was stopped after its main, not before:\n${showLines(proxy)}`);
      assert.ok(term.atMs - mainEnd.getTime() < 60_000, `the sidecar was stopped within 60 s of its main:\n${showLines(proxy)}`);
      assert.equal(type, 'Complete');
      const after = await health();
      assert.deepEqual(after.oomKilled, [], 'no part OOM-killed');
      for (const [name, restarts] of Object.entries(before.restarts)) {
        if (name in after.restarts) assert.equal(after.restarts[name], restarts, `${name} not restarted`);
      }
      // A replica that took over during the test: never restarted either.
      for (const p of await controllerPods()) {
        if (!(p.metadata!.name! in before.restarts)) assert.equal(p.status?.containerStatuses?.[0]?.restartCount ?? 0, 0, `the new controller replica ${p.metadata!.name} not restarted`);
      }
    } finally {
      // Cleaned up here, whatever the outcome, timed: the later tests run on this cluster. The
      // controller still works through status writes of the fat requests (each seconds of API server
      // time on this machine, on objects its lagging cache still holds after they are gone), which
      // slowed the cleanup past five minutes: it is off meanwhile. Deleted eight at a time (the API
      // server deletes a collection one object after another).
      kubectl('-n', NAMESPACE, 'scale', `deployment/${CONTROLLER}`, '--replicas=0');
      await noControllerLeft();
      const deleting = Date.now();
      const names = [...Array.from({ length: 40 }, (_, n) => [ns, `fat-${n}`]), ...Array.from({ length: 100 }, (_, n) => [other, `fat-${n}`])];
      await eightAtATime(names.map(([namespace, name]) => () => custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: namespace!, name: name! })
        .catch((err: unknown) => {
          if ((err as { code?: number }).code !== 404) throw err;
        })));
      await deleteTestNamespace(core, other, { timeoutMs: 300_000 });
      t.diagnostic(`the API server deleted them and their namespace in ${((Date.now() - deleting) / 1000).toFixed(0)} s`);
      await deployProject(); // the controller back, and its leader elected
    }
  });
});
