// e2e group: shared
// Hostile namespaces: a tenant's policy edits cost their own scope (R54). A namespace user (the
// built-in `edit` role, in their namespace only) creates a SidecarPolicy and then rewrites it four
// times a second. Each rewrite changes what the policy says, so both parts must look at that
// namespace's Pods again: from their caches, never by listing Pods from the API server (with many
// agents, each listing its node on every edit, the tenant would load the API server for everyone).
// Meanwhile
// - the tenant's own Job, created before the policy, whose sidecar only the policy marks, ends
//   within 30 s of its main: a policy added later is applied from the cache;
// - a marked Job in another namespace ends within 30 s of its main;
// - neither the controller's leader nor the node's agent lists Pods, counted by their own
//   `api_requests_total{verb="list",resource="pods"}`.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { AGENT_METRICS_PORT, CONTROLLER_METRICS_PORT, agentPod, assertNoRestartSince, controllerLeader, ourRestarts, scrapePod } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container, finishedAt } from './support/jobs.ts';
import { asTenant, tenantNamespaces } from './support/tenant.ts';
import { waitFor } from './support/wait.ts';
import { jobCondition } from './support/workloads.ts';

const EDITS = 100;
const EDIT_INTERVAL_MS = 250;

/** Pod LISTs the part has sent, whatever their answers' codes. */
async function podLists(pod: V1Pod, port: number, part: 'agent' | 'controller'): Promise<number> {
  const prefix = `sidecar_terminator_${part}_api_requests_total{verb="list",resource="pods",`;
  return (await scrapePod(pod, port)).split('\n').filter((l) => l.startsWith(prefix)).reduce((sum, l) => sum + Number(l.split(' ')[1]), 0);
}

const sidecarLoop = 'trap "exit 0" TERM; while :; do sleep 1 & wait $!; done';

describe('security: a tenant\'s policy edits cost their own scope (R54)', () => {
  const namespaces = tenantNamespaces('policy-edits');

  it('a policy created after its Pod and rewritten four times a second: no Pod LIST by either part, and Jobs here and elsewhere end within 30 s of their mains', async (t) => {
    const restarts = await ourRestarts();
    const agent = await agentPod();
    const leader = await controllerLeader();
    // Nothing marks the shipper yet: only the policy below will.
    await jobs.runJob(namespaces.tenant(), 'own', { restartPolicy: 'Never', containers: [container('main', 'sleep 20; echo main done'), container('shipper-a', sidecarLoop)] });
    await waitFor(async () => (await jobs.onlyPod(namespaces.tenant(), 'own').catch(() => undefined))?.status?.phase === 'Running', { description: 'the tenant\'s Job Pod running', timeoutMs: 60_000 });
    const before = { agent: await podLists(agent, AGENT_METRICS_PORT, 'agent'), controller: await podLists(leader, CONTROLLER_METRICS_PORT, 'controller') };

    const policies = `/apis/sidecar-terminator.dev/v1alpha1/namespaces/${namespaces.tenant()}/sidecarpolicies`;
    await asTenant('POST', policies, {
      apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy', metadata: { name: 'shippers' },
      spec: { mode: 'Enforce', containers: [{ name: 'shipper-*' }, { name: 'unused-0' }] },
    });
    await jobs.runJob(namespaces.jobs(), 'elsewhere', { restartPolicy: 'Never', containers: [container('main', 'sleep 10; echo main done'), container('proxy', sidecarLoop, { env: [SIDECAR_MARK] })] });
    const started = Date.now();
    for (let i = 1; i <= EDITS; i++) {
      await asTenant('PATCH', `${policies}/shippers`, { spec: { containers: [{ name: 'shipper-*' }, { name: `unused-${i}` }] } });
      await new Promise((r) => setTimeout(r, EDIT_INTERVAL_MS));
    }
    t.diagnostic(`${EDITS} edits in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    const lists = { agent: (await podLists(agent, AGENT_METRICS_PORT, 'agent')) - before.agent, controller: (await podLists(leader, CONTROLLER_METRICS_PORT, 'controller')) - before.controller };
    t.diagnostic(`Pod LISTs while the policy was created and edited: agent ${lists.agent}, controller ${lists.controller}`);

    for (const [namespace, name, sidecar] of [[namespaces.tenant(), 'own', 'shipper-a'], [namespaces.jobs(), 'elsewhere', 'proxy']] as const) {
      const { job, type } = await jobs.finishedJob(namespace, name, 120_000);
      assert.equal(type, 'Complete', name);
      const pod = await jobs.onlyPod(namespace, name);
      const mainDone = finishedAt(pod, 'main')!.getTime();
      const complete = new Date(jobCondition(job, 'Complete')!.lastTransitionTime!).getTime();
      t.diagnostic(`${name}: ${sidecar} stopped, Job Complete ${((complete - mainDone) / 1000).toFixed(1)} s after its main`);
      assert.ok(complete - mainDone <= 30_000, `${name}: Complete ${complete - mainDone} ms after its main`);
    }
    assert.deepEqual(lists, { agent: 0, controller: 0 }, 'no Pod LIST while a tenant edits a policy');
    await assertNoRestartSince(restarts);
  });
});
