// Child process for test/helpers.test.ts: starts a daemon with a running container, prints its
// scope as one JSON line, then ends without calling stop(): by process.exit() or, with "sigterm",
// by waiting for the parent's SIGTERM. The helpers' exit/signal guard must clean up.
// Usage: node test/support/abandon.ts containerd|dockerd exit|sigterm
import Docker from 'dockerode';
import { CriClient, type PodSandboxConfig } from '../../agent/runtime/cri-client.ts';
import { startContainerd } from './containerd.ts';
import { startDockerd } from './dockerd.ts';
import { BUSYBOX_IMAGE, testImages } from './images.ts';

const [kind, how] = process.argv.slice(2);
const LOOP = ['sh', '-c', 'while :; do sleep 3600; done'];

const daemon = kind === 'dockerd' ? await startDockerd() : await startContainerd();
if (kind === 'dockerd') {
  const docker = new Docker({ socketPath: daemon.socket });
  const container = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: LOOP, HostConfig: { NetworkMode: 'none' } });
  await container.start();
} else {
  const client = new CriClient(daemon.socket);
  const sandboxConfig: PodSandboxConfig = {
    metadata: { name: 'abandoned', uid: 'abandoned', namespace: 'default' },
    linux: { cgroupParent: daemon.cgroupParent, securityContext: { namespaceOptions: { network: 'NODE' } } },
  };
  const { podSandboxId } = await client.call('RunPodSandbox', { config: sandboxConfig }, { timeoutMs: 60_000 });
  const { containerId } = await client.call(
    'CreateContainer',
    { podSandboxId, sandboxConfig, config: { metadata: { name: 'c' }, image: { image: BUSYBOX_IMAGE }, command: LOOP } },
    { timeoutMs: 60_000 },
  );
  await client.call('StartContainer', { containerId }, { timeoutMs: 60_000 });
  client.close();
}
const images = (await testImages()).dir;
process.stdout.write(`${JSON.stringify({ dir: daemon.dir, cgroupParent: daemon.cgroupParent, images })}\n`);
if (how === 'sigterm') {
  setInterval(() => {}, 1_000);
} else {
  process.exit(3);
}
