// A private Docker Engine (Debian's docker.io 20.10, with its own containerd) in a temp dir, with
// the busybox image imported. stop() leaves nothing behind.
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import Docker from 'dockerode';
import { startDaemon, stopOnce, waitUntil, type Daemon } from './daemon.ts';
import { BUSYBOX_IMAGE, testImages } from './images.ts';
import { run } from './run.ts';
import { guard, type Scope } from './sweep.ts';

export interface Dockerd {
  /** The Engine API socket path. */
  socket: string;
  dir: string;
  /** The --cgroup-parent of its containers. */
  cgroupParent: string;
  pid: number;
  logTail(lines?: number): string;
  /** Removes all containers, stops dockerd, then kills, unmounts and removes whatever is left. */
  stop(): Promise<void>;
}

export interface DockerdOptions {
  /** Import the busybox image (default true). */
  images?: boolean;
}

const DOCKERD = ['/usr/sbin/dockerd', '/usr/bin/dockerd'].find((p) => existsSync(p)) ?? 'dockerd';
/** Debian's 20.10 client; /usr/local/bin/docker is a newer client only. */
const DOCKER_CLI = '/usr/bin/docker';

export async function startDockerd(options: DockerdOptions = {}): Promise<Dockerd> {
  const dir = mkdtempSync('/tmp/st-dockerd-');
  // dockerd creates /run/docker/plugins whatever its --exec-root: remove it after if it was not there.
  const emptyDirs = ['/run/docker/plugins', '/run/docker'].filter((path) => !existsSync(path));
  const scope: Scope = { dir, cgroupParent: `/${basename(dir)}`, emptyDirs };
  const unguard = guard(scope);
  const socket = join(dir, 'docker.sock');
  const configFile = join(dir, 'daemon.json');
  // Without it, dockerd 20.10 writes its trust key to /etc/docker/key.json.
  writeFileSync(configFile, `${JSON.stringify({ 'deprecated-key-path': join(dir, 'key.json') })}\n`);
  mkdirSync(join(dir, 'cli'));

  let daemon: Daemon | undefined;
  const stop = stopOnce({ daemon: () => daemon, drain: () => removeContainers(socket), graceMs: 20_000, scope, unguard });

  try {
    daemon = startDaemon(
      DOCKERD,
      [
        '--data-root', join(dir, 'data'),
        '--exec-root', join(dir, 'exec'),
        '--pidfile', join(dir, 'docker.pid'),
        '-H', `unix://${socket}`,
        '--config-file', configFile,
        '--cgroup-parent', scope.cgroupParent,
        '--storage-driver', 'overlay2',
        '--bridge=none',
        '--iptables=false',
        '--ip6tables=false',
        '--ip-masq=false',
      ],
      join(dir, 'dockerd.log'),
    );
    const docker = new Docker({ socketPath: socket });
    await waitUntil('dockerd', daemon, async () => (await docker.ping()).toString() === 'OK', 60_000);
    if (options.images ?? true) {
      const images = await testImages();
      await run(
        DOCKER_CLI,
        ['-H', `unix://${socket}`, 'import', '--change', 'CMD ["sh"]', images.rootfs, BUSYBOX_IMAGE],
        { env: { ...process.env, DOCKER_CONFIG: join(dir, 'cli') } },
      );
    }
    const d = daemon;
    return { socket, dir, cgroupParent: scope.cgroupParent, pid: d.pid, logTail: (n) => d.logTail(n), stop };
  } catch (error) {
    const log = daemon?.logTail() ?? '';
    await stop().catch(() => {});
    throw new Error(`starting dockerd in ${dir} failed: ${(error as Error).message}${log ? `\nlog:\n${log}` : ''}`, {
      cause: error,
    });
  }
}

/** Force-removes every container (and its anonymous volumes). */
async function removeContainers(socket: string): Promise<void> {
  const docker = new Docker({ socketPath: socket });
  const containers = await docker.listContainers({ all: true });
  await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })));
}
