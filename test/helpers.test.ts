// test group: serial — it starts and kills private containerds and dockerds.
// The test helpers themselves: private containerd and dockerd start, serve, and leave nothing
// behind when stopped, even after the daemon was killed hard with containers running.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { CriClient, type PodSandboxConfig } from '../agent/runtime/cri-client.ts';
import { startContainerd, type Containerd } from './support/containerd.ts';
import { startDockerd, type Dockerd } from './support/dockerd.ts';
import { BUSYBOX_IMAGE, PAUSE_IMAGE, testImages } from './support/images.ts';
import { run } from './support/run.ts';
import { describeLeftovers, leftovers, processesOf, shimSocket, type ProcInfo, type Scope } from './support/sweep.ts';

const LOOP = 'trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done';

interface Footprint {
  processes: ProcInfo[];
  shimSockets: string[];
  mounts: number;
}

/** What a running daemon with one container has on the machine, checked to be really there. */
function footprint(scope: Scope, daemonPid: number): Footprint {
  const now = leftovers(scope);
  const processes = processesOf(scope);
  const shimSockets = processes.map(shimSocket).filter((s): s is string => s !== undefined);
  assert.ok(processes.some((p) => p.pid === daemonPid), 'daemon process found');
  assert.ok(shimSockets.length > 0 && shimSockets.every((s) => existsSync(s)), 'shim and its socket found');
  assert.ok(processes.some((p) => p.cmdline.includes('sleep 3600')), 'container process found');
  assert.ok(now.mounts.length > 0, 'container mounts found');
  assert.ok(now.cgroups.length > 0, 'container cgroups found');
  return { processes, shimSockets, mounts: now.mounts.length };
}

function assertNothingLeft(scope: Scope, before: Footprint): void {
  const left = describeLeftovers(leftovers(scope, before.shimSockets));
  assert.equal(left, undefined, left);
  for (const p of before.processes) {
    let cmdline: string | undefined;
    try {
      cmdline = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    } catch {
      cmdline = undefined; // gone
    }
    // A zombie has an empty cmdline; a reused PID runs something else.
    assert.ok(!cmdline || cmdline !== p.cmdline, `process ${p.pid} (${p.cmdline}) still there`);
  }
}

async function runCriContainer(containerd: Containerd): Promise<void> {
  const client = new CriClient(containerd.socket);
  try {
    const sandboxConfig: PodSandboxConfig = {
      metadata: { name: 'helper', uid: randomUUID(), namespace: 'default' },
      linux: { cgroupParent: containerd.cgroupParent, securityContext: { namespaceOptions: { network: 'NODE' } } },
    };
    const { podSandboxId } = await client.call('RunPodSandbox', { config: sandboxConfig }, { timeoutMs: 60_000 });
    const { containerId } = await client.call(
      'CreateContainer',
      { podSandboxId, sandboxConfig, config: { metadata: { name: 'loop' }, image: { image: BUSYBOX_IMAGE }, command: ['sh', '-c', LOOP] } },
      { timeoutMs: 60_000 },
    );
    await client.call('StartContainer', { containerId }, { timeoutMs: 60_000 });
    const { containers } = await client.call('ListContainers', {}, { timeoutMs: 10_000 });
    assert.deepEqual(
      containers.map((c) => [c.id, c.state]),
      [[containerId, 'CONTAINER_RUNNING']],
    );
  } finally {
    client.close();
  }
}

async function runDockerContainer(dockerd: Dockerd): Promise<void> {
  const docker = new Docker({ socketPath: dockerd.socket });
  const container = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sh', '-c', LOOP], HostConfig: { NetworkMode: 'none' } });
  await container.start();
  assert.equal((await container.inspect()).State.Status, 'running');
}

describe('test images', () => {
  it('are built once per process', async () => {
    const [a, b] = await Promise.all([testImages(), testImages()]);
    assert.equal(a, b);
    for (const file of [a.busybox, a.pause, a.rootfs]) assert.ok(statSync(file).size > 100_000, file);
  });
});

describe('startContainerd()', () => {
  it('serves CRI with both images and stop() leaves nothing behind', async (t: TestContext) => {
    const containerd = await startContainerd();
    t.after(() => containerd.stop());
    const scope = { dir: containerd.dir, cgroupParent: containerd.cgroupParent };

    const client = new CriClient(containerd.socket);
    const v = await client.call('Version', {}, { timeoutMs: 10_000 }).finally(() => client.close());
    assert.equal(v.runtimeName, 'containerd');
    assert.equal(v.runtimeApiVersion, 'v1');
    const { stdout } = await run('/usr/bin/ctr', ['-a', containerd.socket, '-n', 'k8s.io', 'images', 'ls', '-q']);
    assert.ok(stdout.includes(BUSYBOX_IMAGE) && stdout.includes(PAUSE_IMAGE), stdout);

    await runCriContainer(containerd);
    const before = footprint(scope, containerd.pid);
    t.diagnostic(`running: ${before.processes.length} processes, ${before.mounts} mounts`);
    await containerd.stop();
    assertNothingLeft(scope, before);
    await containerd.stop(); // idempotent
  });

  it('stop() cleans up after containerd was SIGKILLed with a container running', async (t: TestContext) => {
    const containerd = await startContainerd();
    t.after(() => containerd.stop());
    const scope = { dir: containerd.dir, cgroupParent: containerd.cgroupParent };
    await runCriContainer(containerd);
    const before = footprint(scope, containerd.pid);
    process.kill(containerd.pid, 'SIGKILL');
    await containerd.stop();
    assertNothingLeft(scope, before);
  });
});

/** What dockerd 20.10 creates outside its directories unless told otherwise. */
const DOCKER_HOST_PATHS = ['/etc/docker/key.json', '/run/docker'];

describe('startDockerd()', () => {

  it('serves the Engine API with the busybox image and stop() leaves nothing behind', async (t: TestContext) => {
    const existed = DOCKER_HOST_PATHS.map((p) => existsSync(p));
    const dockerd = await startDockerd();
    t.after(() => dockerd.stop());
    const scope = { dir: dockerd.dir, cgroupParent: dockerd.cgroupParent };

    const docker = new Docker({ socketPath: dockerd.socket });
    assert.equal((await docker.ping()).toString(), 'OK');
    const image = await docker.getImage(BUSYBOX_IMAGE).inspect();
    assert.deepEqual(image.Config.Cmd, ['sh']);

    await runDockerContainer(dockerd);
    const before = footprint(scope, dockerd.pid);
    t.diagnostic(`running: ${before.processes.length} processes, ${before.mounts} mounts`);
    await dockerd.stop();
    assertNothingLeft(scope, before);
    assert.deepEqual(DOCKER_HOST_PATHS.map((p) => existsSync(p)), existed, `${DOCKER_HOST_PATHS.join(', ')} as before`);
  });

  it('stop() cleans up after dockerd was SIGKILLed with a container running', async (t: TestContext) => {
    const dockerd = await startDockerd();
    t.after(() => dockerd.stop());
    const scope = { dir: dockerd.dir, cgroupParent: dockerd.cgroupParent };
    await runDockerContainer(dockerd);
    const before = footprint(scope, dockerd.pid);
    process.kill(dockerd.pid, 'SIGKILL');
    await dockerd.stop();
    assertNothingLeft(scope, before);
  });
});

describe('a test process that ends without stop()', () => {
  /** Runs test/support/abandon.ts; resolves with the scope it printed, once the process is gone. */
  async function abandon(kind: 'containerd' | 'dockerd', how: 'exit' | 'sigterm'): Promise<Scope & { images: string }> {
    const script = fileURLToPath(new URL('./support/abandon.ts', import.meta.url));
    const child = spawn(process.execPath, [script, kind, how], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (how === 'sigterm' && out.includes('\n')) child.kill('SIGTERM');
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (c, s) => resolve([c, s])),
    );
    assert.ok(out.includes('\n'), `child printed no scope (exit ${code ?? signal}): ${err}`);
    if (how === 'exit') assert.equal(code, 3, err);
    else assert.equal(signal, 'SIGTERM', err);
    const printed = JSON.parse(out) as Scope & { images: string };
    assert.equal(existsSync(printed.images), false, `test images dir ${printed.images} removed`);
    return printed;
  }

  it('containerd: process.exit() still cleans up', async () => {
    const scope = await abandon('containerd', 'exit');
    const left = describeLeftovers(leftovers(scope));
    assert.equal(left, undefined, left);
  });

  it('dockerd: SIGTERM still cleans up', async () => {
    const existed = DOCKER_HOST_PATHS.map((p) => existsSync(p));
    const scope = await abandon('dockerd', 'sigterm');
    const left = describeLeftovers(leftovers(scope));
    assert.equal(left, undefined, left);
    assert.deepEqual(DOCKER_HOST_PATHS.map((p) => existsSync(p)), existed, `${DOCKER_HOST_PATHS.join(', ')} as before`);
  });
});
