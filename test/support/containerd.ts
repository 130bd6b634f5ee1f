// A private containerd (Debian's 1.6) in a temp dir, serving CRI on its own socket, with the test
// images imported. stop() leaves nothing behind.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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

export interface ContainerdOptions {
  /** Import the busybox and pause images (default true). */
  images?: boolean;
}

/**
 * e2e/runtime/containerd.toml.tmpl for dir, plus a runc state root inside dir (runc's default,
 * /run/containerd/runc, would outlive the test).
 */
export function containerdConfig(dir: string): string {
  const template = readFileSync(join(REPO_ROOT, 'e2e/runtime/containerd.toml.tmpl'), 'utf8');
  const anchor = /^(\s*)SystemdCgroup = false$/m;
  const m = anchor.exec(template);
  if (!m) throw new Error('e2e/runtime/containerd.toml.tmpl changed: no "SystemdCgroup = false" line under the runc options');
  return template.replace(anchor, `$&\n${m[1]}Root = "${dir}/runc"`).replaceAll('@DIR@', dir);
}

export async function startContainerd(options: ContainerdOptions = {}): Promise<Containerd> {
  const dir = mkdtempSync('/tmp/st-ctrd-');
  const scope: Scope = { dir, cgroupParent: `/${basename(dir)}` };
  const unguard = guard(scope);
  const socket = join(dir, 'containerd.sock');
  const config = join(dir, 'config.toml');
  writeFileSync(config, containerdConfig(dir));

  let daemon: Daemon | undefined;
  const stop = stopOnce({ daemon: () => daemon, drain: () => removeSandboxes(socket), graceMs: 10_000, scope, unguard });

  try {
    daemon = startDaemon('/usr/bin/containerd', ['--config', config], join(dir, 'containerd.log'));
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
        await run('/usr/bin/ctr', ['-a', socket, '-n', 'k8s.io', 'images', 'import', archive]);
      }
    }
    const d = daemon;
    return { socket, dir, cgroupParent: scope.cgroupParent, pid: d.pid, logTail: (n) => d.logTail(n), stop };
  } catch (error) {
    const log = daemon?.logTail() ?? '';
    await stop().catch(() => {});
    throw new Error(`starting containerd in ${dir} failed: ${(error as Error).message}${log ? `\nlog:\n${log}` : ''}`, {
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
