// e2e group: shared
// Smoke tests of the local e2e cluster (e2e/cluster/up.sh), without sidecar-terminator:
// they show the problem the project solves (a plain sidecar keeps a finished Job's Pod running)
// and that the cluster itself works (native sidecars, pod networking, kube-proxy, SA tokens).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container, V1Job, V1Pod } from '@kubernetes/client-node';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus, describeState, jobCondition, jobPods, toDate } from './support/workloads.ts';

const IMAGE = 'sidecar-terminator.local/busybox:1';
const SIDECAR_LOOP = "trap 'exit 0' TERM; while true; do sleep 1; done";

const { core, batch } = clients();

function container(name: string, script: string): V1Container {
  return { name, image: IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', script] };
}

/** A Job whose Pod runs `main` (sleep 2) next to a sidecar loop, plain or native. */
function sidecarJob(name: string, sidecar: 'plain' | 'native'): V1Job {
  const main = container('main', 'sleep 2; echo main done');
  const side = container('sidecar', SIDECAR_LOOP);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 5,
          ...(sidecar === 'native'
            ? { initContainers: [{ ...side, restartPolicy: 'Always' }], containers: [main] }
            : { containers: [main, side] }),
        },
      },
    },
  };
}

async function onlyPod(namespace: string, jobName: string): Promise<V1Pod | undefined> {
  const pods = await jobPods(core, namespace, jobName);
  assert.ok(pods.length <= 1, `Job ${jobName} has ${pods.length} Pods (backoffLimit 0)`);
  return pods[0];
}

const iso = (d: Date | undefined): string => (d ? d.toISOString() : '-');
const secondsBetween = (a: Date | undefined, b: Date | undefined): string =>
  a && b ? `${((b.getTime() - a.getTime()) / 1000).toFixed(0)} s` : '?';

describe('smoke: sidecars of Job Pods on the local cluster', { timeout: 300_000 }, () => {
  let ns = '';
  before(async () => {
    ns = await createTestNamespace(core, 'smoke');
  });
  after(async () => {
    if (ns) await deleteTestNamespace(core, ns);
  });

  test('a plain sidecar keeps the Pod Running and the Job incomplete after main exits', async (t) => {
    const name = 'plain-sidecar';
    await batch.createNamespacedJob({ namespace: ns, body: sidecarJob(name, 'plain') });

    const finished = await waitFor(
      async () => {
        const pod = await onlyPod(ns, name);
        const main = pod && containerStatus(pod, 'main');
        return main?.state?.terminated ? { pod, main } : undefined;
      },
      { description: `container main of Job ${name} to terminate`, timeoutMs: 120_000 },
    );
    assert.equal(finished.main.state?.terminated?.exitCode, 0, 'main exit code');
    const mainFinished = toDate(finished.main.state?.terminated?.finishedAt);

    // Well after main exited: nothing stops the sidecar, so nothing finishes the Job.
    await sleep(10_000);
    const pod = await onlyPod(ns, name);
    assert.ok(pod, 'Pod still exists');
    const sidecar = containerStatus(pod, 'sidecar');
    const job = await batch.readNamespacedJob({ name, namespace: ns });
    t.diagnostic(
      `main finished ${iso(mainFinished)}; at ${new Date().toISOString()} Pod phase ${pod.status?.phase}, ` +
        `sidecar ${describeState(sidecar)}, Job active=${job.status?.active ?? 0} ` +
        `succeeded=${job.status?.succeeded ?? 0} conditions=[${(job.status?.conditions ?? []).map((c) => c.type).join(',')}]`,
    );
    assert.equal(pod.status?.phase, 'Running', 'Pod phase');
    assert.ok(sidecar?.state?.running, `sidecar is running (is ${describeState(sidecar)})`);
    assert.equal(sidecar.restartCount, 0, 'sidecar was not restarted');
    assert.equal(jobCondition(job, 'Complete'), undefined, 'Job has no Complete condition');
    assert.equal(jobCondition(job, 'Failed'), undefined, 'Job has no Failed condition');
    assert.equal(job.status?.active, 1, 'Job still counts one active Pod');
    assert.ok(!job.status?.succeeded, 'Job has no succeeded Pod');
  });

  // What the README says of releases before 1.29: no native sidecars, the field does not exist.
  test('before 1.29, init containers have no restartPolicy: the API server drops it', { skip: versionFeatures().nativeSidecars && 'native sidecars exist from 1.29 (next test)' }, async () => {
    const body: V1Pod = {
      metadata: { name: 'no-native' },
      spec: { nodeName: clusterEnv().nodeName, restartPolicy: 'Never', initContainers: [{ ...container('init', 'true'), restartPolicy: 'Always' }], containers: [container('main', 'true')] },
    };
    const pod = await core.createNamespacedPod({ namespace: ns, body });
    assert.equal(pod.spec?.initContainers?.[0]?.restartPolicy, undefined);
  });

  test('a native sidecar (init container, restartPolicy Always) lets the Job complete', { skip: !versionFeatures().nativeSidecars && 'native sidecars exist from 1.29 (previous test)' }, async (t) => {
    const name = 'native-sidecar';
    const created = Date.now();
    await batch.createNamespacedJob({ namespace: ns, body: sidecarJob(name, 'native') });

    const job = await waitFor(
      async () => {
        const j = await batch.readNamespacedJob({ name, namespace: ns });
        if (jobCondition(j, 'Failed')) throw new Error(`Job ${name} failed: ${JSON.stringify(j.status)}`);
        return jobCondition(j, 'Complete') ? j : undefined;
      },
      { description: `Job ${name} to complete`, timeoutMs: 120_000 },
    );
    const pod = await onlyPod(ns, name);
    assert.ok(pod, 'the Job Pod exists');
    const main = containerStatus(pod, 'main');
    const sidecar = containerStatus(pod, 'sidecar');
    const mainTerm = main?.state?.terminated;
    const sideTerm = sidecar?.state?.terminated;
    assert.ok(mainTerm, `main terminated (is ${describeState(main)})`);
    assert.ok(sideTerm, `sidecar terminated (is ${describeState(sidecar)})`);
    assert.equal(mainTerm.exitCode, 0, 'main exit code');
    assert.equal(pod.status?.phase, 'Succeeded', 'Pod phase');
    assert.equal(job.status?.succeeded, 1, 'Job succeeded count');

    const mainStarted = toDate(mainTerm.startedAt);
    const mainFinished = toDate(mainTerm.finishedAt);
    const sideStarted = toDate(sideTerm.startedAt);
    const sideFinished = toDate(sideTerm.finishedAt);
    const complete = toDate(jobCondition(job, 'Complete')?.lastTransitionTime);
    const completion = toDate(job.status?.completionTime);
    assert.ok(mainFinished && sideFinished && complete, 'timestamps present');
    assert.ok(sideFinished.getTime() >= mainFinished.getTime(), 'sidecar stopped after main finished');
    assert.ok(complete.getTime() >= sideFinished.getTime() - 1000, 'Job completed after the sidecar stopped');

    t.diagnostic(`timeline of Job ${name} (API timestamps have 1 s resolution):`);
    t.diagnostic(`  Job created           ${new Date(created).toISOString()}`);
    t.diagnostic(`  sidecar started       ${iso(sideStarted)}`);
    t.diagnostic(`  main started          ${iso(mainStarted)}`);
    t.diagnostic(`  main finished         ${iso(mainFinished)} (exit ${mainTerm.exitCode})`);
    t.diagnostic(
      `  sidecar finished      ${iso(sideFinished)} (exit ${sideTerm.exitCode}, ${sideTerm.reason ?? ''}; ` +
        `${secondsBetween(mainFinished, sideFinished)} after main)`,
    );
    t.diagnostic(
      `  Job Complete          ${iso(complete)} (completionTime ${iso(completion)}; ` +
        `${secondsBetween(mainFinished, complete)} after main)`,
    );
    t.diagnostic(`  observed by the test  ${new Date().toISOString()} (${((Date.now() - created) / 1000).toFixed(1)} s after creation)`);
  });

  test('a Pod on the CNI bridge reaches the kubernetes Service via kube-proxy with its SA token', async (t) => {
    // busybox's own TLS client (wget/ssl_client) sends no signature_algorithms extension, which
    // Go >= 1.25 servers reject (RFC 9155, no SHA-1 in TLS 1.2). The in-cluster client here is the
    // node's static kubectl, mounted read-only: client-go in-cluster config (Service env vars, the
    // projected token, TLS verified against kube-root-ca.crt).
    const env = clusterEnv();
    const name = 'in-cluster-api';
    // Who the API server took the token for, on every release: its refusal names the user
    // (`kubectl auth whoami` needs SelfSubjectReview, off by default before 1.28). The Pod's own IP
    // from inside it: kubelet clears status.podIP of a finished Pod on some releases (1.27).
    const script = [
      'echo "service $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"',
      'echo "ip $(hostname -i)"',
      'if /opt/kubectl get secrets -o name 2>&1; then echo "unexpected: the default ServiceAccount may list secrets"; exit 1; fi',
    ].join('\n');
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              ...container('client', script),
              volumeMounts: [{ name: 'kubectl', mountPath: '/opt/kubectl', readOnly: true }],
            },
          ],
          volumes: [{ name: 'kubectl', hostPath: { path: `${env.k8sBinDir}/kubectl`, type: 'File' } }],
        },
      },
    });
    const pod = await waitFor(
      async () => {
        const p = await core.readNamespacedPod({ name, namespace: ns });
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
      },
      { description: `Pod ${name} to finish`, timeoutMs: 120_000 },
    );
    const logs = await core.readNamespacedPodLog({ name, namespace: ns, container: 'client' });
    t.diagnostic(`pod IP ${pod.status?.podIP}, hostNetwork ${pod.spec?.hostNetwork ?? false}; log: ${logs.trim()}`);
    assert.equal(pod.status?.phase, 'Succeeded', `client Pod succeeded (log: ${logs})`);
    assert.ok(!pod.spec?.hostNetwork, 'Pod is not on the host network');
    const ip = /^ip (\S+)$/m.exec(logs)?.[1] ?? '';
    assert.ok(inCIDR(ip, env.podCIDR), `pod IP ${ip} in ${env.podCIDR}`);
    assert.match(logs, new RegExp(`^service ${env.serviceIP.replaceAll('.', '\\.')}:443$`, 'm'));
    assert.match(logs, new RegExp(`User "system:serviceaccount:${ns}:default" cannot list resource "secrets"`));
  });
});

function inCIDR(ip: string, cidr: string): boolean {
  const toInt = (a: string): number => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
  const [base, bits] = cidr.split('/');
  if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip) || !base || !bits) return false;
  const size = 2 ** (32 - Number(bits));
  return Math.floor(toInt(ip) / size) === Math.floor(toInt(base) / size);
}
