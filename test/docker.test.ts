// test group: serial — it starts a private dockerd.
// ContainerRuntime over the Docker Engine API against a real, private dockerd.
import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { dockerFixture, type RuntimeFixture } from './support/fixtures.ts';
import { runtimeContract, startReady } from './support/contract.ts';

runtimeContract('DockerRuntime against dockerd', dockerFixture);

// A Pod's lifecycle.stopSignal reaches a docker:// container only through the agent: the Engine is
// told it on every stop (through kill and wait: Debian's 20.10 Engine, API 1.41, has no stop signal).
describe('DockerRuntime: the Pod spec\'s stop signal (R38)', () => {
  let f: RuntimeFixture | undefined;
  before(async () => {
    f = await dockerFixture();
  });
  after(async () => {
    await f?.close();
  });
  const fixture = (): RuntimeFixture => {
    assert.ok(f, 'fixture setup failed');
    return f;
  };
  /** Exits 10 on SIGUSR1 and 15 on SIGTERM: the exit code says which signal came. */
  const SAYS_WHICH = "trap 'exit 10' USR1; trap 'exit 15' TERM; touch /tmp/ready; while :; do sleep 3600 & wait $!; done";

  it('stop with SIGUSR1: the container gets SIGUSR1, not SIGTERM, and the stop returns once it exited', async (t: TestContext) => {
    const id = await startReady(fixture(), SAYS_WHICH);
    const started = Date.now();
    await fixture().runtime.stop(id, 30, 'SIGUSR1');
    t.diagnostic(`stop with SIGUSR1 took ${Date.now() - started} ms`);
    assert.equal(await fixture().rawExitCode(id), 10);
    assert.ok(Date.now() - started < 10_000);
  });

  it('a container that ignores its stop signal is killed once the grace period is over, not before', async (t: TestContext) => {
    const id = await startReady(fixture(), "trap '' USR1; touch /tmp/ready; while :; do sleep 3600 & wait $!; done");
    const started = Date.now();
    await fixture().runtime.stop(id, 2, 'SIGUSR1');
    const took = Date.now() - started;
    t.diagnostic(`stop with SIGUSR1 ignored, 2 s grace: ${took} ms`);
    assert.ok(took >= 1_900 && took < 10_000, `took ${took} ms`);
    assert.equal(await fixture().rawExitCode(id), 137);
  });

  it('without a signal: the container\'s own (SIGTERM)', async () => {
    const id = await startReady(fixture(), SAYS_WHICH);
    await fixture().runtime.stop(id, 30);
    assert.equal(await fixture().rawExitCode(id), 15);
  });

  it('a stop with a signal of a container already stopped is no error (as CRI StopContainer)', async () => {
    const id = await startReady(fixture(), SAYS_WHICH);
    await fixture().runtime.stop(id, 30, 'SIGUSR1');
    await fixture().runtime.stop(id, 30, 'SIGUSR1');
    assert.equal(await fixture().rawExitCode(id), 10);
  });

  it('a signal name that is not one refuses the stop before any call', async () => {
    const id = await startReady(fixture(), SAYS_WHICH);
    await assert.rejects(fixture().runtime.stop(id, 30, 'SIGUSR1&t=0'), /invalid stop signal "SIGUSR1&t=0"/);
    assert.equal(await fixture().rawExitCode(id), undefined, 'still running');
    await fixture().runtime.stop(id, 30);
  });
});
