// Runs a container's preStop hook as kubelet would: exec in the container, an HTTP GET against the
// Pod (or the hook's host), or a sleep; the whole hook within the grace period, whatever it does
// meanwhile (a server dripping header lines forever holds nothing). Which hooks are run at all is
// decided before (agent/request-plan.ts `hookRefusal`). A failing hook is reported, and the stop goes on.
import http from 'node:http';
import https from 'node:https';
import type { RuntimeContainerID } from '../api/container-id.ts';
import type { ContainerPort, Handler } from '../api/pod.ts';
import { EXEC_OUTPUT_BYTES, type ContainerRuntime } from './runtime/types.ts';

export interface HookTarget {
  runtime: ContainerRuntime;
  containerID: RuntimeContainerID;
  podIP?: string;
  ports?: ContainerPort[];
}

/** The hook's bound when the grace period is 0. */
const ZERO_GRACE_HOOK_TIMEOUT_MS = 1000;

/**
 * Runs the hook with `requestedTimeoutMs` (the grace period; a second when 0) as its total deadline;
 * resolves to an error message when it failed or was cut off, else undefined.
 */
export async function runPreStop(hook: Handler, target: HookTarget, requestedTimeoutMs: number): Promise<string | undefined> {
  // A timeout of 0 means "none" to Node's timers and sockets: a grace period of 0 still bounds the hook.
  const timeoutMs = requestedTimeoutMs > 0 ? requestedTimeoutMs : ZERO_GRACE_HOOK_TIMEOUT_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  const cutOff = new Promise<string>((resolve) => {
    deadline.signal.addEventListener('abort', () => resolve(`${describe(hook)} did not finish within ${timeoutMs}ms (the grace period)`), { once: true });
  });
  try {
    return await Promise.race([run(hook, target, timeoutMs, deadline.signal), cutOff]);
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    clearTimeout(timer);
    deadline.abort();
  }
}

function run(hook: Handler, target: HookTarget, timeoutMs: number, signal: AbortSignal): Promise<string | undefined> {
  if (hook.exec?.command?.length) return runExec(hook.exec.command, target, timeoutMs);
  if (hook.httpGet) return runHttpGet(hook.httpGet, target, signal);
  if (hook.sleep) return sleep(hook.sleep.seconds * 1000, signal);
  // agent/request-plan.ts hands over no other kind.
  return Promise.resolve(`${describe(hook)} is not run by the agent`);
}

function describe(hook: Handler): string {
  if (hook.exec) return `exec ${JSON.stringify(hook.exec.command ?? [])}`;
  if (hook.httpGet) return `HTTP GET port ${JSON.stringify(hook.httpGet.port)} path ${JSON.stringify(hook.httpGet.path ?? '/')}`;
  if (hook.sleep) return `sleep ${hook.sleep.seconds}s`;
  return `hook ${JSON.stringify(Object.keys(hook))}`;
}

async function runExec(command: string[], target: HookTarget, timeoutMs: number): Promise<string | undefined> {
  const result = await target.runtime.exec(target.containerID, command, Math.max(1, Math.ceil(timeoutMs / 1000)));
  if (result.exitCode === 0) return undefined;
  if (result.exitCode === undefined) {
    return `exec ${JSON.stringify(command)} ran to its end, but wrote more than ${EXEC_OUTPUT_BYTES} bytes of output, which the agent does not read: its exit code is unknown`;
  }
  const output = (result.stderr || result.stdout).trim().slice(0, 512);
  return `exec ${JSON.stringify(command)} exited with code ${result.exitCode}${output ? `: ${output}` : ''}`;
}

/** As kubelet's sleep action: a negative or zero duration returns at once. */
function sleep(ms: number, signal: AbortSignal): Promise<undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, Math.max(0, ms));
    signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  });
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

function runHttpGet(get: NonNullable<Handler['httpGet']>, target: HookTarget, signal: AbortSignal): Promise<string | undefined> {
  const port = resolvePort(get.port, target.ports);
  const host = hostOf(get.host, target);
  const client = get.scheme === 'HTTPS' ? https : http;
  const headers: Record<string, string> = { 'User-Agent': 'sidecar-terminator' };
  for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
  const path = get.path ? (get.path.startsWith('/') ? get.path : `/${get.path}`) : '/';
  return new Promise((resolve, reject) => {
    // Like kubelet, HTTPS hooks do not verify the certificate. The deadline's signal destroys the
    // socket, however the server drips its answer.
    const req = client.get({ host, port, path, headers, signal, rejectUnauthorized: false }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      resolve(code >= 200 && code < 400 ? undefined : `HTTP GET ${host}:${port}${path} returned ${code}`);
    });
    req.on('error', reject);
  });
}
