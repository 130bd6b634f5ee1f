// test group: serial — it starts private containerds (1.6 and 2).
// The runtime side of the agent's exit watch, against a real, private containerd (Debian's 1.6 and
// containerd 2): the exit stream, a Pod's containers by kubelet's labels, and a container's owner.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CriClient, type PodSandboxConfig } from '../agent/runtime/cri-client.ts';
import { CriRuntime } from '../agent/runtime/cri.ts';
import { KUBELET_LABELS } from '../agent/runtime/owner.ts';
import { containerd2, DEBIAN_CONTAINERD, startContainerd, type Containerd, type ContainerdBuild } from './support/containerd.ts';
import { BUSYBOX_IMAGE } from './support/images.ts';

const POD = { uid: randomUUID(), namespace: 'jobs', name: 'job-pod' };

const BUILDS: [string, () => ContainerdBuild][] = [
  ['Debian\'s containerd 1.6', () => DEBIAN_CONTAINERD],
  ['containerd 2 (e2e/cluster/versions.env)', containerd2],
];

for (const [title, build] of BUILDS) describe(`containerd exit watch: ${title}`, () => {
  let containerd: Containerd;
  let client: CriClient;
  let runtime: CriRuntime;
  let sandboxConfig: PodSandboxConfig;
  let podSandboxId: string;
  const exits: string[] = [];
  const exitCodes = new Map<string, number>();
  const exitedAt = new Map<string, number | undefined>();
  const streamErrors: string[] = [];

  before(async () => {
    containerd = await startContainerd({ build: build() });
    client = new CriClient(containerd.socket);
    sandboxConfig = {
      metadata: { name: POD.name, uid: POD.uid, namespace: POD.namespace, attempt: 0 },
      linux: { cgroupParent: containerd.cgroupParent, securityContext: { namespaceOptions: { network: 'NODE' } } },
    };
    ({ podSandboxId } = await client.call('RunPodSandbox', { config: sandboxConfig }, { timeoutMs: 60_000 }));
    runtime = await CriRuntime.connect(containerd.socket);
    assert.equal(runtime.watchExits({
      onExit: (id, code, at) => exits.push(id) && exitCodes.set(id, code) && exitedAt.set(id, at),
      onError: (e) => streamErrors.push(e.message),
    }), true);
  });
  after(async () => {
    runtime?.close();
    client?.close();
    await containerd?.stop();
  });

  /** Creates and starts a container as kubelet would, with its labels. */
  async function start(name: string, attempt: number, script: string): Promise<string> {
    const { containerId } = await client.call('CreateContainer', {
      podSandboxId,
      sandboxConfig,
      config: {
        metadata: { name, attempt },
        image: { image: BUSYBOX_IMAGE },
        command: ['sh', '-c', script],
        labels: {
          [KUBELET_LABELS.podUid]: POD.uid,
          [KUBELET_LABELS.podNamespace]: POD.namespace,
          [KUBELET_LABELS.podName]: POD.name,
          [KUBELET_LABELS.container]: name,
        },
        linux: { securityContext: { namespaceOptions: { network: 'NODE', pid: 'CONTAINER' } } },
      },
    }, { timeoutMs: 60_000 });
    await client.call('StartContainer', { containerId }, { timeoutMs: 60_000, containerId });
    return containerId;
  }

  const until = async (what: string, check: () => boolean | Promise<boolean>) => {
    const deadline = Date.now() + 20_000;
    while (!(await check())) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  it('reports a container\'s exit, and not an exec\'d process\'s', async () => {
    const sidecar = await start('proxy', 0, 'trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done');
    const execResult = await runtime.exec(sidecar, ['true'], 5);
    assert.equal(execResult.exitCode, 0);
    const main = await start('main', 0, 'exit 3');
    await until('the main\'s exit', () => exits.includes(main));
    assert.ok(!exits.includes(sidecar), 'the exec did not count as the sidecar exiting');
    assert.deepEqual(streamErrors, []);
    assert.equal(exitCodes.get(main), 3);
    // The runtime's own exit time: a moment ago, on this host's clock.
    const at = exitedAt.get(main);
    assert.ok(at !== undefined && at <= Date.now() && at > Date.now() - 20_000, `exitedAt ${at}`);

    assert.deepEqual((await runtime.status(main))?.owner, { podUid: POD.uid, podNamespace: POD.namespace, podName: POD.name, container: 'main' });
    await until('the CRI view of the exit', async () => (await runtime.status(main))?.state === 'exited');
    const status = await runtime.status(main);
    assert.deepEqual(status?.owner, { podUid: POD.uid, podNamespace: POD.namespace, podName: POD.name, container: 'main' });
    assert.equal(status?.exitCode, 3);
  });

  it('lists the Pod\'s containers, every attempt, with exit codes', async () => {
    const retried = await start('main', 1, 'exit 0');
    await until('the second attempt\'s exit', () => exits.includes(retried));
    // The CRI plugin updates its view from the same event stream: it may lag behind the event.
    await until('the CRI view of the exit', async () => (await runtime.status(retried))?.state === 'exited');
    const listed = (await runtime.podContainers(POD.uid)).map(({ name, attempt, state, exitCode }) => ({ name, attempt, state, exitCode }));
    listed.sort((a, b) => a.name.localeCompare(b.name) || a.attempt - b.attempt);
    assert.deepEqual(listed, [
      { name: 'main', attempt: 0, state: 'exited', exitCode: 3 },
      { name: 'main', attempt: 1, state: 'exited', exitCode: 0 },
      { name: 'proxy', attempt: 0, state: 'running', exitCode: undefined },
    ]);
    assert.deepEqual(await runtime.podContainers(randomUUID()), []);
  });

  it('a stopped sidecar is reported too; nothing after close()', async () => {
    const [proxy] = (await runtime.podContainers(POD.uid)).filter((c) => c.name === 'proxy');
    await runtime.stop(proxy!.id, 5);
    await until('the sidecar\'s exit', () => exits.includes(proxy!.id));
    runtime.close();
    const count = exits.length;
    const late = await start('late', 0, 'exit 0');
    await until('the late container to exit', async () => {
      const { status } = await client.call('ContainerStatus', { containerId: late }, { timeoutMs: 10_000 });
      return status?.state === 'CONTAINER_EXITED';
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(exits.length, count);
  });
});
