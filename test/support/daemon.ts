// Starting and stopping a private daemon process whose output goes to a log file in its dir.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import type { Scope } from './sweep.ts';
import { forceCleanup } from './sweep.ts';

export interface Daemon {
  child: ChildProcess;
  pid: number;
  logFile: string;
  exited: Promise<void>;
  isRunning(): boolean;
  logTail(lines?: number): string;
}

/** env: added to this process's environment. */
export function startDaemon(cmd: string, args: string[], logFile: string, env: Record<string, string> = {}): Daemon {
  const fd = openSync(logFile, 'a');
  const child = spawn(cmd, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...env } });
  closeSync(fd);
  let running = true;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      running = false;
      resolve();
    });
    child.once('error', () => {
      running = false;
      resolve();
    });
  });
  if (child.pid === undefined) throw new Error(`could not start ${cmd}`);
  return {
    child,
    pid: child.pid,
    logFile,
    exited,
    isRunning: () => running,
    logTail: (lines = 30) =>
      existsSync(logFile) ? readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n') : '',
  };
}

/** SIGTERM, then SIGKILL if still running after graceMs. */
export async function terminate(daemon: Daemon, graceMs: number): Promise<void> {
  if (!daemon.isRunning()) return;
  daemon.child.kill('SIGTERM');
  const timer = setTimeout(() => daemon.child.kill('SIGKILL'), graceMs);
  await daemon.exited;
  clearTimeout(timer);
}

/** Polls check() until it returns true; fails early when the daemon exits. */
export async function waitUntil(
  what: string,
  daemon: Daemon,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (!daemon.isRunning()) throw new Error(`${what}: the daemon exited; log:\n${daemon.logTail()}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > until) throw new Error(`${what}: not ready within ${timeoutMs} ms; log:\n${daemon.logTail()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The stop() of a test daemon: runs once however often it is called; drains what the daemon runs,
 * terminates it, and removes everything left in its scope, pass or fail.
 */
export function stopOnce(options: {
  daemon: () => Daemon | undefined;
  drain: () => Promise<void>;
  graceMs: number;
  scope: Scope;
  unguard: () => void;
}): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => {
    stopping ??= (async () => {
      try {
        const daemon = options.daemon();
        if (daemon?.isRunning()) {
          await options.drain().catch(() => {});
          await terminate(daemon, options.graceMs);
        }
        forceCleanup(options.scope);
      } finally {
        options.unguard();
      }
    })();
    return stopping;
  };
}
