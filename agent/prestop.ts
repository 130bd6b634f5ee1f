// Runs a container's preStop hook as kubelet would: exec in the container, an HTTP GET against the
// Pod (or the hook's host), or a TCP connect. A failing hook is reported, and the stop goes on.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { ContainerPort, Handler } from '../api/pod.ts';
import type { ContainerRuntime } from './runtime/types.ts';

export interface HookTarget {
  runtime: ContainerRuntime;
  /** Bare container ID. */
  containerID: string;
  podIP?: string;
  ports?: ContainerPort[];
}

/** The hook's bound when the grace period is 0. */
const ZERO_GRACE_HOOK_TIMEOUT_MS = 1000;

/** Runs the hook within `requestedTimeoutMs` (a second when 0); resolves to an error message when it failed, else undefined. */
export async function runPreStop(hook: Handler, target: HookTarget, requestedTimeoutMs: number): Promise<string | undefined> {
  // A timeout of 0 means "none" to Node's sockets: a grace period of 0 still bounds the hook.
  const timeoutMs = requestedTimeoutMs > 0 ? requestedTimeoutMs : ZERO_GRACE_HOOK_TIMEOUT_MS;
  try {
    if (hook.exec?.command?.length) return await runExec(hook.exec.command, target, timeoutMs);
    if (hook.httpGet) return await runHttpGet(hook.httpGet, target, timeoutMs);
    if (hook.tcpSocket) return await runTcp(hook.tcpSocket, target, timeoutMs);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

async function runExec(command: string[], target: HookTarget, timeoutMs: number): Promise<string | undefined> {
  const result = await target.runtime.exec(target.containerID, command, Math.max(1, Math.ceil(timeoutMs / 1000)));
  if (result.exitCode === 0) return undefined;
  const output = (result.stderr || result.stdout).trim().slice(0, 512);
  return `exec ${JSON.stringify(command)} exited with code ${result.exitCode}${output ? `: ${output}` : ''}`;
}

/** A named port resolves through the container's ports, as kubelet does. */
export function resolvePort(port: number | string, ports: ContainerPort[] | undefined): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const found = ports?.find((p) => p.name === port);
  if (!found) throw new Error(`named port ${JSON.stringify(port)} not found among the container's ports`);
  return found.containerPort;
}

function hostOf(host: string | undefined, target: HookTarget): string {
  const resolved = host || target.podIP;
  if (!resolved) throw new Error('the Pod has no IP yet and the hook names no host');
  return resolved;
}

function runHttpGet(get: NonNullable<Handler['httpGet']>, target: HookTarget, timeoutMs: number): Promise<string | undefined> {
  const port = resolvePort(get.port, target.ports);
  const host = hostOf(get.host, target);
  const client = get.scheme === 'HTTPS' ? https : http;
  const headers: Record<string, string> = { 'User-Agent': 'sidecar-terminator' };
  for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
  const path = get.path ? (get.path.startsWith('/') ? get.path : `/${get.path}`) : '/';
  return new Promise((resolve, reject) => {
    // Like kubelet, HTTPS hooks do not verify the certificate.
    const req = client.get({ host, port, path, headers, timeout: timeoutMs, rejectUnauthorized: false }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      resolve(code >= 200 && code < 400 ? undefined : `HTTP GET ${host}:${port}${path} returned ${code}`);
    });
    req.on('timeout', () => req.destroy(new Error(`HTTP GET ${host}:${port}${path} timed out after ${timeoutMs}ms`)));
    req.on('error', reject);
  });
}

function runTcp(tcp: NonNullable<Handler['tcpSocket']>, target: HookTarget, timeoutMs: number): Promise<string | undefined> {
  const port = resolvePort(tcp.port, target.ports);
  const host = hostOf(tcp.host, target);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: timeoutMs }, () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.on('timeout', () => {
      socket.destroy();
      resolve(`TCP connect ${host}:${port} timed out after ${timeoutMs}ms`);
    });
    socket.on('error', (err) => resolve(`TCP connect ${host}:${port}: ${err.message}`));
  });
}
