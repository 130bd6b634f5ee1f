// e2e group: shared
// Sidecar policies (R54) end to end: Jobs whose templates mark nothing, released by a cluster or a
// namespaced policy; audit mode; the Pod's own markers first; and what a namespace user may not do.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import type { Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ANNOTATION_MAINS, ENV_TERMINATE_WHEN_JOB_EXIT, EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import type { JobSpec } from './support/jobs.ts';
import * as jobs from './support/jobs.ts';
import { BUSYBOX, container, FLUSHING_SHIPPER, podEvents, SIDECAR_MARK, SIGNAL_LOGGER, stopOnTerm } from './support/jobs.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { AGENT_METRICS_PORT, agentPod, assertNoRestartSince, CONTROLLER_METRICS_PORT, controllerLeader, deployProject, ourRestarts, podMetric } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const { core } = clients();
let namespace: string;
let other: string;
/** A namespace user: the built-in `edit` role in `namespace` only. */
const TENANT = 'e2e-policy-tenant';

function apply(object: object, ...asUser: string[]): string {
  const env = clusterEnv();
  return execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, ...asUser, 'apply', '--validate=strict', '-f', '-'], {
    input: JSON.stringify(object), encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'],
  });
}

function refused(object: object, ...asUser: string[]): string {
  try {
    apply(object, ...asUser);
  } catch (err) {
    return String((err as { stderr?: string }).stderr ?? err);
  }
  assert.fail(`the API server took ${JSON.stringify(object).slice(0, 200)}`);
}

// In Enforce unless the test says otherwise (a policy that names no mode is in Audit).
const clusterPolicy = (name: string, spec: object) => ({
  apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ClusterSidecarPolicy', metadata: { name }, spec: { mode: 'Enforce', ...spec },
});
const namespacedPolicy = (ns: string, name: string, spec: object) => ({
  apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy', metadata: { name, namespace: ns }, spec: { mode: 'Enforce', ...spec },
});
/** Only in this test's namespace: cluster policies must not reach the other e2e files' Pods. */
const inNamespace = () => ({ matchLabels: { 'kubernetes.io/metadata.name': namespace } });
const WEBHOOK = 'e2e-sidecar-injector.sidecar-terminator.dev';

/**
 * A real mutating admission webhook, served by this process on the host's loopback (where the API
 * server runs) with a self-signed certificate: it adds the container `injected-proxy` to every Pod
 * of the Job `injected`, as a mesh's injector would. The Job's template never names it.
 */
function startInjector(): Promise<{ server: Server; port: number; caBundle: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'e2e-injector-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
  const cert = readFileSync(join(dir, 'cert.pem'));
  const key = readFileSync(join(dir, 'key.pem'));
  rmSync(dir, { recursive: true });
  const injected = { name: 'injected-proxy', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sh', '-c', stopOnTerm(0)] };
  const server = createServer({ cert, key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString()) as { request: { uid: string } };
      const patch = Buffer.from(JSON.stringify([{ op: 'add', path: '/spec/containers/-', value: injected }])).toString('base64');
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({
        apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
        response: { uid: review.request.uid, allowed: true, patchType: 'JSONPatch', patch },
      }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as AddressInfo).port, caBundle: cert.toString('base64') })));
}

/** The agent's fast path decisions (requests it created, or found made): it decides only for sidecars it knows. */
async function fastPathDecisions(): Promise<number> {
  const agent = await agentPod();
  const count = (result: string) => podMetric(agent, AGENT_METRICS_PORT, `sidecar_terminator_agent_requests_on_exit_total{result="${result}"}`);
  return await count('created') + await count('existed');
}

const unmarkedJob = (proxy: string): JobSpec => ({ restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container(proxy, stopOnTerm(0))] });

describe('sidecar policies (R54) on the local cluster', () => {
  let restartsBefore: Map<string, number>;
  before(async () => {
    await deployProject();
    restartsBefore = await ourRestarts();
    namespace = await createTestNamespace(core, 'policies');
    other = await createTestNamespace(core, 'policies-other');
    kubectl('-n', namespace, 'create', 'rolebinding', TENANT, '--clusterrole=edit', `--user=${TENANT}`);
  });
  let injector: Server | undefined;
  after(async () => {
    kubectl('delete', 'mutatingwebhookconfiguration', WEBHOOK, '--ignore-not-found');
    injector?.close();
    for (const name of ['e2e-mesh', 'e2e-audit', 'e2e-shadowed', 'e2e-own', 'e2e-injected', 'e2e-quit', 'e2e-tiers', 'e2e-everything', 'e2e-author', 'e2e-ignoring', 'e2e-catch-all']) kubectl('delete', 'clustersidecarpolicy', name, '--ignore-not-found');
    if (namespace) await deleteTestNamespace(core, namespace);
    if (other) await deleteTestNamespace(core, other);
    // Policies, their Pods and namespaces gone: nothing of it may take a part down.
    await sleep(3_000);
    await assertNoRestartSince(restartsBefore);
  });

  it('R54: a cluster policy releases a Job whose template marks nothing (by the fast path where it runs); the event names the policy; the status counts it', async () => {
    apply(clusterPolicy('e2e-mesh', { namespaceSelector: inNamespace(), containers: [{ name: 'mesh-proxy' }] }));
    const decisionsBefore = await fastPathDecisions();
    await jobs.runJob(namespace, 'mesh', unmarkedJob('mesh-proxy'));
    const { type } = await jobs.finishedJob(namespace, 'mesh');
    assert.equal(type, 'Complete');
    if (versionFeatures().admissionPolicies) {
      assert.ok(await fastPathDecisions() > decisionsBefore, 'the agent\'s fast path decided for the policy-marked sidecar');
    }
    const events = await podEvents(await jobs.onlyPod(namespace, 'mesh'));
    const stopping = events.find((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.match(stopping ?? '', /"mesh-proxy" \(ClusterSidecarPolicy\/e2e-mesh\)/);
    // Statuses are brought up to date every 10 s.
    await waitFor(() => {
      const status = kubectl('get', 'clustersidecarpolicy', 'e2e-mesh', '-o', 'jsonpath={.status.conditions[?(@.type=="Valid")].status} {.status.matchedPods}');
      return status === 'True 1' ? status : undefined;
    }, { description: 'policy e2e-mesh Valid, matching the Job\'s Pod', timeoutMs: 30_000 });
    // Ready, for the tools that wait on it, at the policy's own generation.
    kubectl('wait', '--for=condition=Ready', 'clustersidecarpolicy/e2e-mesh', '--timeout=30s');
    const ready = kubectl('get', 'clustersidecarpolicy', 'e2e-mesh', '-o', 'jsonpath={.metadata.generation} {.status.conditions[?(@.type=="Ready")].observedGeneration}');
    assert.equal(ready.split(' ')[0], ready.split(' ')[1], `generation and the Ready condition's: ${ready}`);
    assert.match(kubectl('get', 'clustersidecarpolicy', 'e2e-mesh'), /MESSAGE[\s\S]*The policy is in effect\./);
  });

  it('R54: a cluster policy releases a Job whose sidecar a real mutating webhook injected', async () => {
    const started = await startInjector();
    injector = started.server;
    apply({
      apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: WEBHOOK },
      webhooks: [{
        name: WEBHOOK, admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail', timeoutSeconds: 5,
        clientConfig: { url: `https://127.0.0.1:${started.port}/inject`, caBundle: started.caBundle },
        rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
        namespaceSelector: inNamespace(), objectSelector: { matchLabels: { 'batch.kubernetes.io/job-name': 'injected' } },
      }],
    });
    apply(clusterPolicy('e2e-injected', { namespaceSelector: inNamespace(), containers: [{ name: 'injected-*' }] }));
    await jobs.runJob(namespace, 'injected', { restartPolicy: 'Never', containers: [container('main', 'sleep 2')] });
    const { type } = await jobs.finishedJob(namespace, 'injected');
    assert.equal(type, 'Complete');
    const pod = await jobs.onlyPod(namespace, 'injected');
    assert.deepEqual(pod.spec!.containers.map((c) => c.name), ['main', 'injected-proxy'], 'the webhook added the sidecar');
    assert.equal(containerStatus(pod, 'injected-proxy')?.state?.terminated?.exitCode, 0);
    const stopping = (await podEvents(pod)).find((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.match(stopping ?? '', /"injected-proxy" \(ClusterSidecarPolicy\/e2e-injected\)/);
  });

  it('R54: the Pod\'s own marker wins: an env-marked sidecar a cluster policy also matches is stopped as the Pod says', async () => {
    apply(clusterPolicy('e2e-own', { namespaceSelector: inNamespace(), containers: [{ name: 'own-proxy', stopTier: 1 }] }));
    await jobs.runJob(namespace, 'own', { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('own-proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    assert.equal((await jobs.finishedJob(namespace, 'own')).type, 'Complete');
    const stopping = (await podEvents(await jobs.onlyPod(namespace, 'own'))).find((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.ok(stopping && !stopping.includes('ClusterSidecarPolicy'), `marked by its env, not the policy: ${stopping}`);
  });

  it('R54: a namespaced policy acts in its own namespace only; a namespace user may write it there, nowhere else, and no cluster policy', async () => {
    const tenant = [`--as=${TENANT}`];
    apply(namespacedPolicy(namespace, 'local', { containers: [{ name: 'local-proxy' }] }), ...tenant);
    assert.match(refused(namespacedPolicy(other, 'reach', { containers: [{ name: 'local-proxy' }] }), ...tenant), /forbidden/i);
    assert.match(refused(clusterPolicy('e2e-tenant', { containers: [{ name: 'local-proxy' }] }), ...tenant), /forbidden/i);
    assert.match(refused(namespacedPolicy(namespace, 'wide', { namespaceSelector: {}, containers: [{ name: 'local-proxy' }] }), ...tenant),
      /unknown field "spec.namespaceSelector"/);
    assert.match(refused(namespacedPolicy(namespace, 'empty', { containers: [{}] }), ...tenant), /an entry needs name or image/);
    // A namespace user must not make the agent run a command in a container: only cluster policies name one.
    assert.match(refused(namespacedPolicy(namespace, 'command', { containers: [{ name: 'local-proxy', stopCommand: ['sh', '-c', 'id'] }] }), ...tenant),
      /only a ClusterSidecarPolicy may name a command/);

    await jobs.runJob(other, 'untouched', unmarkedJob('local-proxy'));
    await jobs.runJob(namespace, 'local', unmarkedJob('local-proxy'));
    assert.equal((await jobs.finishedJob(namespace, 'local')).type, 'Complete');
    // The same container in the other namespace: its main long done, still running.
    await sleep(5_000);
    const pod = await jobs.onlyPod(other, 'untouched');
    assert.ok(containerStatus(pod, 'main')?.state?.terminated, 'the main is done');
    assert.ok(containerStatus(pod, 'local-proxy')?.state?.running, 'a SidecarPolicy reaches no Pod outside its namespace');
  });

  it('R54: a cluster policy\'s stop command runs once inside the sidecar, within the grace period, before its signal', async (t) => {
    const say = (line: string) => `echo "${line}" > /proc/1/fd/1`;
    const stopCommand = ['sh', '-c', `${say('stop command ran')}; sleep 2; ${say('stop command done')}`];
    apply(clusterPolicy('e2e-quit', { namespaceSelector: inNamespace(), containers: [{ name: 'quit-proxy', stopCommand }] }));
    const grace = 20;
    await jobs.runJob(namespace, 'quit', { restartPolicy: 'Never', grace, containers: [container('main', 'sleep 3; echo main done'), container('quit-proxy', SIGNAL_LOGGER)] });
    assert.equal((await jobs.finishedJob(namespace, 'quit', 90_000)).type, 'Complete');
    const pod = await jobs.onlyPod(namespace, 'quit');
    const main = timestampedLogs(namespace, pod.metadata!.name!, 'main');
    const proxy = timestampedLogs(namespace, pod.metadata!.name!, 'quit-proxy');
    const shown = `main:\n${showLines(main)}\nproxy:\n${showLines(proxy)}`;
    t.diagnostic(shown);
    assert.equal(proxy.filter((l) => l.text === 'stop command ran').length, 1, `the command ran once:\n${shown}`);
    const mainDone = firstLine(main, /^main done$/);
    const done = firstLine(proxy, /^stop command done$/);
    const term = firstLine(proxy, /^got SIGTERM$/);
    assert.ok(mainDone && done && term, shown);
    assert.ok(term.atMs >= done.atMs, `SIGTERM came before the command ended:\n${shown}`);
    assert.ok(term.atMs - mainDone.atMs < grace * 1000, `past the ${grace} s grace period:\n${shown}`);
    t.diagnostic(`main done → command done ${done.atMs - mainDone.atMs} ms → SIGTERM ${term.atMs - mainDone.atMs} ms`);
    assert.equal(containerStatus(pod, 'quit-proxy')?.state?.terminated?.exitCode, 0);
    const killing = (await podEvents(pod)).find((e) => e.startsWith('Normal Killing:') && e.includes('quit-proxy'));
    assert.match(killing ?? '', /first running the stop command of ClusterSidecarPolicy\/e2e-quit/);
  });

  it('R54, R53: a proxy a policy puts in a later tier gets SIGTERM only after the log shipper beside it flushed and exited', async (t) => {
    apply(clusterPolicy('e2e-tiers', { namespaceSelector: inNamespace(), containers: [{ name: 'tier-logs' }, { name: 'tier-proxy', stopTier: 1 }] }));
    await jobs.runJob(namespace, 'tiers', {
      restartPolicy: 'Never', grace: 20,
      containers: [container('main', 'sleep 3; echo main done'), container('tier-logs', FLUSHING_SHIPPER), container('tier-proxy', SIGNAL_LOGGER)],
    });
    assert.equal((await jobs.finishedJob(namespace, 'tiers', 90_000)).type, 'Complete');
    const pod = await jobs.onlyPod(namespace, 'tiers');
    const logs = timestampedLogs(namespace, pod.metadata!.name!, 'tier-logs');
    const proxy = timestampedLogs(namespace, pod.metadata!.name!, 'tier-proxy');
    const shown = `logs:\n${showLines(logs)}\nproxy:\n${showLines(proxy)}`;
    t.diagnostic(shown);
    const flushed = firstLine(logs, /^flushed$/);
    const proxyTerm = firstLine(proxy, /^got SIGTERM$/);
    assert.ok(flushed && proxyTerm, shown);
    assert.ok(proxyTerm.atMs > flushed.atMs, `the proxy got SIGTERM before the log shipper flushed:\n${shown}`);
    // The runtime's record of the shipper's exit (whole seconds).
    const logsExit = containerStatus(pod, 'tier-logs')?.state?.terminated?.finishedAt;
    assert.ok(logsExit && proxyTerm.atMs >= new Date(logsExit).getTime(), `the proxy got SIGTERM before the log shipper exited (${String(logsExit)})`);
    assert.equal(containerStatus(pod, 'tier-proxy')?.state?.terminated?.exitCode, 0);
    const stopping = (await podEvents(pod)).filter((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.ok(stopping.some((e) => e.includes('"tier-proxy" (ClusterSidecarPolicy/e2e-tiers)')), stopping.join('\n'));
  });

  it('R54: the Pod\'s author keeps its mains: an explicit false in the Kruise env and the mains annotation win over an Enforce policy; catch-all entries are refused', async () => {
    // In no namespace: should the API server take one, it must not reach the other files' Pods.
    const nowhere = { matchLabels: { 'kubernetes.io/metadata.name': 'e2e-no-such-namespace' } };
    for (const entry of [{ name: '**' }, { name: '?*' }, { image: '*' }, { name: '*', image: '*' }]) {
      assert.match(refused(clusterPolicy('e2e-catch-all', { namespaceSelector: nowhere, containers: [entry] })), /match every name and image/, JSON.stringify(entry));
    }
    apply(clusterPolicy('e2e-author', { namespaceSelector: inNamespace(), containers: [{ name: 'h43-*' }] }));
    // Work that a SIGTERM would cut short, with an exit code that says so.
    const work = (what: string) => `trap 'echo ${what} stopped; exit 143' TERM; sleep 8 & wait $!; echo ${what} done`;
    await jobs.runJob(namespace, 'author', {
      restartPolicy: 'Never',
      annotations: { [ANNOTATION_MAINS]: 'h43-named' },
      containers: [
        container('h43-main', 'sleep 2'),
        container('h43-work', work('work'), { env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'false' }] }),
        container('h43-named', work('named')),
        container('h43-proxy', stopOnTerm(0)),
      ],
    });
    const { type } = await jobs.finishedJob(namespace, 'author', 90_000);
    const pod = await jobs.onlyPod(namespace, 'author');
    const events = await podEvents(pod);
    assert.equal(type, 'Complete', events.join('\n'));
    for (const name of ['h43-work', 'h43-named']) assert.equal(containerStatus(pod, name)?.state?.terminated?.exitCode, 0, `${name} finished its work`);
    const stopping = events.filter((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.equal(stopping.length, 1, events.join('\n'));
    assert.match(stopping[0]!, /stopping sidecar "h43-proxy" with/);
  });

  it('R23, R53: an ignore-exit-code log shipper in tier 0 runs its stop command and flushes before the proxy in tier 1 gets SIGTERM; its 143 fails nothing', async (t) => {
    const say = (line: string) => `echo "${line}" > /proc/1/fd/1`;
    apply(clusterPolicy('e2e-ignoring', {
      namespaceSelector: inNamespace(),
      containers: [
        { name: 'ign-shipper', ignoreExitCode: true, stopCommand: ['sh', '-c', say('stop command ran')] },
        { name: 'ign-proxy', stopTier: 1 },
      ],
    }));
    // The shipper flushes on SIGTERM and exits 143, as shippers that do not trap it do.
    const shipper = `trap 'echo "got SIGTERM"; sleep 3; echo "flushed"; exit 143' TERM; echo ready; while :; do sleep 1 & wait $!; done`;
    await jobs.runJob(namespace, 'ignoring', {
      restartPolicy: 'Never', grace: 20,
      containers: [container('main', 'sleep 3; echo main done'), container('ign-shipper', shipper), container('ign-proxy', SIGNAL_LOGGER)],
    });
    const { type } = await jobs.finishedJob(namespace, 'ignoring', 90_000);
    const pod = await jobs.onlyPod(namespace, 'ignoring');
    const events = await podEvents(pod);
    assert.equal(type, 'Complete', events.join('\n'));
    const shipperLogs = timestampedLogs(namespace, pod.metadata!.name!, 'ign-shipper');
    const proxy = timestampedLogs(namespace, pod.metadata!.name!, 'ign-proxy');
    const shown = `shipper:\n${showLines(shipperLogs)}\nproxy:\n${showLines(proxy)}\n${events.join('\n')}`;
    t.diagnostic(shown);
    const ran = firstLine(shipperLogs, /^stop command ran$/);
    const term = firstLine(shipperLogs, /^got SIGTERM$/);
    const flushed = firstLine(shipperLogs, /^flushed$/);
    const proxyTerm = firstLine(proxy, /^got SIGTERM$/);
    assert.ok(ran && term && flushed && proxyTerm, shown);
    assert.ok(term.atMs >= ran.atMs, `its stop command before its signal:\n${shown}`);
    assert.ok(proxyTerm.atMs >= flushed.atMs, `the proxy got SIGTERM before the shipper flushed:\n${shown}`);
    assert.equal(containerStatus(pod, 'ign-shipper')?.state?.terminated?.exitCode, 143);
    assert.equal(pod.status?.phase, 'Succeeded');
    assert.ok(!events.some((e) => e.includes(EVENT_REASONS.sidecarFailedPod)), shown);
  });

  it('R54: a policy that would make every container of a Pod a sidecar leaves it alone with a Warning', async () => {
    apply(clusterPolicy('e2e-everything', { namespaceSelector: inNamespace(), containers: [{ name: 'solo-*' }] }));
    await jobs.runJob(namespace, 'solo', { restartPolicy: 'Never', containers: [container('solo-a', 'sleep 2'), container('solo-b', stopOnTerm(0))] });
    const warning = `Warning ${EVENT_REASONS.noMainContainer}:`;
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'solo');
      return containerStatus(p, 'solo-a')?.state?.terminated && (await podEvents(p)).some((e) => e.startsWith(warning)) ? p : undefined;
    }, { description: `solo-a done and a ${EVENT_REASONS.noMainContainer} Warning`, timeoutMs: 60_000 });
    await sleep(3_000);
    const fresh = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    assert.ok(containerStatus(fresh, 'solo-b')?.state?.running, 'nothing is stopped in a Pod without a main');
    kubectl('-n', namespace, 'delete', 'job', 'solo', '--wait=false');
  });

  it('R54: audit mode stops nothing and reports each Pod once; switching mode to Enforce releases it, counted once by the policy', async () => {
    apply(clusterPolicy('e2e-audit', { mode: 'Audit', namespaceSelector: inNamespace(), containers: [{ name: 'audit-proxy' }] }));
    await jobs.runJob(namespace, 'audit', unmarkedJob('audit-proxy'));
    const audit = `Normal ${EVENT_REASONS.policyAudit}:`;
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'audit');
      return (await podEvents(p)).some((e) => e.startsWith(audit)) ? p : undefined;
    }, { description: `a ${EVENT_REASONS.policyAudit} Event`, timeoutMs: 60_000 });
    await sleep(3_000);
    const events = await podEvents(pod);
    assert.equal(events.filter((e) => e.startsWith(audit)).length, 1, events.join('\n'));
    assert.match(events.find((e) => e.startsWith(audit))!, /"audit-proxy" \(ClusterSidecarPolicy\/e2e-audit, tier 0\)/);
    const fresh = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    assert.ok(containerStatus(fresh, 'audit-proxy')?.state?.running, 'audit stops nothing');
    const counted = `sidecar_terminator_controller_policy_audit_pods_total{policy="ClusterSidecarPolicy/e2e-audit"}`;
    assert.ok(await podMetric(await controllerLeader(), CONTROLLER_METRICS_PORT, counted) >= 1, counted);

    // The policy's status keeps the count and the Pod, with its time: the command docs/policies.md gives.
    const recent = () => kubectl('get', 'clustersidecarpolicy', 'e2e-audit', '-o', 'jsonpath={range .status.audit.recent[*]}{.namespace}/{.name} {.time}{"\\n"}{end}');
    const podName = fresh.metadata!.name!;
    await waitFor(() => recent().includes(`${namespace}/${podName} `) || undefined, { description: 'the audited Pod in the policy\'s status', timeoutMs: 30_000 });
    const [header, row] = kubectl('get', 'clustersidecarpolicy', 'e2e-audit').split('\n');
    // Columns start where their headers do.
    assert.equal(row!.slice(header!.indexOf('AUDITED')).split(/\s+/)[0], '1', `kubectl get shows the count:\n${header}\n${row}`);

    kubectl('patch', 'clustersidecarpolicy', 'e2e-audit', '--type=merge', '-p', '{"spec":{"mode":"Enforce"}}');
    assert.equal((await jobs.finishedJob(namespace, 'audit')).type, 'Complete');
    const enforced = `sidecar_terminator_controller_policy_enforced_pods_total{policy="ClusterSidecarPolicy/e2e-audit"}`;
    assert.equal(await podMetric(await controllerLeader(), CONTROLLER_METRICS_PORT, enforced), 1, enforced);
    await waitFor(() => kubectl('get', 'clustersidecarpolicy', 'e2e-audit', '-o', 'jsonpath={.status.audit.pods}/{.status.enforce.pods}') === '1/1' || undefined,
      { description: 'one Pod audited, then one enforced, in the policy\'s status', timeoutMs: 30_000 });
  });

  it('R54: a policy that names no mode is in Audit, and the first matching policy decides: a namespace\'s Audit policy before a cluster Enforce one only reports', async () => {
    apply(clusterPolicy('e2e-shadowed', { namespaceSelector: inNamespace(), containers: [{ name: 'shadowed-proxy' }] }));
    apply({ apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy', metadata: { name: 'team-first', namespace }, spec: { containers: [{ name: 'shadowed-proxy' }] } });
    assert.equal(kubectl('-n', namespace, 'get', 'sidecarpolicy', 'team-first', '-o', 'jsonpath={.spec.mode}'), 'Audit');
    await jobs.runJob(namespace, 'shadowed', unmarkedJob('shadowed-proxy'));
    const audit = `Normal ${EVENT_REASONS.policyAudit}:`;
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'shadowed');
      return (await podEvents(p)).some((e) => e.startsWith(audit)) ? p : undefined;
    }, { description: `a ${EVENT_REASONS.policyAudit} Event`, timeoutMs: 60_000 });
    await sleep(3_000);
    const events = await podEvents(pod);
    assert.match(events.find((e) => e.startsWith(audit))!, new RegExp(`"shadowed-proxy" \\(SidecarPolicy/${namespace}/team-first, tier 0\\)`));
    assert.ok(!events.some((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`)), `the cluster policy did not act: ${events.join('\n')}`);
    assert.ok(containerStatus(await core.readNamespacedPod({ namespace, name: pod.metadata!.name! }), 'shadowed-proxy')?.state?.running, 'nothing stopped');

    kubectl('-n', namespace, 'patch', 'sidecarpolicy', 'team-first', '--type=merge', '-p', '{"spec":{"mode":"Enforce"}}');
    assert.equal((await jobs.finishedJob(namespace, 'shadowed')).type, 'Complete');
    const stopping = (await podEvents(pod)).find((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.match(stopping ?? '', new RegExp(`"shadowed-proxy" \\(SidecarPolicy/${namespace}/team-first\\)`));
  });
});
