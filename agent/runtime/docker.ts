// ContainerRuntime over the Docker Engine API (dockerode), for docker:// containers on nodes
// without a CRI socket.
import { now } from '../../common/clock.ts';
import type { Duplex, Writable } from 'node:stream';
import type Docker from 'dockerode';
import { runtimeContainerID } from '../../api/container-id.ts';
import { assertContainerId, assertSignalName, assertTimeout, RuntimeCallError } from './errors.ts';
import { ownerFromLabels } from './owner.ts';
import { EXEC_OUTPUT_BYTES, type ContainerRuntime, type RuntimeContainerState, type ExecResult, type RuntimeContainer, type RuntimeVersion } from './types.ts';

export interface DockerRuntimeOptions {
  /** Deadline of quick calls (version, inspect, exec create/inspect). Default 10 s. */
  callTimeoutMs?: number;
  /** Added to the stop timeout for the stop request's deadline. Default 30 s. */
  stopMarginMs?: number;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * Docker's RFC 3339 timestamps with up to nanosecond precision ("2024-05-01T10:00:00.123456789Z")
 * to nanoseconds since the epoch. Go's zero time ("0001-01-01T00:00:00Z"), an empty string or
 * anything before the epoch is 0n ("unset").
 */
export function parseRfc3339Nano(value: string | undefined): bigint {
  if (!value) return 0n;
  const m = RFC3339.exec(value);
  if (!m) throw new RangeError(`not an RFC 3339 timestamp: ${JSON.stringify(value)}`);
  const [, y, mo, d, h, mi, s, frac = '', zone = 'Z'] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  let ns = BigInt(ms) * 1_000_000n + BigInt(frac.padEnd(9, '0'));
  if (zone.toUpperCase() !== 'Z') {
    const sign = zone.startsWith('-') ? -1n : 1n;
    const offsetMinutes = BigInt(Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)));
    ns -= sign * offsetMinutes * 60_000_000_000n;
  }
  return ns > 0n ? ns : 0n;
}

function dockerState(status: string | undefined): RuntimeContainerState {
  switch (status) {
    case 'created':
      return 'created';
    case 'running':
    case 'paused':
    case 'restarting':
      return 'running';
    case 'exited':
    case 'dead':
      return 'exited';
    default:
      return 'unknown';
  }
}

/** Reason as kubelet's Docker integration (cri-dockerd) gives it. */
function dockerReason(state: Docker.ContainerInspectInfo['State'], kind: RuntimeContainerState): string | undefined {
  if (kind !== 'exited') return undefined;
  if (state.OOMKilled) return 'OOMKilled';
  return state.ExitCode === 0 ? 'Completed' : 'Error';
}

export function fromDockerInspect(info: Docker.ContainerInspectInfo): RuntimeContainer {
  const state = dockerState(info.State?.Status);
  const container: RuntimeContainer = {
    id: runtimeContainerID(info.Id),
    state,
    startedAtNs: parseRfc3339Nano(info.State?.StartedAt),
    finishedAtNs: state === 'exited' ? parseRfc3339Nano(info.State?.FinishedAt) : 0n,
  };
  if (state === 'exited') container.exitCode = info.State.ExitCode;
  const reason = dockerReason(info.State, state);
  if (reason) container.reason = reason;
  // cri-dockerd puts kubelet's labels on the containers it creates; any other container has none.
  const owner = ownerFromLabels(info.Config?.Labels);
  if (owner) container.owner = owner;
  return container;
}

class ExecTimeoutError extends Error {}

interface DockerodeError extends Error {
  statusCode?: number;
  reason?: string;
  json?: { message?: string } | string | null;
}

function detailOf(error: unknown): string {
  const e = error as DockerodeError;
  if (e?.json && typeof e.json === 'object' && e.json.message) return e.json.message;
  if (typeof e?.json === 'string' && e.json) return e.json.trim();
  return e?.message ?? String(error);
}

export class DockerRuntime implements ContainerRuntime {
  readonly idPrefix = 'docker';
  readonly socket: string;
  readonly #docker: Docker;
  readonly #callTimeoutMs: number;
  readonly #stopMarginMs: number;

  private constructor(socket: string, docker: Docker, options: DockerRuntimeOptions) {
    this.socket = socket;
    this.#docker = docker;
    this.#callTimeoutMs = options.callTimeoutMs ?? 10_000;
    this.#stopMarginMs = options.stopMarginMs ?? 30_000;
  }

  /** Connects and checks that a Docker Engine answers on the socket. */
  static async connect(socket: string, options: DockerRuntimeOptions = {}): Promise<DockerRuntime> {
    // dockerode loads only on nodes that have a Docker socket: elsewhere its modules would only
    // take memory.
    const { default: Dockerode } = await import('dockerode');
    const path = socket.replace(/^unix:\/\//, '');
    const runtime = new DockerRuntime(path, new Dockerode({ socketPath: path }), options);
    await runtime.version();
    return runtime;
  }

  /** Runs one API call with a deadline, turning failures into RuntimeCallError. */
  async #call<T>(
    call: string,
    timeoutMs: number,
    containerId: string | undefined,
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      return await fn(signal);
    } catch (error) {
      const e = error as DockerodeError;
      const timedOut = signal.aborted || error instanceof ExecTimeoutError;
      throw new RuntimeCallError({
        protocol: 'Docker',
        socket: this.socket,
        call,
        containerId,
        code: e?.statusCode,
        notFound: e?.statusCode === 404,
        timedOut,
        detail: signal.aborted ? `no answer within ${timeoutMs} ms` : detailOf(error),
        cause: error,
      });
    }
  }

  async version(): Promise<RuntimeVersion> {
    // dockerode's version() takes options (abortSignal) although its type declarations omit them.
    const version = this.#docker.version as unknown as (options: { abortSignal: AbortSignal }) => Promise<Docker.DockerVersion>;
    const v = await this.#call('GET /version', this.#callTimeoutMs, undefined, (abortSignal) =>
      version.call(this.#docker, { abortSignal }),
    );
    return { runtimeName: 'docker', runtimeVersion: v.Version };
  }

  async status(id: string): Promise<RuntimeContainer | undefined> {
    assertContainerId(id);
    try {
      const info = await this.#call('GET /containers/{id}/json', this.#callTimeoutMs, id, (abortSignal) =>
        this.#docker.getContainer(id).inspect({ abortSignal }),
      );
      // Docker resolves ID prefixes and names: only the exact container is ours.
      return info.Id === id ? fromDockerInspect(info) : undefined;
    } catch (error) {
      if (error instanceof RuntimeCallError && error.notFound) return undefined;
      throw error;
    }
  }

  /** `signal`: the Pod spec's stopSignal; without one, the Engine's stop sends the container's own. */
  async stop(id: string, timeoutSeconds: number, signal?: string): Promise<void> {
    assertContainerId(id);
    assertTimeout(`Docker stop for container ${id} on ${this.socket}`, timeoutSeconds, 0);
    if (signal !== undefined) {
      assertSignalName(`Docker stop for container ${id} on ${this.socket}`, signal);
      return this.#stopWith(id, timeoutSeconds, signal);
    }
    try {
      await this.#call('POST /containers/{id}/stop', timeoutSeconds * 1000 + this.#stopMarginMs, id, (abortSignal) =>
        this.#docker.getContainer(id).stop({ t: timeoutSeconds, abortSignal }),
      );
    } catch (error) {
      // 304: already stopped. CRI's StopContainer is idempotent; be the same.
      if (error instanceof RuntimeCallError && error.code === 304) return;
      throw error;
    }
  }

  /**
   * `signal`, then SIGKILL once `timeoutSeconds` have passed, as the Engine's own stop does with the
   * container's configured signal; through kill and wait, which every Engine API version has (the
   * stop's own `signal` parameter is API 1.42+, and older Engines ignore it: the container would get
   * SIGTERM).
   */
  async #stopWith(id: string, timeoutSeconds: number, signal: string): Promise<void> {
    if (!(await this.#kill(id, signal))) return;
    if (await this.#exitedWithin(id, timeoutSeconds * 1000)) return;
    if (!(await this.#kill(id, 'SIGKILL'))) return;
    if (await this.#exitedWithin(id, this.#stopMarginMs)) return;
    throw new RuntimeCallError({
      protocol: 'Docker', socket: this.socket, call: 'POST /containers/{id}/wait', containerId: id, timedOut: true,
      detail: `still running ${this.#stopMarginMs} ms after SIGKILL`,
    });
  }

  /** false: the container was not running (409), as a stop of a stopped container is no error. */
  async #kill(id: string, signal: string): Promise<boolean> {
    try {
      await this.#call('POST /containers/{id}/kill', this.#callTimeoutMs, id, (abortSignal) =>
        this.#docker.getContainer(id).kill({ signal, abortSignal }),
      );
      return true;
    } catch (error) {
      if (error instanceof RuntimeCallError && error.code === 409) return false;
      throw error;
    }
  }

  async #exitedWithin(id: string, timeoutMs: number): Promise<boolean> {
    try {
      await this.#call('POST /containers/{id}/wait', timeoutMs, id, (abortSignal) =>
        this.#docker.getContainer(id).wait({ condition: 'not-running', abortSignal }),
      );
      return true;
    } catch (error) {
      if (error instanceof RuntimeCallError && error.timedOut) return false;
      throw error;
    }
  }

  async exec(id: string, command: string[], timeoutSeconds: number): Promise<ExecResult> {
    assertContainerId(id);
    assertTimeout(`Docker exec for container ${id} on ${this.socket}`, timeoutSeconds, 1);
    if (command.length === 0) throw new TypeError(`Docker exec for container ${id}: empty command`);
    const deadline = now() + timeoutSeconds * 1000;
    const container = this.#docker.getContainer(id);
    const exec = await this.#call('POST /containers/{id}/exec', this.#callTimeoutMs, id, (abortSignal) =>
      container.exec({ Cmd: command, AttachStdout: true, AttachStderr: true, AttachStdin: false, Tty: false, abortSignal }),
    );
    const output = await this.#call('POST /exec/{id}/start', timeoutSeconds * 1000 + this.#callTimeoutMs, id, async (abortSignal) => {
      const stream = (await exec.start({ hijack: true, stdin: false, abortSignal })) as Duplex;
      return this.#collect(stream, deadline, timeoutSeconds);
    });
    // The stream ends when the process exits; the exit code is set a moment later.
    for (;;) {
      const info = await this.#call('GET /exec/{id}/json', this.#callTimeoutMs, id, (abortSignal) =>
        exec.inspect({ abortSignal }),
      );
      if (!info.Running && info.ExitCode !== null && info.ExitCode !== undefined) {
        return { exitCode: info.ExitCode, ...output };
      }
      if (now() > deadline) {
        throw new RuntimeCallError({
          protocol: 'Docker',
          socket: this.socket,
          call: 'GET /exec/{id}/json',
          containerId: id,
          timedOut: true,
          detail: `exec ${JSON.stringify(command)} still running after ${timeoutSeconds} s`,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Demultiplexes an exec stream into stdout and stderr until it ends or the deadline passes. */
  #collect(stream: Duplex, deadline: number, timeoutSeconds: number): Promise<{ stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      // demuxStream only calls write(); collecting synchronously keeps every chunk before 'end'.
      // Past EXEC_OUTPUT_BYTES of both together the stream is still read to its end (the command
      // may go on writing), and dropped.
      let kept = 0;
      const sink = (chunks: Buffer[]) => ({
        write: (chunk: Buffer) => {
          const room = EXEC_OUTPUT_BYTES - kept;
          if (room <= 0) return true;
          const part = chunk.length > room ? Buffer.from(chunk.subarray(0, room)) : chunk;
          chunks.push(part);
          kept += part.length;
          return true;
        },
      }) as unknown as Writable;
      let done = false;
      const finish = (error?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        stream.destroy();
        if (error) {
          reject(error);
        } else {
          resolve({ stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
        }
      };
      const timer = setTimeout(
        () => {
          // The Engine API cannot kill an exec'd process: it may keep running in the container.
          finish(new ExecTimeoutError(`timed out after ${timeoutSeconds} s (the process may still run in the container)`));
        },
        Math.max(0, deadline - now()),
      );
      this.#docker.modem.demuxStream(stream, sink(out), sink(err));
      stream.on('end', () => finish());
      stream.on('close', () => finish());
      stream.on('error', (error) => finish(error));
    });
  }

  close(): void {
    // dockerode keeps no connection open between calls.
  }
}
