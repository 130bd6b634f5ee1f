// What the agent needs from a container runtime, whichever protocol reaches it (CRI or Docker).

export type ContainerState = 'created' | 'running' | 'exited' | 'unknown';

export interface RuntimeContainer {
  /** Bare ID, without the `<runtime>://` prefix. */
  id: string;
  state: ContainerState;
  /** Set once the container has exited. */
  exitCode?: number;
  /** Runtime's own nanosecond timestamps (0n when unset). */
  startedAtNs: bigint;
  finishedAtNs: bigint;
  /** Runtime's reason for the state, e.g. "Completed", "Error", "OOMKilled". */
  reason?: string;
}

export interface ExecResult {
  exitCode: number;
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
  status(id: string): Promise<RuntimeContainer | undefined>;
  /** SIGTERM (or the image's stop signal), then SIGKILL after `timeoutSeconds`; resolves once stopped. */
  stop(id: string, timeoutSeconds: number): Promise<void>;
  /** Runs a command in the container, bounded by `timeoutSeconds`. */
  exec(id: string, command: string[], timeoutSeconds: number): Promise<ExecResult>;
  close(): void;
}
