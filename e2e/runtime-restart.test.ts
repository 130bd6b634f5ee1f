// e2e group: serial — it restarts the node's containerd.
// The node's containerd restarted under the agent (R46), on the real node: containerd makes a new
// socket, which the agent's mount of the old one never shows. The agent exits at once for kubelet to
// start it again with a fresh mount, and a Job whose main ends 10 s after containerd is back
// completes within 30 s of its main's exit (on containerd 1.6 for the oldest release, 2 for the newest).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { clients, clusterEnv } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { agentPod, ctr, deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { restartClusterProcess } from './support/processes.ts';
import { waitFor } from './support/wait.ts';
import { jobCondition } from './support/workloads.ts';

const { core } = clients();
let namespace: string;

const restarts = (pod: V1Pod) => pod.status?.containerStatuses?.[0]?.restartCount ?? 0;

describe('R46: containerd restarted on the node', { timeout: 300_000 }, () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'runtime-restart');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('the agent comes back with a fresh mount, and a Job whose main ends 10 s after containerd is back completes within 30 s of its main', async (t) => {
    const agentBefore = await agentPod();
    const { startedAtMs } = await restartClusterProcess('containerd', {
      stopTimeoutMs: 20_000,
      ready: async () => (ctr(['version']), true),
      readyTimeoutMs: 60_000,
    });
    t.diagnostic(`containerd serving again at ${new Date(startedAtMs).toISOString()} (Kubernetes ${clusterEnv().k8sVersion})`);
    await jobs.runJob(namespace, 'after-restart', {
      restartPolicy: 'Never',
      containers: [
        container('main', `while [ $(date +%s) -lt ${Math.ceil(startedAtMs / 1000) + 10} ]; do sleep 0.2; done; echo main done`),
        container('proxy', 'trap \'echo "got SIGTERM"; exit 0\' TERM; while :; do sleep 1 & wait $!; done', { env: [SIDECAR_MARK] }),
      ],
    });
    const { job, type } = await jobs.finishedJob(namespace, 'after-restart', 120_000);
    const pod = await jobs.onlyPod(namespace, 'after-restart');
    const mainEnd = jobs.finishedAt(pod, 'main');
    const completeAt = jobCondition(job, 'Complete')?.lastTransitionTime;
    const proxy = timestampedLogs(namespace, pod.metadata!.name!, 'proxy');
    assert.ok(mainEnd && completeAt && firstLine(proxy, /^got SIGTERM$/), showLines(proxy));
    const ms = new Date(completeAt).getTime() - mainEnd.getTime();
    t.diagnostic(`main finished → Job Complete: ${ms} ms (1 s precision)`);
    assert.equal(type, 'Complete');
    assert.ok(ms <= 30_000, `the Job completed within 30 s of its main: ${ms} ms`);
    // The agent exited on its own for a fresh socket mount, and kubelet started it again as soon as
    // containerd served: not after its liveness probe's minutes. It exits with code 3; an exit while
    // containerd was down is one containerd never saw, which it reports as 255, reason Unknown.
    const agentAfter = await waitFor(async () => {
      const p = await agentPod();
      return p.metadata!.name === agentBefore.metadata!.name && restarts(p) > restarts(agentBefore) ? p : undefined;
    }, { description: 'the agent container restarted', timeoutMs: 30_000 });
    const status = agentAfter.status!.containerStatuses![0]!;
    const exited = status.lastState?.terminated;
    t.diagnostic(`the agent's last run ended with ${exited?.exitCode} (${exited?.reason}); its new run started ${new Date(status.state!.running!.startedAt!).getTime() - startedAtMs} ms after containerd served again`);
    assert.ok(exited?.exitCode === 3 || (exited?.exitCode === 255 && exited.reason === 'Unknown'), JSON.stringify(exited));
    assert.ok(new Date(status.state!.running!.startedAt!).getTime() - startedAtMs < 20_000, 'started again within seconds of containerd serving');
  });
});
