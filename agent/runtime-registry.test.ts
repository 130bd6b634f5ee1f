// The runtime registry's readiness and liveness (R46, docs/design.md): a runtime that stops answering
// is dropped and looked for again (not ready); none answering for 2 minutes, the agent asks to be
// restarted, since a restarted runtime's new socket shows only to a new container when the socket
// alone is mounted; a socket that refuses connections after it answered, at once.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../common/log.ts';
import { DiscoveredRuntimes } from './runtime/discover.ts';
import type { ContainerRuntime } from './runtime/types.ts';
import { fakeRuntime } from '../test/support/fake-runtime.ts';
import { RuntimeRegistry } from './runtime-registry.ts';

/** A runtime whose socket answers while `up.value` is true. */
function runtimeUpWhile(up: { value: boolean }): ContainerRuntime {
  return fakeRuntime({
    version: async () => {
      if (!up.value) throw new Error('connect ECONNREFUSED /host/var/run/containerd/containerd.sock');
      return { runtimeName: 'containerd', runtimeVersion: '2' };
    },
  });
}

describe('RuntimeRegistry: readiness and liveness (R46)', () => {
  it('a runtime that stops answering is dropped (not ready), and after 2 minutes without an answer the agent is not live', async () => {
    const up = { value: true };
    let nowMs = 1_000_000;
    let discoveries = 0;
    const registry = new RuntimeRegistry(async () => {
      discoveries++;
      // The stale socket file is still there, but nothing listens: connecting fails.
      if (!up.value) throw new Error('runtime socket answers neither CRI nor Docker');
      return new DiscoveredRuntimes([runtimeUpWhile(up)]);
    }, createLogger('test', 'error'), { now: () => nowMs });
    try {
      await registry.start();
      assert.equal(registry.notReadyReason(), undefined);
      assert.equal(registry.notLiveReason(), undefined);

      nowMs += 30_000;
      await registry.check();
      assert.equal(registry.notReadyReason(), undefined, 'answering: still ready');

      up.value = false; // the runtime restarted: its new socket is not the mounted one
      nowMs += 30_000;
      await registry.check();
      assert.equal(registry.notReadyReason(), undefined, 'one check without an answer (a slow runtime under load): kept');
      nowMs += 30_000;
      await registry.check();
      assert.match(registry.notReadyReason() ?? '', /container runtime: .*ECONNREFUSED|answers neither/);
      assert.ok(discoveries >= 2, 'looked for again');
      nowMs += 30_000;
      assert.equal(registry.notLiveReason(), undefined, '90 s without an answer: still live');
      nowMs += 31_000;
      assert.match(registry.notLiveReason() ?? '', /no container runtime has answered for 121 s/);
    } finally {
      registry.close();
    }
  });

  it('a runtime not there at start-up: live for 2 minutes, then not', async () => {
    let nowMs = 0;
    const registry = new RuntimeRegistry(async () => {
      throw new Error('no container runtime found');
    }, createLogger('test', 'error'), { now: () => nowMs });
    try {
      await registry.start();
      assert.match(registry.notReadyReason() ?? '', /no container runtime found/);
      nowMs = 119_000;
      assert.equal(registry.notLiveReason(), undefined);
      nowMs = 120_000;
      assert.match(registry.notLiveReason() ?? '', /no container runtime found/);
    } finally {
      registry.close();
    }
  });

  it('a runtime that answered, then refuses connections (restarted: its new socket is not the mounted one): the agent asks to be restarted at once, once', async () => {
    const up = { value: true };
    const restarts: string[] = [];
    const registry = new RuntimeRegistry(async () => {
      if (!up.value) throw new Error('connect ECONNREFUSED /host/var/run/containerd/containerd.sock');
      return new DiscoveredRuntimes([runtimeUpWhile(up)]);
    }, createLogger('test', 'error'), { onSocketGone: (reason) => restarts.push(reason) });
    try {
      await registry.start();
      await registry.check();
      assert.deepEqual(restarts, []);
      up.value = false;
      await Promise.all([registry.check(), registry.check()]);
      assert.equal(restarts.length, 1, 'asked once, on the first check that met a refused connection');
      assert.match(restarts[0]!, /ECONNREFUSED/);
      await registry.check();
      assert.equal(restarts.length, 1);
    } finally {
      registry.close();
    }
  });

  it('refused at start-up (the runtime not up yet): no restart asked, it is looked for again', async () => {
    const restarts: string[] = [];
    const registry = new RuntimeRegistry(async () => {
      throw new Error('connect ECONNREFUSED /host/var/run/containerd/containerd.sock');
    }, createLogger('test', 'error'), { onSocketGone: (reason) => restarts.push(reason) });
    try {
      await registry.start();
      assert.match(registry.notReadyReason() ?? '', /ECONNREFUSED/);
      assert.deepEqual(restarts, []);
    } finally {
      registry.close();
    }
  });

  it('a slow runtime (a timeout, not a refusal) is not a socket gone', async () => {
    let slow = false;
    const restarts: string[] = [];
    const runtime = fakeRuntime({ version: async () => {
      if (slow) throw new Error('CRI Version on /sock failed [DEADLINE_EXCEEDED]: no answer within 10000 ms');
      return { runtimeName: 'containerd', runtimeVersion: '2' };
    } });
    const registry = new RuntimeRegistry(async () => new DiscoveredRuntimes([runtime]), createLogger('test', 'error'), { onSocketGone: (r) => restarts.push(r) });
    try {
      await registry.start();
      slow = true;
      await registry.check();
      await registry.check();
      assert.deepEqual(restarts, []);
    } finally {
      registry.close();
    }
  });
});
