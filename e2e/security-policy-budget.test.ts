// e2e group: shared
// Hostile namespaces: policies within a budget (R54). A namespace user (the built-in `edit` role, in
// their namespace only) writes what costs matching and memory most:
// - 200 SidecarPolicies at the size allowed (8,192 characters each), every one of 16 entries with an
//   image pattern that the images below nearly match (costly to a matcher that backtracks), and a
//   selector that picks every Pod;
// - a Pod whose images are 1,000 characters (tried by every pattern) and 5,000 (longer than any
//   reference: tried by none), and an annotate loop on it, so that both parts see event after event.
// Meanwhile a marked Job in another namespace must end as always, within 30 s of its main, with no
// restart (an OOM kill is one) of the agent or the controller. A policy one character over the
// budget is refused: by the API server (the admission policies, 1.30+), else by the parser, which
// leaves it out of effect and says why in its status. The tenant's Pod gets one Warning naming the
// image no pattern was tried on.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { EVENT_REASONS } from '../api/names.ts';
import { apiAs } from './support/api-as.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { AGENT_METRICS_PORT, CONTROLLER_METRICS_PORT, agentPod, assertNoRestartSince, controllerLeader, ourRestarts, podMetric } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { BUSYBOX, SIDECAR_MARK, container, finishedAt } from './support/jobs.ts';
import { TENANT, asTenant, tenantNamespaces } from './support/tenant.ts';
import { policyAtBudget } from './support/policies.ts';
import { waitFor } from './support/wait.ts';
import { jobCondition } from './support/workloads.ts';

const { core } = clients();
const POLICIES = 200;
const ANNOTATIONS = 60;
const MEMORY = 'process_resident_memory_bytes';

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);

describe('security: policies within a budget (R54)', () => {
  const namespaces = tenantNamespaces('policy-budget');

  it('200 policies at the budget and an annotate loop on a Pod of 5,000-character images: a Job elsewhere ends within 30 s of its main, nothing restarts; one character over is refused', async (t) => {
    const restarts = await ourRestarts();
    const agent = await agentPod();
    const leader = await controllerLeader();
    const before = { agent: await podMetric(agent, AGENT_METRICS_PORT, MEMORY), controller: await podMetric(leader, CONTROLLER_METRICS_PORT, MEMORY) };
    const policies = `/apis/sidecar-terminator.dev/v1alpha1/namespaces/${namespaces.tenant()}/sidecarpolicies`;

    const started = Date.now();
    for (let i = 0; i < POLICIES; i++) await asTenant('POST', policies, policyAtBudget(`p${String(i).padStart(3, '0')}`));
    t.diagnostic(`${POLICIES} policies of ${JSON.stringify(policyAtBudget('p000')).length} bytes created in ${((Date.now() - started) / 1000).toFixed(0)} s`);

    const long: V1Pod = {
      metadata: { name: 'long-images', labels: { app: 'tenant' } },
      spec: {
        nodeName: clusterEnv().nodeName, restartPolicy: 'Never', terminationGracePeriodSeconds: 0, dnsPolicy: 'Default',
        containers: [
          { name: 'c0-main', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sleep', '3600'] },
          { name: 'c1-tried', image: `registry.example/${'a'.repeat(983)}`, imagePullPolicy: 'Never' },
          { name: 'c2-untried', image: `registry.example/${'b'.repeat(4983)}`, imagePullPolicy: 'Never' },
        ],
      },
    };
    await asTenant('POST', `/api/v1/namespaces/${namespaces.tenant()}/pods`, long);
    await jobs.runJob(namespaces.jobs(), 'elsewhere', {
      restartPolicy: 'Never',
      containers: [container('main', 'sleep 10; echo main done'), container('proxy', 'trap "exit 0" TERM; while :; do sleep 1 & wait $!; done', { env: [SIDECAR_MARK] })],
    });
    const loopStarted = Date.now();
    for (let i = 0; i < ANNOTATIONS; i++) {
      await asTenant('PATCH', `/api/v1/namespaces/${namespaces.tenant()}/pods/long-images`, { metadata: { annotations: { edit: String(i) } } });
      await new Promise((r) => setTimeout(r, 250));
    }
    t.diagnostic(`${ANNOTATIONS} annotations in ${((Date.now() - loopStarted) / 1000).toFixed(0)} s`);

    const { job, type } = await jobs.finishedJob(namespaces.jobs(), 'elsewhere', 120_000);
    assert.equal(type, 'Complete');
    const pod = await jobs.onlyPod(namespaces.jobs(), 'elsewhere');
    const mainDone = finishedAt(pod, 'main')!.getTime();
    const complete = new Date(jobCondition(job, 'Complete')!.lastTransitionTime!).getTime();
    t.diagnostic(`elsewhere: Job Complete ${((complete - mainDone) / 1000).toFixed(1)} s after its main`);
    assert.ok(complete - mainDone <= 30_000, `Complete ${complete - mainDone} ms after its main`);

    const events = await waitFor(async () => {
      const list = await jobs.podEvents(await core.readNamespacedPod({ namespace: namespaces.tenant(), name: 'long-images' }));
      return list.some((e) => e.startsWith(`Warning ${EVENT_REASONS.policyImageTooLong}`)) ? list : undefined;
    }, { description: 'the Warning on the Pod of a too-long image', timeoutMs: 30_000 });
    const warnings = events.filter((e) => e.includes(EVENT_REASONS.policyImageTooLong));
    assert.equal(warnings.length, 1, events.join('\n'));
    assert.match(warnings[0]!, /"c2-untried" \(SidecarPolicy\/[^)]+\)/);
    assert.doesNotMatch(warnings[0]!, /c1-tried/);

    const afterwards = { agent: await podMetric(agent, AGENT_METRICS_PORT, MEMORY), controller: await podMetric(leader, CONTROLLER_METRICS_PORT, MEMORY) };
    t.diagnostic(`resident memory: agent ${mib(before.agent)} → ${mib(afterwards.agent)} MiB, controller ${mib(before.controller)} → ${mib(afterwards.controller)} MiB`);

    const over = await apiAs(TENANT, 'POST', policies, policyAtBudget('over', 1));
    if (versionFeatures().admissionPolicies) {
      assert.equal(over.status, 422, `a policy one character over the budget: ${over.status} ${over.body.message ?? ''}`);
      assert.match(String(over.body.message), /may hold 8192 characters .* in all; this one holds 8193/);
    } else {
      // No admission policies before 1.30: the parser refuses it, and its status says why.
      assert.equal(over.status, 201, `${over.status} ${over.body.message ?? ''}`);
      const valid = await waitFor(async () => {
        const status = (await apiAs(TENANT, 'GET', `${policies}/over`)).body.status as { conditions?: { type: string; status: string; message?: string }[] } | undefined;
        return status?.conditions?.find((c) => c.type === 'Valid');
      }, { description: 'the over-budget policy\'s Valid condition', timeoutMs: 30_000 });
      assert.equal(valid.status, 'False');
      assert.match(valid.message ?? '', /spec: 8193 characters .* in all, more than 8192/);
      await asTenant('DELETE', `${policies}/over`);
    }
    await assertNoRestartSince(restarts);
  });
});
