// e2e group: shared
// Hostile requests, round two (issue 24, items 2 and 8.1): names that are not the Job's own, tried on
// the real cluster by a user who may create requests and Pods in their own namespace. The attacks of
// that round that load or change the whole cluster are in e2e/security-requests.test.ts (serial).
// - Squatted names: requests taking `sidecar-termination-<uid>` and `-<uid>-1000` for a Job's Pod,
//   labelled for another node, do not keep its sidecar running.
// - A Pod bound to a node that does not exist: one Warning, and no retry at the queue's pace.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LABEL_ACTIVE, LABEL_NODE_NAME, LABEL_POD_UID } from '../api/container-recreate-request.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { NAMESPACE, controllerLeader, deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container, podEvents, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { createRequest } from './support/requests.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus, jobPods } from './support/workloads.ts';

const { core } = clients();

let ns: string;

describe('security: names that are not the Job\'s own (issue 24)', () => {
  before(async () => {
    await deployProject();
    ns = await createTestNamespace(core, 'names');
  });
  after(async () => {
    if (ns) await deleteTestNamespace(core, ns);
  });

  it('two squatted request names (-<uid> and -<uid>-1000, another node\'s label) do not keep a Job\'s sidecar running', async () => {
    await jobs.runJob(ns, 'squatted', {
      restartPolicy: 'Never',
      containers: [container('main', 'sleep 20'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })],
    });
    const pod = await waitFor(async () => {
      const [p] = await jobPods(core, ns, 'squatted');
      return p && containerStatus(p, 'main')?.state?.running ? p : undefined;
    }, { description: 'the Job\'s Pod running', timeoutMs: 90_000 });
    const uid = pod.metadata!.uid!;
    const squatter = { [LABEL_NODE_NAME]: 'elsewhere', [LABEL_POD_UID]: uid, [LABEL_ACTIVE]: 'true' };
    for (const name of [`sidecar-termination-${uid}`, `sidecar-termination-${uid}-1000`]) {
      await createRequest(ns, name, { podName: pod.metadata!.name!, containers: [{ name: 'proxy' }] }, squatter);
    }
    const { type } = await jobs.finishedJob(ns, 'squatted', 90_000);
    assert.equal(type, 'Complete');
    const finished = await core.readNamespacedPod({ namespace: ns, name: pod.metadata!.name! });
    const mainDone = containerStatus(finished, 'main')?.state?.terminated?.finishedAt;
    const proxyDone = containerStatus(finished, 'proxy')?.state?.terminated?.finishedAt;
    assert.ok(mainDone && proxyDone, JSON.stringify(finished.status?.containerStatuses));
    const lagMs = new Date(proxyDone).getTime() - new Date(mainDone).getTime();
    assert.ok(lagMs < 30_000, `the sidecar stopped ${lagMs} ms after the main`);
    const ours = await jobs.readRequest(ns, `sidecar-termination-${uid}-2`);
    assert.equal(ours?.metadata.labels?.[LABEL_NODE_NAME], clusterEnv().nodeName, 'the next free name, ours');
  });

  it('a Pod bound to a node that does not exist: one SidecarNodeNotFound Warning, not a retry every second', async () => {
    const name = 'nowhere';
    await core.createNamespacedPod({ namespace: ns, body: {
      metadata: { name },
      spec: {
        nodeName: 'st-e2e-no-such-node', restartPolicy: 'Never', terminationGracePeriodSeconds: 5,
        containers: [container('main', 'true'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })],
      },
    } });
    const pod = await core.readNamespacedPod({ namespace: ns, name });
    const warning = await waitFor(async () => (await podEvents(pod)).find((e) => e.startsWith('Warning SidecarNodeNotFound: ')),
      { description: 'a SidecarNodeNotFound Warning on the Pod', timeoutMs: 30_000 });
    assert.match(warning, /st-e2e-no-such-node, which does not exist/);
    // The Pod garbage collector deletes Pods of missing nodes after 40 s: looked at within that.
    await sleep(15_000);
    const leader = await controllerLeader();
    const lines = kubectl('-n', NAMESPACE, 'logs', leader.metadata!.name!, '--since=25s').split('\n').filter((l) => l.includes(`${ns}/${name}`));
    const retries = lines.filter((l) => l.includes('retrying'));
    assert.ok(retries.length <= 1, `the Pod was retried ${retries.length} times in 25 s:\n${retries.slice(0, 5).join('\n')}`);
  });
});
