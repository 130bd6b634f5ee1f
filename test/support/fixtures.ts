// A runtime under test plus a way to run busybox containers on it: containerd over CRI (pod
// sandbox with host network, containers created over CRI) or dockerd over the Engine API.
import { randomUUID } from 'node:crypto';
import Docker from 'dockerode';
import { CriClient, type PodSandboxConfig } from '../../agent/runtime/cri-client.ts';
import { CriRuntime } from '../../agent/runtime/cri.ts';
import { DockerRuntime } from '../../agent/runtime/docker.ts';
import type { RuntimeContainerID } from '../../api/container-id.ts';
import { runtimeContainerID } from '../../api/container-id.ts';
import type { ContainerRuntime } from '../../agent/runtime/types.ts';
import { startContainerd, type ContainerdBuild } from './containerd.ts';
import { startDockerd } from './dockerd.ts';
import { BUSYBOX_IMAGE } from './images.ts';

export interface RuntimeFixture {
  /** The runtime name Version() must report, which is also the container ID prefix. */
  runtimeName: string;
  runtime: ContainerRuntime;
  /** The daemon's socket, and the directory holding it (a stand-in for the host's /var/run). */
  socket: string;
  hostRunDir: string;
  /** Creates and starts a busybox container running `sh -c script`; resolves with its bare ID. */
  run(script: string): Promise<RuntimeContainerID>;
  /** Exit code as the daemon reports it, read without the code under test. */
  rawExitCode(id: string): Promise<number | undefined>;
  close(): Promise<void>;
}

async function closeAll(steps: (() => unknown)[]): Promise<void> {
  const errors: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, 'fixture cleanup failed');
}

/** build: which containerd (default Debian's 1.6). */
export async function containerdFixture(build?: ContainerdBuild): Promise<RuntimeFixture> {
  const containerd = await startContainerd({ build });
  const client = new CriClient(containerd.socket);
  let runtime: CriRuntime | undefined;
  try {
    const hostNetwork = { network: 'NODE' as const };
    const sandboxConfig: PodSandboxConfig = {
      metadata: { name: 'contract', uid: randomUUID(), namespace: 'default', attempt: 0 },
      linux: { cgroupParent: containerd.cgroupParent, securityContext: { namespaceOptions: hostNetwork } },
    };
    const { podSandboxId } = await client.call('RunPodSandbox', { config: sandboxConfig }, { timeoutMs: 60_000 });
    runtime = await CriRuntime.connect(containerd.socket);
    let n = 0;
    const cri = runtime;
    return {
      runtimeName: 'containerd',
      runtime: cri,
      socket: containerd.socket,
      hostRunDir: containerd.dir,
      async run(script) {
        const { containerId } = await client.call(
          'CreateContainer',
          {
            podSandboxId,
            sandboxConfig,
            config: {
              metadata: { name: `c${++n}`, attempt: 0 },
              image: { image: BUSYBOX_IMAGE },
              command: ['sh', '-c', script],
              // As kubelet runs Pod containers: the shell is PID 1 of its own PID namespace.
              linux: { securityContext: { namespaceOptions: { ...hostNetwork, pid: 'CONTAINER' } } },
            },
          },
          { timeoutMs: 60_000 },
        );
        await client.call('StartContainer', { containerId }, { timeoutMs: 60_000, containerId });
        return runtimeContainerID(containerId);
      },
      async rawExitCode(id) {
        const { status } = await client.call('ContainerStatus', { containerId: id }, { timeoutMs: 10_000 });
        return status?.state === 'CONTAINER_EXITED' ? status.exitCode : undefined;
      },
      close: () => closeAll([() => cri.close(), () => client.close(), () => containerd.stop()]),
    };
  } catch (error) {
    runtime?.close();
    client.close();
    await containerd.stop();
    throw error;
  }
}

export async function dockerFixture(): Promise<RuntimeFixture> {
  const dockerd = await startDockerd();
  try {
    const docker = new Docker({ socketPath: dockerd.socket });
    const runtime = await DockerRuntime.connect(dockerd.socket);
    return {
      runtimeName: 'docker',
      runtime,
      socket: dockerd.socket,
      hostRunDir: dockerd.dir,
      async run(script) {
        const container = await docker.createContainer({
          Image: BUSYBOX_IMAGE,
          Cmd: ['sh', '-c', script],
          HostConfig: { NetworkMode: 'none' },
        });
        await container.start();
        return runtimeContainerID(container.id);
      },
      async rawExitCode(id) {
        const info = await docker.getContainer(id).inspect();
        return info.State.Running ? undefined : info.State.ExitCode;
      },
      close: () => closeAll([() => runtime.close(), () => dockerd.stop()]),
    };
  } catch (error) {
    await dockerd.stop();
    throw error;
  }
}
