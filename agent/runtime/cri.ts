// ContainerRuntime over a CRI runtime.v1 socket (containerd, CRI-O, cri-dockerd).
import { runtimeContainerID } from '../../api/container-id.ts';
import { CriClient, socketPath, type ContainerStatus, type CriContainerState } from './cri-client.ts';
import { ContainerdExitStream } from './containerd-exits.ts';
import { assertContainerId, assertTimeout, RuntimeCallError } from './errors.ts';
import { KUBELET_LABELS, ownerFromLabels } from './owner.ts';
import type {
  ContainerRuntime,
  RuntimeContainerState,
  ExecResult,
  ExitWatchCallbacks,
  PodContainer,
  RuntimeContainer,
  RuntimeVersion,
} from './types.ts';

export interface CriRuntimeOptions {
  /** Deadline of quick calls (Version, ContainerStatus). Default 10 s. */
  callTimeoutMs?: number;
  /** Added to the stop timeout for the StopContainer deadline: SIGKILL and reaping take time too. Default 30 s. */
  stopMarginMs?: number;
  /** Added to the exec timeout for the ExecSync deadline, so the runtime's own timeout fires first. Default 10 s. */
  execMarginMs?: number;
}

const STATES: Record<CriContainerState, RuntimeContainerState> = {
  CONTAINER_CREATED: 'created',
  CONTAINER_RUNNING: 'running',
  CONTAINER_EXITED: 'exited',
  CONTAINER_UNKNOWN: 'unknown',
};

/** CRI nanosecond timestamps (int64 as decimal strings) to bigint; 0n when unset. */
function nanos(value: string | number | undefined): bigint {
  if (value === undefined || value === '') return 0n;
  return BigInt(value);
}


export function fromCriStatus(status: ContainerStatus): RuntimeContainer {
  const state = STATES[status.state] ?? 'unknown';
  const container: RuntimeContainer = {
    id: runtimeContainerID(status.id),
    state,
    startedAtNs: nanos(status.startedAt),
    finishedAtNs: nanos(status.finishedAt),
  };
  if (state === 'exited') container.exitCode = status.exitCode;
  if (status.reason) container.reason = status.reason;
  const owner = ownerFromLabels(status.labels);
  if (owner) container.owner = owner;
  return container;
}

export class CriRuntime implements ContainerRuntime {
  readonly idPrefix: string;
  readonly socket: string;
  readonly #client: CriClient;
  readonly #callTimeoutMs: number;
  readonly #stopMarginMs: number;
  readonly #execMarginMs: number;
  #exits: ContainerdExitStream | undefined;

  private constructor(client: CriClient, idPrefix: string, options: CriRuntimeOptions) {
    this.#client = client;
    this.socket = client.socket;
    this.idPrefix = idPrefix;
    this.#callTimeoutMs = options.callTimeoutMs ?? 10_000;
    this.#stopMarginMs = options.stopMarginMs ?? 30_000;
    this.#execMarginMs = options.execMarginMs ?? 10_000;
  }

  /** Connects and asks Version(); the runtime name becomes the container ID prefix. */
  static async connect(socket: string, options: CriRuntimeOptions = {}): Promise<CriRuntime> {
    const client = new CriClient(socketPath(socket));
    try {
      const v = await client.call('Version', { version: 'v1' }, { timeoutMs: options.callTimeoutMs ?? 10_000 });
      if (!v.runtimeName) {
        throw new RuntimeCallError({
          protocol: 'CRI',
          socket: client.socket,
          call: 'Version',
          detail: 'the runtime answered without a runtimeName',
        });
      }
      return new CriRuntime(client, v.runtimeName, options);
    } catch (error) {
      client.close();
      throw error;
    }
  }

  async version(): Promise<RuntimeVersion> {
    const v = await this.#client.call('Version', { version: 'v1' }, { timeoutMs: this.#callTimeoutMs });
    return { runtimeName: v.runtimeName, runtimeVersion: v.runtimeVersion };
  }

  async status(id: string): Promise<RuntimeContainer | undefined> {
    assertContainerId(id);
    try {
      const response = await this.#client.call(
        'ContainerStatus',
        { containerId: id, verbose: false },
        { timeoutMs: this.#callTimeoutMs, containerId: id },
      );
      // A runtime that resolves ID prefixes could answer for another container: not ours.
      if (!response.status || response.status.id !== id) return undefined;
      return fromCriStatus(response.status);
    } catch (error) {
      if (error instanceof RuntimeCallError && error.notFound) return undefined;
      throw error;
    }
  }

  /**
   * StopContainer, then the container's status: containerd 2 answers the stop of an ID it does not
   * know with success (1.6 with NotFound), so only the status proves there was a container to stop.
   * StopContainer has no signal: kubelet put the Pod spec's stopSignal into the container's config
   * at creation (ContainerConfig.stop_signal), and the runtime stops with it (containerd 2.4 does; 1.6 takes the image's);
   * `_signal` is therefore not sent.
   */
  async stop(id: string, timeoutSeconds: number, _signal?: string): Promise<void> {
    assertContainerId(id);
    assertTimeout(`CRI StopContainer for container ${id} on ${this.socket}`, timeoutSeconds, 0);
    await this.#client.call(
      'StopContainer',
      { containerId: id, timeout: timeoutSeconds },
      { timeoutMs: timeoutSeconds * 1000 + this.#stopMarginMs, containerId: id },
    );
    if (!(await this.status(id))) {
      throw new RuntimeCallError({
        protocol: 'CRI',
        socket: this.socket,
        call: 'StopContainer',
        containerId: id,
        notFound: true,
        detail: 'the runtime has no such container (the stop was answered, but the status says not found)',
      });
    }
  }

  async exec(id: string, command: string[], timeoutSeconds: number): Promise<ExecResult> {
    assertContainerId(id);
    // ExecSync's timeout 0 means "no timeout": require a real bound.
    assertTimeout(`CRI ExecSync for container ${id} on ${this.socket}`, timeoutSeconds, 1);
    if (command.length === 0) throw new TypeError(`CRI ExecSync for container ${id}: empty command`);
    let response;
    try {
      response = await this.#client.call(
        'ExecSync',
        { containerId: id, cmd: command, timeout: timeoutSeconds },
        { timeoutMs: timeoutSeconds * 1000 + this.#execMarginMs, containerId: id },
      );
    } catch (error) {
      // The runtime answers once the command has ended: only its output was too long to read.
      if (error instanceof RuntimeCallError && error.code === 'RESOURCE_EXHAUSTED') return { exitCode: undefined, stdout: '', stderr: '' };
      throw error;
    }
    return {
      exitCode: response.exitCode,
      stdout: Buffer.from(response.stdout).toString('utf8'),
      stderr: Buffer.from(response.stderr).toString('utf8'),
    };
  }

  /** containerd only: CRI's own GetContainerEvents is not served by containerd 1.6. */
  watchExits(callbacks: ExitWatchCallbacks): boolean {
    if (this.idPrefix !== 'containerd') return false;
    this.#exits?.close();
    this.#exits = new ContainerdExitStream(this.socket, callbacks);
    return true;
  }

  async podContainers(podUid: string): Promise<PodContainer[]> {
    const { containers } = await this.#client.call(
      'ListContainers',
      { filter: { labelSelector: { [KUBELET_LABELS.podUid]: podUid } } },
      { timeoutMs: this.#callTimeoutMs },
    );
    return Promise.all(
      containers.map(async (c): Promise<PodContainer> => {
        const state = STATES[c.state] ?? 'unknown';
        const listed = { id: runtimeContainerID(c.id), name: c.metadata?.name ?? '', attempt: c.metadata?.attempt ?? 0, state };
        if (state !== 'exited') return listed;
        // The exit code is only in the container's status; a container removed meanwhile has none.
        const status = await this.status(listed.id);
        return status?.exitCode === undefined ? listed : { ...listed, exitCode: status.exitCode };
      }),
    );
  }

  close(): void {
    this.#exits?.close();
    this.#client.close();
  }
}
