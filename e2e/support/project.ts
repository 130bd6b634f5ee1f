// Runs sidecar-terminator's own parts against the e2e cluster: the CRD and policy applied with
// kubectl, and the agent and controller as processes on this machine.
import { spawn, execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { clusterEnv } from './cluster.ts';
import { waitFor } from './wait.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

export function kubectl(...args: string[]): string {
  const env = clusterEnv();
  return execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Applies the CRD and the label policy, and waits until the API serves the CRD. */
export function installAPI(): void {
  kubectl('apply', '-f', join(ROOT, 'manifests/base/crd.yaml'), '-f', join(ROOT, 'manifests/base/crr-policy.yaml'));
  kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/containerrecreaterequests.sidecar-terminator.dev');
}

export interface Process {
  readonly name: string;
  readonly port: number;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash would, and wait for exit. */
  kill(): Promise<void>;
}

// Ports per test process, so two suites on one machine do not collide.
let nextPort = 20000 + (process.pid % 1000) * 8;

/** Starts `main.ts <role> ...args` with logs in the cluster's log dir, and waits for /readyz. */
export async function startProcess(role: 'agent' | 'controller', args: string[], label: string = role): Promise<Process> {
  const env = clusterEnv();
  const port = nextPort++;
  const logPath = join(env.logsDir, `${label}-${process.pid}-${port}.log`);
  const out = openSync(logPath, 'a');
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, 'main.ts'), role, '--kubeconfig', env.kubeconfig, '--metrics-port', String(port), ...args], {
    stdio: ['ignore', out, out],
    env: { ...process.env, LOG_LEVEL: 'debug' },
  });
  closeSync(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    await exited;
  };
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`${label} exited with ${child.exitCode}; see ${logPath}`);
    const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
    return res?.ok;
  }, { description: `${label} ready (log: ${logPath})`, timeoutMs: 60_000, intervalMs: 200 });
  return { name: label, port, stop: () => signal('SIGTERM'), kill: () => signal('SIGKILL') };
}

export function startAgent(label = 'agent'): Promise<Process> {
  const env = clusterEnv();
  return startProcess('agent', ['--node-name', env.nodeName, '--runtime-socket', env.containerdSocket, '--resync-seconds', '5'], label);
}

export function startController(label = 'controller', extraArgs: string[] = ['--leader-elect', 'false']): Promise<Process> {
  return startProcess('controller', ['--resync-seconds', '5', ...extraArgs], label);
}

/** The text of a /metrics scrape. */
export async function scrape(p: Process): Promise<string> {
  return (await fetch(`http://127.0.0.1:${p.port}/metrics`)).text();
}
