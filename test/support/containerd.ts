// A private containerd (Debian's 1.6, or containerd 2 built from its Go module) in a temp dir,
// serving CRI on its own socket, with the test images imported. stop() leaves nothing behind.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { CriClient } from '../../agent/runtime/cri-client.ts';
import { startDaemon, stopOnce, waitUntil, type Daemon } from './daemon.ts';
import { REPO_ROOT, testImages } from './images.ts';
import { run } from './run.ts';
import { guard, type Scope } from './sweep.ts';

export interface Containerd {
  /** The CRI (and containerd API) socket path. */
  socket: string;
  dir: string;
  /** Use as the pod sandboxes' linux.cgroupParent, so stop() finds and removes their cgroups. */
  cgroupParent: string;
  pid: number;
  logTail(lines?: number): string;
  /** Removes all pod sandboxes, stops containerd, then kills, unmounts and removes whatever is left. */
  stop(): Promise<void>;
}

/** A containerd release to run: its binaries and its config template. */
export interface ContainerdBuild {
  title: string;
  /** Holds containerd, ctr and the runc shim (containerd finds the shim on its PATH). */
  binDir: string;
  /** Under e2e/runtime/. */
  template: string;
}

/** Debian's containerd 1.6 (package containerd), config version 2. */
export const DEBIAN_CONTAINERD: ContainerdBuild = { title: 'Debian\'s containerd 1.6', binDir: '/usr/bin', template: 'containerd.toml.tmpl' };

/** containerd 2 as e2e/cluster/build-containerd.sh builds and caches it, config version 3. */
export function containerd2(): ContainerdBuild {
  const pinned = /^CONTAINERD2_VERSION=(\S+)$/m.exec(readFileSync(join(REPO_ROOT, 'e2e/cluster/versions.env'), 'utf8'));
  if (!pinned) throw new Error('e2e/cluster/versions.env names no CONTAINERD2_VERSION');
  const version = pinned[1]!;
  const binDir = process.env.CONTAINERD2_BIN_DIR ?? join(homedir(), '.cache/sidecar-terminator', `containerd-${version}`, 'bin');
  if (!existsSync(join(binDir, 'containerd'))) {
    throw new Error(`containerd ${version} is not built in ${binDir}: run bash e2e/cluster/build-containerd.sh (scripts/setup.sh does)`);
  }
  return { title: `containerd ${version}`, binDir, template: 'containerd2.toml.tmpl' };
}

export interface ContainerdOptions {
  /** Import the busybox and pause images (default true). */
  images?: boolean;
  /** Default: Debian's containerd 1.6. */
  build?: ContainerdBuild;
}

/**
 * The build's config template (e2e/runtime/) for dir, plus a runc state root inside dir (runc's
 * default, /run/containerd/runc, would outlive the test).
 */
export function containerdConfig(dir: string, build: ContainerdBuild = DEBIAN_CONTAINERD): string {
  const template = readFileSync(join(REPO_ROOT, 'e2e/runtime', build.template), 'utf8');
  const anchor = /^(\s*)SystemdCgroup = false$/m;
  const m = anchor.exec(template);
  if (!m) throw new Error(`e2e/runtime/${build.template} changed: no "SystemdCgroup = false" line under the runc options`);
  return template.replace(anchor, `$&\n${m[1]}Root = "${dir}/runc"`).replaceAll('@DIR@', dir);
}

export async function startContainerd(options: ContainerdOptions = {}): Promise<Containerd> {
  const build = options.build ?? DEBIAN_CONTAINERD;
  const dir = mkdtempSync('/tmp/st-ctrd-');
  const scope: Scope = { dir, cgroupParent: `/${basename(dir)}` };
  const unguard = guard(scope);
  const socket = join(dir, 'containerd.sock');
  const config = join(dir, 'config.toml');
  writeFileSync(config, containerdConfig(dir, build));

  let daemon: Daemon | undefined;
  const stop = stopOnce({ daemon: () => daemon, drain: () => removeSandboxes(socket), graceMs: 10_000, scope, unguard });

  try {
    daemon = startDaemon(join(build.binDir, 'containerd'), ['--config', config], join(dir, 'containerd.log'), {
      PATH: `${build.binDir}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`,
    });
    const client = new CriClient(socket);
    try {
      await waitUntil('containerd', daemon, async () => {
        const v = await client.call('Version', {}, { timeoutMs: 2_000 });
        return v.runtimeName === 'containerd';
      }, 30_000);
    } finally {
      client.close();
    }
    if (options.images ?? true) {
      const images = await testImages();
      for (const archive of [images.pause, images.busybox]) {
        await run(join(build.binDir, 'ctr'), ['-a', socket, '-n', 'k8s.io', 'images', 'import', archive]);
      }
    }
    const d = daemon;
    return { socket, dir, cgroupParent: scope.cgroupParent, pid: d.pid, logTail: (n) => d.logTail(n), stop };
  } catch (error) {
    const log = daemon?.logTail() ?? '';
    await stop().catch(() => {});
    throw new Error(`starting ${build.title} in ${dir} failed: ${(error as Error).message}${log ? `\nlog:\n${log}` : ''}`, {
      cause: error,
    });
  }
}

/** Stops and removes every pod sandbox (and with them their containers) over CRI. */
async function removeSandboxes(socket: string): Promise<void> {
  const client = new CriClient(socket);
  try {
    const { items } = await client.call('ListPodSandbox', {}, { timeoutMs: 10_000 });
    await Promise.all(
      items.map(async (sandbox) => {
        await client.call('StopPodSandbox', { podSandboxId: sandbox.id }, { timeoutMs: 30_000 });
        await client.call('RemovePodSandbox', { podSandboxId: sandbox.id }, { timeoutMs: 30_000 });
      }),
    );
  } finally {
    client.close();
  }
}
