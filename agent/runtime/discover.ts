// Finds the node's container runtime(s) under the host's /var/run (rule R46, docs/design.md), or
// uses the socket named by a flag, and picks the runtime for a "<runtime>://<id>" container ID.
import { stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { CriRuntime, type CriRuntimeOptions } from './cri.ts';
import { DockerRuntime, type DockerRuntimeOptions } from './docker.ts';
import type { ParsedContainerID } from '../../api/container-id.ts';
import { parseContainerID } from '../../api/container-id.ts';
import type { ContainerRuntime } from './types.ts';

/** CRI sockets, relative to the host's /var/run, in the order they are tried. */
export const CRI_SOCKETS: readonly string[] = [
  'containerd/containerd.sock',
  'containerd.sock',
  // k3s and RKE2 run their own containerd.
  'k3s/containerd/containerd.sock',
  'crio/crio.sock',
  'crio.sock',
  'cri-dockerd.sock',
  'cri-dockerd/cri-dockerd.sock',
];
/** The Docker Engine API socket, used for docker:// containers when no CRI runtime serves them. */
export const DOCKER_SOCKET = 'docker.sock';

export interface DiscoverOptions {
  /** The host's /var/run as mounted into the agent. Default: /var/run. */
  hostRunDir?: string;
  /** A socket named explicitly (flag): used alone, nothing is searched. */
  socket?: string;
  cri?: CriRuntimeOptions;
  docker?: DockerRuntimeOptions;
}

export interface SkippedSocket {
  socket: string;
  reason: string;
}

function describe(runtime: ContainerRuntime): string {
  const socket = (runtime as { socket?: string }).socket;
  return socket ? `${runtime.idPrefix} (${socket})` : runtime.idPrefix;
}

/** A container ID's runtime on this node and its parts, or why there is none. */
export type ContainerRuntimeOf = { runtime: ContainerRuntime; container: ParsedContainerID } | { error: string };

/** The runtimes found on the node. */
export class DiscoveredRuntimes {
  readonly runtimes: readonly ContainerRuntime[];
  /** Sockets found but not used, and why. */
  readonly skipped: readonly SkippedSocket[];

  constructor(runtimes: ContainerRuntime[], skipped: SkippedSocket[] = []) {
    this.runtimes = runtimes;
    this.skipped = skipped;
  }

  /** The runtime serving a container ID's prefix, or undefined. */
  runtimeFor(prefix: string): ContainerRuntime | undefined {
    return this.runtimes.find((r) => r.idPrefix === prefix);
  }

  /** The runtime for "<runtime>://<id>" and the ID's parts, or why no runtime here serves it. */
  forContainer(containerID: string): ContainerRuntimeOf {
    const container = parseContainerID(containerID);
    if (!container) return { error: `malformed container ID ${JSON.stringify(containerID)}: expected "<runtime>://<id>"` };
    const runtime = this.runtimeFor(container.runtime);
    if (runtime) return { runtime, container };
    const serving = this.runtimes.map(describe).join(', ') || 'nothing';
    return { error: `no runtime for container ${containerID}: runtime "${container.runtime}" is not on this node (found: ${serving})` };
  }

  close(): void {
    for (const r of this.runtimes) r.close();
  }
}

async function isSocket(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isSocket();
  } catch {
    return false;
  }
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function connectExplicit(socket: string, options: DiscoverOptions): Promise<ContainerRuntime> {
  const path = socket.replace(/^unix:\/\//, '');
  if (!(await isSocket(path))) throw new Error(`runtime socket ${path} (from the flag) does not exist or is not a socket`);
  const tryCri = () => CriRuntime.connect(path, options.cri);
  const tryDocker = () => DockerRuntime.connect(path, options.docker);
  // docker.sock speaks the Engine API; anything else is most likely CRI. Try the other if it fails.
  const attempts = basename(path) === DOCKER_SOCKET ? [tryDocker, tryCri] : [tryCri, tryDocker];
  const errors: string[] = [];
  for (const attempt of attempts) {
    try {
      return await attempt();
    } catch (error) {
      errors.push(reason(error));
    }
  }
  throw new Error(`runtime socket ${path} (from the flag) answers neither CRI runtime.v1 nor the Docker Engine API: ${errors.join('; ')}`);
}

/**
 * The runtimes of this node. With `socket`, only that one. Otherwise the CRI sockets in
 * CRI_SOCKETS order (a socket answering for a runtime already found, e.g. a symlink, is skipped),
 * then docker.sock if no CRI runtime serves docker:// containers. Throws when none answers.
 */
export async function discoverRuntimes(options: DiscoverOptions = {}): Promise<DiscoveredRuntimes> {
  if (options.socket) return new DiscoveredRuntimes([await connectExplicit(options.socket, options)]);

  const dir = options.hostRunDir ?? '/var/run';
  const runtimes: ContainerRuntime[] = [];
  const skipped: SkippedSocket[] = [];
  for (const rel of CRI_SOCKETS) {
    const socket = join(dir, rel);
    if (!(await isSocket(socket))) continue;
    try {
      const runtime = await CriRuntime.connect(socket, options.cri);
      const same = runtimes.find((r) => r.idPrefix === runtime.idPrefix);
      if (same) {
        runtime.close();
        skipped.push({ socket, reason: `runtime "${runtime.idPrefix}" already served by ${describe(same)}` });
      } else {
        runtimes.push(runtime);
      }
    } catch (error) {
      skipped.push({ socket, reason: reason(error) });
    }
  }
  const dockerSocket = join(dir, DOCKER_SOCKET);
  if (await isSocket(dockerSocket)) {
    const cri = runtimes.find((r) => r.idPrefix === 'docker');
    if (cri) {
      skipped.push({ socket: dockerSocket, reason: `docker:// containers are served over CRI by ${describe(cri)}` });
    } else {
      try {
        runtimes.push(await DockerRuntime.connect(dockerSocket, options.docker));
      } catch (error) {
        skipped.push({ socket: dockerSocket, reason: reason(error) });
      }
    }
  }
  if (runtimes.length === 0) {
    const looked = [...CRI_SOCKETS, DOCKER_SOCKET].join(', ');
    const why = skipped.map((s) => `${s.socket}: ${s.reason}`).join('; ');
    throw new Error(`no container runtime found under ${dir} (looked for ${looked})${why ? `; ${why}` : ''}`);
  }
  return new DiscoveredRuntimes(runtimes, skipped);
}
