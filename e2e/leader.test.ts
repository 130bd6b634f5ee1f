// Two controller replicas with leader election on a real Lease: one acts, the standby takes over
// when the leader dies, and a leader that stops gives the Lease up at once.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { clients } from './support/cluster.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import type { Process } from './support/project.ts';
import { installAPI, scrape, startController } from './support/project.ts';
import { waitFor } from './support/wait.ts';

const { core } = clients();
let namespace: string;
const running: Process[] = [];

async function isLeader(p: Process): Promise<boolean> {
  return /^sidecar_terminator_controller_is_leader 1$/m.test(await scrape(p).catch(() => ''));
}

async function leaderOf(candidates: Process[]): Promise<Process> {
  return waitFor(async () => {
    const leaders = [];
    for (const p of candidates) if (await isLeader(p)) leaders.push(p);
    assert.ok(leaders.length <= 1, 'never two leaders at once');
    return leaders[0];
  }, { description: 'a leader', timeoutMs: 60_000, intervalMs: 200 });
}

describe('controller leader election', () => {
  before(async () => {
    installAPI();
    namespace = await createTestNamespace(core, 'leader');
  });
  after(async () => {
    for (const p of running) await p.stop();
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('one of two replicas leads; the standby takes over within seconds when the leader dies', async () => {
    const args = ['--leader-elect', 'true', '--lease-namespace', namespace];
    running.push(await startController('controller-a', args), await startController('controller-b', args));
    const first = await leaderOf(running);
    const standby = running.find((p) => p !== first)!;
    assert.equal(await isLeader(standby), false);

    const killedAt = Date.now();
    await first.kill();
    const second = await leaderOf([standby]);
    const crashTakeover = Date.now() - killedAt;
    console.log(`# standby took over ${crashTakeover} ms after the leader was killed (lease duration 15 s)`);
    assert.ok(crashTakeover < 25_000, `takeover took ${crashTakeover} ms`);

    const lease = await clients().kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace, name: 'sidecar-terminator-controller' });
    assert.ok(lease.spec?.holderIdentity, 'the Lease names its holder');
    assert.ok((lease.spec?.leaseTransitions ?? 0) >= 1);

    // A leader that shuts down releases the Lease: a new candidate takes it at once.
    const third = await startController('controller-c', args);
    running.push(third);
    const stoppedAt = Date.now();
    await second.stop();
    await leaderOf([third]);
    const handover = Date.now() - stoppedAt;
    console.log(`# a new replica took over ${handover} ms after the leader stopped gracefully`);
    assert.ok(handover < 8_000, `handover took ${handover} ms`);
  });
});
