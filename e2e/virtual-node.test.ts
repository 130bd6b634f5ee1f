// e2e group: serial — it labels the cluster's one node as a virtual node, which changes how the
// controller and the agent treat every Pod on it.
// Virtual nodes (R22) on the real cluster: the node labelled as virtual-kubelet nodes are (its real
// kubelet stands in for a provider's, so the Job can end). A marked sidecar is swapped for the
// quick-exit image and its Job completes with no request; an ignore-exit-code sidecar whose
// quick-exit container cannot start (its command is not in the image) still lets the Pod end
// Succeeded, with no SidecarFailedPod Warning.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { IGNORE_EXIT_MARK, SIDECAR_MARK, container, podEvents, requestsFor, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { sleep } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const { core } = clients();
const QUICK_EXIT = 'sidecar-terminator.local/quick-exit:1';
let namespace = '';

describe('Job sidecars on a virtual node', () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'virtual-node');
    kubectl('label', 'node', clusterEnv().nodeName, 'type=virtual-kubelet', '--overwrite');
  });
  after(async () => {
    kubectl('label', 'node', clusterEnv().nodeName, 'type-');
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('an image sidecar: image swapped, Job Complete', async () => {
    await jobs.runJob(namespace, 'virtual', {
      restartPolicy: 'Never',
      containers: [
        container('main', 'sleep 2'),
        container('proxy', stopOnTerm(0), { env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: QUICK_EXIT }] }),
      ],
    });
    const { job, type } = await jobs.finishedJob(namespace, 'virtual');
    const pod = await jobs.onlyPod(namespace, 'virtual');
    console.log(`# ${jobs.timeline('virtual node', job, pod, 'main', 'proxy')}`);
    assert.equal(type, 'Complete');
    assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT);
    assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0);
    assert.deepEqual(await requestsFor(pod), []);
    const swaps = (await podEvents(pod)).filter((e) => e.includes(EVENT_REASONS.replacingImage));
    assert.equal(swaps.length, 1, `one event for the swap: ${swaps.join('\n')}`);
  });

  it('an ignore-exit-code sidecar whose quick-exit container cannot start ends Succeeded, with no SidecarFailedPod Warning', async () => {
    await jobs.runJob(namespace, 'virtual-ignore', {
      restartPolicy: 'Never',
      containers: [
        container('main', 'sleep 2'),
        // Its command is not one of the quick-exit image's paths: the swapped container cannot start (exit 128).
        { ...container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK, IGNORE_EXIT_MARK, { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: QUICK_EXIT }] }), command: ['/bin/busybox', 'sh', '-c', stopOnTerm(0)] },
      ],
    });
    const { type } = await jobs.finishedJob(namespace, 'virtual-ignore', 90_000);
    const pod = await jobs.onlyPod(namespace, 'virtual-ignore');
    assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT, 'the image was swapped');
    assert.equal(type, 'Complete', `phase ${pod.status?.phase}: ${JSON.stringify(containerStatus(pod, 'proxy')?.state)}`);
    assert.equal(pod.status?.phase, 'Succeeded');
    await sleep(3_000);
    const failed = (await podEvents(pod)).filter((e) => e.includes(` ${EVENT_REASONS.sidecarFailedPod}: `));
    assert.deepEqual(failed, []);
  });
});
