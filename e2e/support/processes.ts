// The local cluster's own processes (etcd, containerd, kube-apiserver, ...), as e2e/cluster/up.sh
// started them: each with a pid file under the cluster's run directory and a log of its own.
import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { clusterEnv } from './cluster.ts';
import { waitFor } from './wait.ts';

function isRunning(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Restarts the process `name` (its pid file's name: `containerd`, `kube-apiserver`) with the same
 * command line and environment, as the cluster's scripts stop one: SIGTERM, then SIGKILL after
 * `stopTimeoutMs`; resolves once `ready` says it serves again. Returns when it was started again.
 */
export async function restartClusterProcess(name: string, o: { stopTimeoutMs: number; ready: () => Promise<boolean>; readyTimeoutMs: number }): Promise<{ startedAtMs: number }> {
  const { clusterDir, logsDir } = clusterEnv();
  const pidFile = join(clusterDir, 'run', `${name}.pid`);
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const env = Object.fromEntries(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((kv) => {
    const eq = kv.indexOf('=');
    return [kv.slice(0, eq), kv.slice(eq + 1)];
  }));
  process.kill(pid, 'SIGTERM');
  try {
    await waitFor(() => !isRunning(pid), { description: `${name} stopped`, timeoutMs: o.stopTimeoutMs, intervalMs: 100 });
  } catch {
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !isRunning(pid), { description: `${name} killed`, timeoutMs: 10_000, intervalMs: 100 });
  }
  const log = openSync(join(logsDir, `${name}.log`), 'a');
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, env, stdio: ['ignore', log, log] });
  child.unref();
  const startedAtMs = Date.now();
  writeFileSync(pidFile, `${child.pid}\n`);
  await waitFor(async () => {
    try {
      return await o.ready();
    } catch {
      return false;
    }
  }, { description: `${name} serving again`, timeoutMs: o.readyTimeoutMs, intervalMs: 200 });
  return { startedAtMs };
}
