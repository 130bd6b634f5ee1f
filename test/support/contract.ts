// The behaviour every ContainerRuntime must show against a real daemon. Registered once per
// runtime (test/cri.test.ts, test/docker.test.ts).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { discoverRuntimes } from '../../agent/runtime/discover.ts';
import { RuntimeCallError } from '../../agent/runtime/errors.ts';
import { EXEC_OUTPUT_BYTES, type RuntimeContainer } from '../../agent/runtime/types.ts';
import type { RuntimeContainerID } from '../../api/container-id.ts';
import { runtimeContainerID } from '../../api/container-id.ts';
import type { RuntimeFixture } from './fixtures.ts';

/** Marks the container ready once its TERM disposition is in place: a stop before that would race. */
const READY = 'touch /tmp/ready';
/** Sleeps in the background so a trapped signal interrupts `wait` at once. */
const IDLE = 'while :; do sleep 3600 & wait $!; done';
export const SCRIPTS = {
  exitOnTerm: `trap 'exit 0' TERM; ${READY}; ${IDLE}`,
  ignoreTerm: `trap '' TERM; ${READY}; ${IDLE}`,
  /** Exits with the code a preStop hook wrote to /tmp/prestop, 3 if none did. */
  exitWithPreStopCode: `trap 'exit $(cat /tmp/prestop 2>/dev/null || echo 3)' TERM; ${READY}; ${IDLE}`,
};

const elapsedMs = (start: number) => Date.now() - start;

/** Runs a script and waits until it marked itself ready (READY): its traps are in place. */
export async function startReady({ runtime, run }: RuntimeFixture, script: string): Promise<RuntimeContainerID> {
  const id = await run(script);
  const until = Date.now() + 30_000;
  for (;;) {
    const r = await runtime.exec(id, ['test', '-e', '/tmp/ready'], 5);
    if (r.exitCode === 0) return id;
    assert.ok(Date.now() < until, `container ${id} did not get ready`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export function runtimeContract(title: string, setup: () => Promise<RuntimeFixture>): void {
  describe(title, () => {
    let f: RuntimeFixture | undefined;
    const fixture = (): RuntimeFixture => {
      assert.ok(f, 'fixture setup failed');
      return f;
    };

    before(async () => {
      f = await setup();
    });
    after(async () => {
      await f?.close();
    });

    const start = (script: string) => startReady(fixture(), script);

    async function exited(id: RuntimeContainerID): Promise<RuntimeContainer> {
      const status = await fixture().runtime.status(id);
      assert.ok(status, `status of ${id}`);
      assert.equal(status.state, 'exited');
      return status;
    }

    it('version() names the runtime of the container ID prefix', async () => {
      const { runtime, runtimeName } = fixture();
      const v = await runtime.version();
      assert.equal(v.runtimeName, runtimeName);
      assert.equal(runtime.idPrefix, runtimeName);
      // Debian builds say "1.6.20~ds1", upstream builds "v2.4.2".
      assert.match(v.runtimeVersion, /^v?\d+\.\d+/);
    });

    it('is found under a host run dir and picked by container ID prefix', async () => {
      const { hostRunDir, socket, runtimeName } = fixture();
      const id = await start(SCRIPTS.exitOnTerm);
      for (const runtimes of [await discoverRuntimes({ hostRunDir }), await discoverRuntimes({ socket })]) {
        try {
          const picked = runtimes.forContainer(`${runtimeName}://${id}`);
          assert.ok('runtime' in picked, JSON.stringify(picked));
          assert.equal(picked.container.id, id);
          assert.equal(picked.runtime.idPrefix, runtimeName);
          assert.equal((await picked.runtime.status(id))?.state, 'running');
          assert.match((runtimes.forContainer(`other://${id}`) as { error: string }).error, /runtime "other" is not on this node/);
        } finally {
          runtimes.close();
        }
      }
      await fixture().runtime.stop(id, 0);
    });

    it('status() of an unknown container is undefined; malformed IDs are refused', async () => {
      const { runtime, runtimeName } = fixture();
      // IDs the types let through only as a runtime's own: what the runtime's guards see.
      assert.equal(await runtime.status(runtimeContainerID(randomBytes(32).toString('hex'))), undefined);
      await assert.rejects(runtime.status(runtimeContainerID('abc')), TypeError);
      await assert.rejects(runtime.status(runtimeContainerID(`${runtimeName}://${randomBytes(32).toString('hex')}`)), /bare ID/);
    });

    it('stop() of an unknown container fails, saying so', async () => {
      const { runtime, socket } = fixture();
      const id = runtimeContainerID(randomBytes(32).toString('hex'));
      await assert.rejects(runtime.stop(id, 1), (error: unknown) => {
        assert.ok(error instanceof RuntimeCallError);
        assert.equal(error.notFound, true);
        assert.ok(error.message.includes(id) && error.message.includes(socket), error.message);
        return true;
      });
    });

    it('SIGTERM reaches the process: a TERM trap exits 0, reason Completed', async (t: TestContext) => {
      const { runtime, rawExitCode } = fixture();
      const id = await start(SCRIPTS.exitOnTerm);
      const running = await runtime.status(id);
      assert.equal(running?.state, 'running');
      assert.equal(running?.exitCode, undefined);
      assert.ok(running && running.startedAtNs > 0n);

      const t0 = Date.now();
      await runtime.stop(id, 30);
      const took = elapsedMs(t0);
      t.diagnostic(`stop of a TERM-trapping container took ${took} ms`);
      assert.ok(took < 10_000, `stop took ${took} ms, expected well under the 30 s grace`);

      const status = await exited(id);
      assert.equal(status.exitCode, 0);
      assert.equal(status.reason, 'Completed');
      assert.equal(await rawExitCode(id), 0);
      assert.equal(status.startedAtNs, running.startedAtNs);
      assert.ok(status.finishedAtNs > status.startedAtNs);
      const nowNs = BigInt(Date.now()) * 1_000_000n;
      assert.ok(nowNs - status.finishedAtNs < 60_000_000_000n, 'finishedAt is about now');

      await runtime.stop(id, 1); // already stopped: no error
    });

    it('a process ignoring SIGTERM is killed after the grace period (137)', async (t: TestContext) => {
      const { runtime, rawExitCode } = fixture();
      const id = await start(SCRIPTS.ignoreTerm);
      const t0 = Date.now();
      await runtime.stop(id, 2);
      const took = elapsedMs(t0);
      t.diagnostic(`stop with a 2 s grace took ${took} ms`);
      assert.ok(took >= 1_900, `stop took ${took} ms: SIGKILL came before the grace period ended`);
      assert.ok(took < 10_000, `stop took ${took} ms`);
      const status = await exited(id);
      assert.equal(status.exitCode, 137);
      assert.equal(status.reason, 'Error');
      assert.equal(await rawExitCode(id), 137);
    });

    it('an exec before the stop (as a preStop hook) runs and its effect is seen by the TERM trap', async () => {
      const { runtime } = fixture();
      const id = await start(SCRIPTS.exitWithPreStopCode);
      const hook = await runtime.exec(id, ['sh', '-c', 'echo 7 > /tmp/prestop && echo hook ran'], 10);
      assert.deepEqual(hook, { exitCode: 0, stdout: 'hook ran\n', stderr: '' });
      await runtime.stop(id, 10);
      const status = await exited(id);
      assert.equal(status.exitCode, 7);
      assert.equal(status.reason, 'Error');
    });

    it('exec() returns stdout, stderr and a non-zero exit code separately', async () => {
      const { runtime } = fixture();
      const id = await start(SCRIPTS.exitOnTerm);
      const r = await runtime.exec(id, ['sh', '-c', 'echo out; echo err >&2; printf "%s" "$(seq 1 3)"; exit 3'], 10);
      assert.deepEqual(r, { exitCode: 3, stdout: 'out\n1\n2\n3', stderr: 'err\n' });
      await runtime.stop(id, 5);
    });

    it(`R48: exec() of a command writing megabytes: it runs to its end, and at most ${EXEC_OUTPUT_BYTES} bytes of its output are held`, async () => {
      const { runtime } = fixture();
      const id = await start(SCRIPTS.exitOnTerm);
      // 3 MB on each stream, then a mark that it ran to its end.
      const flood = 'head -c 3000000 /dev/zero | tr "\\0" x; head -c 3000000 /dev/zero | tr "\\0" y >&2; echo end > /tmp/flooded; exit 4';
      const r = await runtime.exec(id, ['sh', '-c', flood], 20);
      assert.ok(r.stdout.length + r.stderr.length <= EXEC_OUTPUT_BYTES, `held ${r.stdout.length} + ${r.stderr.length} bytes`);
      // The Docker Engine streams the output, so its exit code is still read; a CRI answer that long is refused whole.
      assert.equal(r.exitCode, runtime.idPrefix === 'docker' ? 4 : undefined);
      assert.deepEqual(await runtime.exec(id, ['cat', '/tmp/flooded'], 5), { exitCode: 0, stdout: 'end\n', stderr: '' });
      await runtime.stop(id, 5);
    });

    it('exec() is bounded by its timeout', async (t: TestContext) => {
      const { runtime } = fixture();
      const id = await start(SCRIPTS.exitOnTerm);
      const t0 = Date.now();
      await assert.rejects(runtime.exec(id, ['sleep', '30'], 1), (error: unknown) => {
        assert.ok(error instanceof RuntimeCallError, String(error));
        assert.equal(error.timedOut, true, error.message);
        return true;
      });
      const took = elapsedMs(t0);
      t.diagnostic(`exec with a 1 s timeout gave up after ${took} ms`);
      assert.ok(took >= 900 && took < 10_000, `took ${took} ms`);
      await runtime.stop(id, 5);
    });

    it('exec() in a stopped container fails clearly', async () => {
      const { runtime, socket } = fixture();
      const id = await start(SCRIPTS.exitOnTerm);
      await runtime.stop(id, 5);
      await assert.rejects(runtime.exec(id, ['true'], 5), (error: unknown) => {
        assert.ok(error instanceof RuntimeCallError, String(error));
        assert.ok(error.message.includes(socket) && error.message.includes(id), error.message);
        return true;
      });
    });

    // Shown by order, not by a time bound that load could break: the short stops must end while the
    // long one, sent first, still waits out its grace period.
    it('stops run in parallel: two with a 2 s grace end while one sent before them with 10 s still waits', async () => {
      const { runtime } = fixture();
      const [slow, ...quick] = await Promise.all([1, 2, 3].map(() => start(SCRIPTS.ignoreTerm)));
      assert.ok(slow);
      const slowStop = runtime.stop(slow, 10);
      await Promise.all(quick.map((id) => runtime.stop(id, 2)));
      assert.equal((await runtime.status(slow))?.state, 'running', 'the first stop held back the ones after it');
      await slowStop;
      for (const id of [slow, ...quick]) assert.equal((await exited(id)).exitCode, 137);
    });

    it('stopping one container leaves another alone', async () => {
      const { runtime } = fixture();
      const [a, b] = await Promise.all([start(SCRIPTS.exitOnTerm), start(SCRIPTS.exitOnTerm)]);
      assert.ok(a && b);
      const before = await runtime.status(b);
      await runtime.stop(a, 10);
      assert.equal((await exited(a)).exitCode, 0);
      const after = await runtime.status(b);
      assert.equal(after?.state, 'running');
      assert.equal(after?.startedAtNs, before?.startedAtNs);
      assert.equal((await runtime.exec(b, ['test', '-e', '/tmp/ready'], 5)).exitCode, 0);
      await runtime.stop(b, 5);
    });
  });
}
