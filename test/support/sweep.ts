// Finds and removes everything a private container daemon left behind: its processes (daemon,
// containerd-shims, container processes), mounts under its directory, its cgroups and the
// directory itself. Synchronous, so it also runs from a process 'exit' handler.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';

export interface Scope {
  /** The daemon's private directory: every path it uses is under it. */
  dir: string;
  /** The cgroup parent (e.g. "/st-ctrd-abc123") its containers run under. */
  cgroupParent: string;
  /** Host directories the daemon creates outside dir: removed at cleanup when empty. */
  emptyDirs?: string[];
}

export interface ProcInfo {
  pid: number;
  ppid: number;
  state: string;
  cmdline: string;
  cgroups: string[];
}

export interface Leftovers {
  processes: ProcInfo[];
  mounts: string[];
  cgroups: string[];
  shimSockets: string[];
  dirExists: boolean;
}

function readProc(pid: number): ProcInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    const cgroups = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1));
    return { pid, ppid: Number(rest[1]), state: rest[0] ?? '?', cmdline, cgroups };
  } catch {
    return undefined; // gone meanwhile
  }
}

export function listProcesses(): ProcInfo[] {
  const procs: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const info = readProc(Number(name));
    if (info) procs.push(info);
  }
  return procs;
}

function inCgroup(info: ProcInfo, parent: string): boolean {
  return info.cgroups.some((path) => path === parent || path.startsWith(`${parent}/`));
}

/** Live (non-zombie) processes of the scope: naming its dir, in its cgroups, or descending from those. */
export function processesOf(scope: Scope): ProcInfo[] {
  const all = listProcesses().filter((p) => p.pid !== process.pid && p.state !== 'Z');
  const found = new Map<number, ProcInfo>();
  for (const p of all) {
    if (p.cmdline.includes(`${scope.dir}/`) || inCgroup(p, scope.cgroupParent)) found.set(p.pid, p);
  }
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of all) {
      if (!found.has(p.pid) && found.has(p.ppid)) {
        found.set(p.pid, p);
        grew = true;
      }
    }
  }
  return [...found.values()];
}

function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Mount points at or under dir, deepest first. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => unescapeMountPath(line.split(' ')[4] ?? ''))
    .filter((mp) => mp === dir || mp.startsWith(`${dir}/`))
    .sort((a, b) => b.split('/').length - a.split('/').length || b.length - a.length);
}

/** Existing cgroup directories of the parent, one per hierarchy (cgroup v1 and v2). */
export function cgroupDirs(parent: string): string[] {
  const root = '/sys/fs/cgroup';
  const candidates = [join(root, parent)];
  for (const name of readdirSync(root)) {
    const hierarchy = join(root, name);
    try {
      if (statSync(hierarchy).isDirectory()) candidates.push(join(hierarchy, parent));
    } catch {
      // not a hierarchy
    }
  }
  return [...new Set(candidates)].filter((path) => existsSync(join(path, 'cgroup.procs')));
}

/**
 * containerd 1.6 shims listen on /run/containerd/s/<sha256(address/namespace/id)>, outside any
 * private directory; a shim killed hard leaves its socket there.
 */
export function shimSocket(p: ProcInfo): string | undefined {
  if (!p.cmdline.includes('containerd-shim')) return undefined;
  const args = p.cmdline.split(' ');
  const arg = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const [address, ns, id] = [arg('-address'), arg('-namespace'), arg('-id')];
  if (!address || !ns || !id) return undefined;
  return `/run/containerd/s/${createHash('sha256').update(join(address, ns, id)).digest('hex')}`;
}

export function leftovers(scope: Scope, shimSockets: string[] = []): Leftovers {
  return {
    processes: processesOf(scope),
    mounts: mountsUnder(scope.dir),
    cgroups: cgroupDirs(scope.cgroupParent),
    shimSockets: shimSockets.filter((s) => existsSync(s)),
    dirExists: existsSync(scope.dir),
  };
}

export function describeLeftovers(l: Leftovers): string | undefined {
  const parts: string[] = [];
  if (l.processes.length) parts.push(`processes: ${l.processes.map((p) => `${p.pid} (${p.cmdline})`).join('; ')}`);
  if (l.mounts.length) parts.push(`mounts: ${l.mounts.join(', ')}`);
  if (l.cgroups.length) parts.push(`cgroups: ${l.cgroups.join(', ')}`);
  if (l.shimSockets.length) parts.push(`shim sockets: ${l.shimSockets.join(', ')}`);
  if (l.dirExists) parts.push('directory still exists');
  return parts.length ? parts.join(' | ') : undefined;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function alive(pid: number): boolean {
  const info = readProc(pid);
  return info !== undefined && info.state !== 'Z';
}

function removeCgroupTree(path: string): void {
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    if (entry.isDirectory()) removeCgroupTree(join(path, entry.name));
  }
  rmdirSync(path);
}

/**
 * Kills every process of the scope (SIGKILL), removes shim sockets, unmounts everything under its
 * dir, removes its cgroups and the dir. Throws, naming them, if anything is still there after.
 */
export function forceCleanup(scope: Scope): void {
  const sockets = new Set<string>();
  for (let round = 0; round < 5; round++) {
    const procs = processesOf(scope);
    if (procs.length === 0) break;
    for (const p of procs) {
      const socket = shimSocket(p);
      if (socket) sockets.add(socket);
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    const until = Date.now() + 5_000;
    while (procs.some((p) => alive(p.pid)) && Date.now() < until) sleepSync(20);
  }
  for (const socket of sockets) {
    try {
      unlinkSync(socket);
    } catch {
      // the shim removed it
    }
  }

  for (let round = 0; round < 3; round++) {
    const mounts = mountsUnder(scope.dir);
    if (mounts.length === 0) break;
    for (const mp of mounts) {
      try {
        execFileSync('umount', [mp], { stdio: 'pipe' });
      } catch {
        try {
          execFileSync('umount', ['-l', mp], { stdio: 'pipe' });
        } catch {
          // retried next round, reported below
        }
      }
    }
  }

  for (const path of cgroupDirs(scope.cgroupParent)) {
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        removeCgroupTree(path);
        break;
      } catch {
        sleepSync(100); // cgroups can stay busy for a moment after their last process dies
      }
    }
  }

  if (mountsUnder(scope.dir).length === 0) rmSync(scope.dir, { recursive: true, force: true });
  for (const path of scope.emptyDirs ?? []) {
    try {
      rmdirSync(path);
    } catch {
      // gone already, or not empty: in use by another daemon
    }
  }

  const problem = describeLeftovers(leftovers(scope, [...sockets]));
  if (problem) throw new Error(`cleanup of ${scope.dir} left: ${problem}`);
}

const endHooks = new Set<() => void>();
let handlersInstalled = false;

function runEndHooks(): void {
  for (const hook of [...endHooks]) {
    endHooks.delete(hook);
    try {
      hook();
    } catch (error) {
      console.error(`cleanup at process end: ${(error as Error).message}`);
    }
  }
}

/**
 * Runs a synchronous cleanup when the process exits or gets SIGINT/SIGTERM (re-raised after), in
 * case its owner never got to clean up. Returns the function that cancels it.
 */
export function atProcessEnd(hook: () => void): () => void {
  endHooks.add(hook);
  if (!handlersInstalled) {
    handlersInstalled = true;
    process.on('exit', runEndHooks);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        runEndHooks();
        process.kill(process.pid, signal);
      });
    }
  }
  return () => endHooks.delete(hook);
}

/** Force-cleans the scope at process end unless the returned function is called first (by stop()). */
export function guard(scope: Scope): () => void {
  return atProcessEnd(() => forceCleanup(scope));
}
