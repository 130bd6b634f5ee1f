// test group: serial — it starts private containerds (1.6 and 2).
// ContainerRuntime over CRI against a real, private containerd: Debian's 1.6 and containerd 2.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KeyedLimit } from '../common/keyed-limit.ts';
import { STOPS_PER_POD } from '../agent/stops.ts';
import type { RuntimeContainerID } from '../api/container-id.ts';
import { containerd2 } from './support/containerd.ts';
import { containerdFixture } from './support/fixtures.ts';
import { runtimeContract } from './support/contract.ts';

runtimeContract('CriRuntime against Debian\'s containerd 1.6', () => containerdFixture());
runtimeContract('CriRuntime against containerd 2 (e2e/cluster/versions.env)', () => containerdFixture(containerd2()));

// A Pod's containers share one shim on containerd 2, whose exit queue loses exits past 32 at once:
// 48 StopContainer calls at once in one sandbox hung for a minute with the containers still running
// (containerd 2.4.2, on this machine). The agent stops at most STOPS_PER_POD of a Pod at once.
for (const [title, build] of [['containerd 2', () => containerd2()], ['Debian\'s containerd 1.6', () => undefined]] as const) {
  describe(`R39: 64 containers of one Pod sandbox stopped ${STOPS_PER_POD} at a time (${title})`, () => {
    it('every one exits on SIGTERM, none hangs', { timeout: 300_000 }, async () => {
      const fixture = await containerdFixture(build());
      try {
        const ids: RuntimeContainerID[] = [];
        for (let i = 0; i < 64; i++) ids.push(await fixture.run("trap 'exit 0' TERM; while true; do sleep 1; done"));
        const limit = new KeyedLimit(STOPS_PER_POD);
        const started = Date.now();
        await Promise.all(ids.map((id) => limit.run('pod', () => fixture.runtime.stop(id, 10))));
        const exitCodes = await Promise.all(ids.map((id) => fixture.rawExitCode(id)));
        assert.deepEqual(exitCodes, ids.map(() => 0));
        console.log(`# ${title}: 64 stops, ${STOPS_PER_POD} at a time: ${Date.now() - started} ms`);
      } finally {
        await fixture.close();
      }
    });
  });
}
