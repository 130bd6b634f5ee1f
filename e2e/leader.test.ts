// e2e group: serial — it kills the controller's leader.
// The controller Deployment's two replicas with leader election on a real Lease: one leads; when it
// crashes another takes over within the lease duration, and one that shuts down hands over at once.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { clients } from './support/cluster.ts';
import { CONTROLLER, NAMESPACE, controllerLeader, controllerPods, deployProject, killContainer, scrapePod } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import { waitFor } from './support/wait.ts';

const leases = clients().kc.makeApiClient(CoordinationV1Api);
const holder = async () => (await leases.readNamespacedLease({ namespace: NAMESPACE, name: CONTROLLER })).spec?.holderIdentity;

function waitForNewHolder(previous: string, timeoutMs: number): Promise<string> {
  return waitFor(async () => {
    const now = await holder();
    return now && now !== previous ? now : undefined;
  }, { description: `a holder other than ${previous}`, timeoutMs, intervalMs: 100 });
}

describe('controller leader election', () => {
  it('one of two replicas leads; another takes over when it crashes, and at once when it stops', async () => {
    await deployProject();
    const pods = await controllerPods();
    assert.equal(pods.length, 2);
    const leader = await controllerLeader();
    const leading = await Promise.all(pods.map(async (p) => /^sidecar_terminator_controller_is_leader 1$/m.test(await scrapePod(p, 9441))));
    assert.deepEqual(leading.filter(Boolean).length, 1, 'exactly one replica acts');

    const crashed = (await holder())!;
    const killedAt = Date.now();
    killContainer(leader);
    const next = await waitForNewHolder(crashed, 30_000);
    console.log(`# leader crashed: ${next} took the Lease after ${Date.now() - killedAt} ms (lease duration 15 s)`);

    const nextPod = await controllerLeader();
    const stoppedAt = Date.now();
    kubectl('-n', NAMESPACE, 'delete', 'pod', nextPod.metadata!.name!, '--wait=false');
    await waitForNewHolder(next, 15_000);
    const handover = Date.now() - stoppedAt;
    console.log(`# leader stopped gracefully: the Lease changed hands after ${handover} ms`);
    assert.ok(handover < 10_000, `handover took ${handover} ms`);
    kubectl('-n', NAMESPACE, 'rollout', 'status', `deployment/${CONTROLLER}`, '--timeout=120s');
  });
});
