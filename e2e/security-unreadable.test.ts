// e2e group: shared
// Hostile namespaces, round four (R48): one Pod that no stream may stop at. A namespace user (the
// built-in `edit` role, in their namespace only) creates a bare Pod with 1 MB of `<` in its env:
// stored as 1 MB, served as JSON at six bytes a `<`, over the 4 MiB the agent and the controller
// read of one object. The user edits it, and adds a SidecarPolicy, which has both decide the
// namespace's Pods again. Meanwhile two marked Jobs in another namespace, a plain one and one whose
// ignore-exit-code sidecar only the controller's phase write ends, must end as always: within 30 s
// of their mains. The Pod itself gets one Warning that says why nothing is done for it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EnvVar, V1Pod } from '@kubernetes/client-node';
import { EVENT_REASONS } from '../api/names.ts';
import { apiAs } from './support/api-as.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { AGENT_METRICS_PORT, CONTROLLER_METRICS_PORT, agentPod, controllerLeader, ourRestarts, assertNoRestartSince, podMetric } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { BUSYBOX, IGNORE_EXIT_MARK, SIDECAR_MARK, container, finishedAt } from './support/jobs.ts';
import { TENANT, asTenant, tenantNamespaces } from './support/tenant.ts';
import { waitFor } from './support/wait.ts';
import { jobCondition } from './support/workloads.ts';

const { core } = clients();
/** Ten values of 100,000 `<` each: every one under Linux's limit on one string, so the Pod runs. */
const LT_ENV: V1EnvVar[] = Array.from({ length: 10 }, (_, i) => ({ name: `LT_${i}`, value: '<'.repeat(100_000) }));
const unreadable = (part: 'agent' | 'controller') => `sidecar_terminator_${part}_unreadable_objects_total{resource="pods"}`;

describe('security: a Pod served larger than the parts read (R48)', () => {
  const namespaces = tenantNamespaces('unreadable');

  it('a tenant\'s Pod of 1 MB of "<", edited, and a policy in its namespace: Jobs elsewhere end within 30 s of their mains; the Pod gets one Warning', async (t) => {
    const restarts = await ourRestarts();
    const agent = await agentPod();
    const leader = await controllerLeader();
    const counted = { agent: await podMetric(agent, AGENT_METRICS_PORT, unreadable('agent')), controller: await podMetric(leader, CONTROLLER_METRICS_PORT, unreadable('controller')) };

    const big: V1Pod = {
      metadata: { name: 'big' },
      spec: {
        nodeName: clusterEnv().nodeName, restartPolicy: 'Never', terminationGracePeriodSeconds: 0, dnsPolicy: 'Default',
        containers: [{ name: 'big', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sleep', '3600'], env: LT_ENV }],
      },
    };
    await asTenant('POST', `/api/v1/namespaces/${namespaces.tenant()}/pods`, big);
    const served = (await apiAs(TENANT, 'GET', `/api/v1/namespaces/${namespaces.tenant()}/pods/big`)).body;
    t.diagnostic(`the Pod as sent: ${JSON.stringify(big).length} bytes; as served: ${JSON.stringify(served).replaceAll('<', '\\u003c').length} bytes`);
    // Both parts have met it: on its creation, and on kubelet's status writes.
    await waitFor(async () => (await podMetric(agent, AGENT_METRICS_PORT, unreadable('agent'))) > counted.agent &&
      (await podMetric(leader, CONTROLLER_METRICS_PORT, unreadable('controller'))) > counted.controller, { description: 'both parts counted the Pod as unreadable', timeoutMs: 60_000 });

    // The tenant edits it, and has both parts decide the namespace again (a policy that matches nothing).
    for (let i = 0; i < 3; i++) await asTenant('PATCH', `/api/v1/namespaces/${namespaces.tenant()}/pods/big`, { metadata: { annotations: { edit: String(i) } } });
    await asTenant('POST', `/apis/sidecar-terminator.dev/v1alpha1/namespaces/${namespaces.tenant()}/sidecarpolicies`, {
      apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy', metadata: { name: 'relist' },
      spec: { mode: 'Enforce', containers: [{ name: 'no-such-container' }] },
    });

    const main = container('main', 'sleep 5; echo main done');
    const sidecar = (name: string) => container(name, 'trap "exit 0" TERM; while :; do sleep 1 & wait $!; done', { env: [SIDECAR_MARK] });
    await jobs.runJob(namespaces.jobs(), 'plain', { restartPolicy: 'Never', containers: [main, sidecar('proxy')] });
    await jobs.runJob(namespaces.jobs(), 'ignore-exit', {
      restartPolicy: 'Never',
      containers: [main, container('shipper', 'trap "exit 3" TERM; while :; do sleep 1 & wait $!; done', { env: [SIDECAR_MARK, IGNORE_EXIT_MARK] })],
    });
    for (const name of ['plain', 'ignore-exit']) {
      const { job, type } = await jobs.finishedJob(namespaces.jobs(), name, 120_000);
      assert.equal(type, 'Complete', name);
      const pod = await jobs.onlyPod(namespaces.jobs(), name);
      const mainDone = finishedAt(pod, 'main')!.getTime();
      const complete = new Date(jobCondition(job, 'Complete')!.lastTransitionTime!).getTime();
      t.diagnostic(`${name}: Job Complete ${((complete - mainDone) / 1000).toFixed(0)} s after its main`);
      assert.ok(complete - mainDone <= 30_000, `${name}: Complete ${complete - mainDone} ms after its main`);
    }

    const events = await waitFor(async () => {
      const list = await jobs.podEvents(await core.readNamespacedPod({ namespace: namespaces.tenant(), name: 'big' }));
      return list.some((e) => e.startsWith(`Warning ${EVENT_REASONS.podUnreadable}`)) ? list : undefined;
    }, { description: 'the unreadable Pod\'s Warning', timeoutMs: 30_000 });
    assert.equal(events.filter((e) => e.includes(EVENT_REASONS.podUnreadable)).length, 1, events.join('\n'));
    await assertNoRestartSince(restarts);
  });
});
