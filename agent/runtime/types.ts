// What the agent needs from a container runtime, whichever protocol reaches it (CRI or Docker).
import type { RuntimeContainerID } from '../../api/container-id.ts';

/** A container's state as the runtime reports it (the Pod status's state is another type). */
export type RuntimeContainerState = 'created' | 'running' | 'exited' | 'unknown';

export interface RuntimeContainer {
  id: RuntimeContainerID;
  state: RuntimeContainerState;
  /** Set once the container has exited. */
  exitCode?: number;
  /** Runtime's own nanosecond timestamps (0n when unset). */
  startedAtNs: bigint;
  finishedAtNs: bigint;
  /** Runtime's reason for the state, e.g. "Completed", "Error", "OOMKilled". */
  reason?: string;
  /** The Pod container it was created for, when kubelet created it. */
  owner?: ContainerOwner;
}

/** From the labels kubelet puts on every container it creates. */
export interface ContainerOwner {
  podUid: string;
  podNamespace: string;
  podName: string;
  /** The container's name in the Pod spec. */
  container: string;
}

/** One container kubelet created for a Pod; `attempt` is the Pod status's restartCount for it. */
export interface PodContainer {
  id: RuntimeContainerID;
  name: string;
  attempt: number;
  state: RuntimeContainerState;
  /** Set once the container has exited. */
  exitCode?: number;
}

export interface ExitWatchCallbacks {
  /** The runtime's own view (status, listings) may still show the container running for a moment. */
  /** exitedAtMs: when the runtime says the process exited (ms since the epoch), if it says. */
  onExit: (containerId: RuntimeContainerID, exitCode: number, exitedAtMs?: number) => void;
  onError: (error: Error, retryInMs: number) => void;
}

/**
 * The most of one exec's output the agent reads. A hook's output only explains its failure (512
 * characters of it are reported), and whoever writes the Pod decides how much it writes: past this,
 * the rest is dropped unread (CRI: the runtime's answer is refused, so the exit code is lost too).
 */
export const EXEC_OUTPUT_BYTES = 64 * 1024;

export interface ExecResult {
  /** undefined: the command ran to its end, but its output was over EXEC_OUTPUT_BYTES and the runtime's answer, exit code included, was not read. */
  exitCode: number | undefined;
  /** At most EXEC_OUTPUT_BYTES of stdout and stderr together. */
  stdout: string;
  stderr: string;
}

export interface RuntimeVersion {
  runtimeName: string;
  runtimeVersion: string;
}

export interface ContainerRuntime {
  /** The container ID prefix this runtime serves: "containerd", "cri-o" or "docker". */
  readonly idPrefix: string;
  version(): Promise<RuntimeVersion>;
  /** The container's current state, or undefined when the runtime has no such container. */
  status(id: RuntimeContainerID): Promise<RuntimeContainer | undefined>;
  /**
   * The container's stop signal, then SIGKILL after `timeoutSeconds`; resolves once stopped.
   * `signal`: the Pod spec's `lifecycle.stopSignal` (e.g. "SIGUSR1"). A CRI runtime was given it
   * when kubelet created the container and uses it on its own; the Docker Engine is told it here.
   * Without one: the image's STOPSIGNAL, else SIGTERM.
   */
  stop(id: RuntimeContainerID, timeoutSeconds: number, signal?: string): Promise<void>;
  /** Runs a command in the container, bounded by `timeoutSeconds`. */
  exec(id: RuntimeContainerID, command: string[], timeoutSeconds: number): Promise<ExecResult>;
  /**
   * Reports container exits as they happen, until close(); false when this runtime cannot. Lets the
   * agent act on a main container's exit before kubelet has noticed it.
   */
  watchExits?(callbacks: ExitWatchCallbacks): boolean;
  /** Every container kubelet created for the Pod (all attempts). */
  podContainers?(podUid: string): Promise<PodContainer[]>;
  close(): void;
}
