// e2e group: shared
// The ready policies of docs/policies.md, as written there (restricted to this file's namespace),
// on one Pod that holds a sidecar for each: in Audit they stop nothing and say so; switched to
// Enforce they release the Pod in the documented order. The Cloud SQL proxy (ignore-exit-code,
// exits 143 on SIGTERM) and Istio (a later tier, quit by its stop command) share the Pod (R23, R53, R54).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { load as parseYaml } from 'js-yaml';
import { CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { ctr, deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { BUSYBOX, container, podEvents } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const { core } = clients();
let namespace: string;
/** Where Istio's stand-in finds `pilot-agent` (a hostPath on the node, in the cluster's state directory). */
const TOOLS = `${clusterEnv().clusterDir}/ready-policies-tools`;

function apply(object: object): void {
  const env = clusterEnv();
  execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, 'apply', '--validate=strict', '-f', '-'], { input: JSON.stringify(object), stdio: ['pipe', 'pipe', 'pipe'] });
}

interface ReadyPolicy { metadata: { name: string }; spec: Record<string, unknown> }

/** Every YAML block under "## Ready policies" that is a ClusterSidecarPolicy, as the docs write it. */
function readyPolicies(): ReadyPolicy[] {
  const doc = readFileSync(join(ROOT, 'docs/policies.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Ready policies'));
  return [...section.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .map((m) => parseYaml(m[1]!) as { kind?: string } & ReadyPolicy)
    .filter((p) => p.kind === 'ClusterSidecarPolicy');
}

/** The images the policies match by image, tagged locally from the test image (no registry here). */
const CLOUD_SQL_IMAGE = 'gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0';
const FLUENT_BIT_IMAGE = 'docker.io/fluent/fluent-bit:3.1.9';

const RUN = 'echo ready; while true; do sleep 1 & wait $!; done';
/** A sidecar that says when SIGTERM comes, then exits with `code`. */
const onTerm = (code: number) => `trap 'echo got SIGTERM; exit ${code}' TERM; ${RUN}`;

describe('the ready policies of docs/policies.md, Audit then Enforce', () => {
  const policies = readyPolicies();
  const ours = (name: string) => `e2e-ready-${name}`;
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'ready-policies');
    for (const image of [CLOUD_SQL_IMAGE, FLUENT_BIT_IMAGE]) ctr(['images', 'tag', '--force', BUSYBOX, image]);
    // Istio's stand-in: asked to quit, it answers, and the proxy's process exits 0 right after.
    mkdirSync(TOOLS, { recursive: true });
    writeFileSync(join(TOOLS, 'pilot-agent'), '#!/bin/sh\necho "pilot-agent $*" > /proc/1/fd/1\n(sleep 0.2; kill -USR1 1) >/dev/null 2>&1 &\n');
    chmodSync(join(TOOLS, 'pilot-agent'), 0o755);
  });
  after(async () => {
    for (const p of policies) kubectl('delete', 'clustersidecarpolicy', ours(p.metadata.name), '--ignore-not-found');
    if (namespace) await deleteTestNamespace(core, namespace);
    rmSync(TOOLS, { recursive: true, force: true });
  });

  it('R54, R53, R23: every ready policy reports in Audit; in Enforce the Pod ends in tier order, the Cloud SQL proxy before Istio\'s quit, Succeeded', async (t) => {
    assert.deepEqual(policies.map((p) => p.metadata.name), ['istio', 'linkerd', 'vault-agent', 'dapr', 'cloud-sql-proxy', 'telemetry']);
    for (const p of policies) {
      assert.equal(p.spec.mode, 'Audit', `${p.metadata.name} ships in Audit`);
      // As the docs suggest: only some namespaces, here this test's (the other files' Pods run beside it).
      const policy = { ...p, metadata: { name: ours(p.metadata.name) }, spec: { ...p.spec, namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } };
      apply(policy);
    }
    const tools = { name: 'tools', mountPath: '/tools' };
    await jobs.runJob(namespace, 'ready', {
      restartPolicy: 'Never',
      grace: 20,
      volumes: [{ name: 'tools', hostPath: { path: TOOLS, type: 'Directory' } }],
      containers: [
        container('main', 'sleep 3; echo main done'),
        container('istio-proxy', `trap 'echo quit; exit 0' USR1; ${onTerm(0)}`, { env: [{ name: 'PATH', value: '/tools:/bin' }], volumeMounts: [tools] }),
        container('linkerd-proxy', onTerm(0)),
        container('vault-agent', onTerm(0)),
        container('daprd', onTerm(0)),
        // Version 2 without --exit-zero-on-sigterm: 143.
        container('cloud-sql-proxy', onTerm(143), { image: CLOUD_SQL_IMAGE }),
        container('otc-container', onTerm(0)),
        container('fluent-bit', `trap 'sleep 1; echo flushed; exit 0' TERM; ${RUN}`, { image: FLUENT_BIT_IMAGE }),
      ],
    });

    // Audit: nothing is stopped; one Event says what would be, naming the policies; each policy counts the Pod.
    const auditEvent = `Normal ${EVENT_REASONS.policyAudit}:`;
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'ready');
      return containerStatus(p, 'main')?.state?.terminated && (await podEvents(p)).some((e) => e.startsWith(auditEvent)) ? p : undefined;
    }, { description: `the main done and a ${EVENT_REASONS.policyAudit} Event`, timeoutMs: 90_000 });
    const audit = (await podEvents(pod)).filter((e) => e.startsWith(auditEvent));
    t.diagnostic(audit.join('\n'));
    assert.equal(audit.length, 1);
    // All that enforcing would do, in stop order: tier 0, its ignore-exit-code sidecar, tier 1; then the phase.
    const order = [
      ['vault-agent', 'vault-agent', 'tier 0'], ['otc-container', 'telemetry', 'tier 0'], ['fluent-bit', 'telemetry', 'tier 0'],
      ['cloud-sql-proxy', 'cloud-sql-proxy', 'tier 0, ignore-exit-code'],
      ['istio-proxy', 'istio', 'tier 1, its stop command first'], ['linkerd-proxy', 'linkerd', 'tier 1'], ['daprd', 'dapr', 'tier 1'],
    ] as const;
    const named = order.map(([container, policy, how]) => `"${container}" (ClusterSidecarPolicy/${ours(policy)}, ${how})`);
    assert.ok(audit[0]!.includes(`would now stop ${named.join(', ')} through ContainerRecreateRequests, in that order.`), audit[0]);
    assert.match(audit[0]!, /Then the Pod's phase would be set to Succeeded from the main containers, before the exit code of "cloud-sql-proxy" could count/);
    const statuses = (fields: string) => policies.map((p) => kubectl('get', 'clustersidecarpolicy', ours(p.metadata.name), '-o', `jsonpath=${fields}`));
    await waitFor(() => {
      const counts = statuses('{.status.conditions[?(@.type=="Ready")].status}/{.status.matchedPods}/{.status.audit.pods}');
      return counts.every((c) => c === 'True/1/1') ? counts : undefined;
    }, { description: 'every ready policy Ready, marking (auditing) the Pod, and counting it audited', timeoutMs: 30_000 });
    const held = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    for (const name of ['istio-proxy', 'cloud-sql-proxy', 'vault-agent']) assert.ok(containerStatus(held, name)?.state?.running, `${name}: Audit stops nothing`);

    // Enforce, one field each, as the docs say.
    for (const p of policies) kubectl('patch', 'clustersidecarpolicy', ours(p.metadata.name), '--type=merge', '-p', '{"spec":{"mode":"Enforce"}}');
    const { type } = await jobs.finishedJob(namespace, 'ready', 120_000);
    const done = await jobs.onlyPod(namespace, 'ready');
    assert.equal(type, 'Complete', (await podEvents(done)).join('\n'));
    assert.equal(done.status?.phase, 'Succeeded');
    assert.equal(done.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED)?.reason, 'IgnoredSidecarExitCode');
    // The Job completes at the phase; the last sidecars exit after it, and kubelet writes its own
    // status once it has torn the Pod down: the phase we set must outlast that.
    const settled = await waitFor(async () => {
      const p = await core.readNamespacedPod({ namespace, name: done.metadata!.name! });
      return p.status?.containerStatuses?.every((c) => c.state?.terminated) && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'False') ? p : undefined;
    }, { description: 'every container\'s exit reported, the Pod no longer Ready', timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, 3_000));
    const final = await core.readNamespacedPod({ namespace, name: settled.metadata!.name! });
    const events = await podEvents(final);
    t.diagnostic(events.join('\n'));
    assert.equal(final.status?.phase, 'Succeeded', `kubelet kept the phase we set\n${events.join('\n')}`);
    assert.equal(containerStatus(final, 'cloud-sql-proxy')?.state?.terminated?.exitCode, 143, 'its exit code did not fail the Pod');
    assert.equal(containerStatus(final, 'istio-proxy')?.state?.terminated?.exitCode, 0);
    const stopping = events.filter((e) => e.startsWith(`Normal ${EVENT_REASONS.stopping}:`));
    assert.equal(stopping.length, 3, 'tier 0, then the ignore-exit-code sidecar of tier 0, then tier 1');
    // The event of the request that stops `name` (others name it among those that follow).
    const stoppingOf = (name: string) => stopping.find((e) => e.slice(0, e.indexOf(' with ContainerRecreateRequest')).includes(`"${name}"`)) ?? '';
    assert.match(stoppingOf('cloud-sql-proxy'), /"cloud-sql-proxy" \(ClusterSidecarPolicy\/e2e-ready-cloud-sql-proxy\)/);
    assert.match(stoppingOf('istio-proxy'), /phase is set as soon as this request exists/);
    assert.ok(!events.some((e) => e.includes(EVENT_REASONS.failedStopCommand) || e.includes(EVENT_REASONS.sidecarFailedPod)), events.join('\n'));

    // The order, as the runtime timestamped each container's lines.
    const logs = (name: string) => timestampedLogs(namespace, final.metadata!.name!, name);
    const flushed = firstLine(logs('fluent-bit'), /^flushed$/);
    const sqlTerm = firstLine(logs('cloud-sql-proxy'), /^got SIGTERM$/);
    const quitAsked = firstLine(logs('istio-proxy'), /^pilot-agent request POST quitquitquit$/);
    // The signal follows the command at once: whichever the proxy's process takes first ends it.
    const ended = firstLine(logs('istio-proxy'), /^(quit|got SIGTERM)$/);
    const shown = ['fluent-bit', 'cloud-sql-proxy', 'istio-proxy'].map((n) => `${n}:\n${showLines(logs(n))}`).join('\n');
    t.diagnostic(shown);
    assert.ok(flushed && sqlTerm && ended, shown);
    assert.ok(sqlTerm.atMs >= flushed.atMs, `the Cloud SQL proxy after the log shipper flushed (tier 0, then its ignore-exit-code sidecar)\n${shown}`);
    assert.ok(ended.atMs >= sqlTerm.atMs, `Istio after the Cloud SQL proxy (tier 1 last)\n${shown}`);
    // The last step waits for kubelet to see the phase (R23); kubelet's own teardown may stop Istio
    // first (its SIGTERM, no stop command): where the command ran, it came first.
    if (quitAsked) assert.ok(quitAsked.atMs >= sqlTerm.atMs && ended.atMs >= quitAsked.atMs, shown);
    t.diagnostic(quitAsked ? 'Istio quit by its stop command' : 'Istio stopped by kubelet\'s teardown first');
    await waitFor(() => {
      const counts = statuses('{.status.audit.pods}/{.status.enforce.pods}');
      return counts.every((c) => c === '1/1') ? counts : undefined;
    }, { description: 'every ready policy counting the Pod audited, then enforced', timeoutMs: 30_000 });
  });
});
