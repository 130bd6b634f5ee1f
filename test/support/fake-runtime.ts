// The one container runtime of the agent's unit tests: it answers what the test gives it and writes
// each call to `calls` (`status <id>`, `stop <id>`, `exec <id> <command>`, `podContainers <uid>`),
// so a test can check which runtime calls were made, and in which order. The real runtimes are
// tested against real daemons (test/support/contract.ts).
import type { RuntimeContainerID } from '../../api/container-id.ts';
import type { ContainerRuntime, ExecResult, PodContainer, RuntimeContainer, RuntimeVersion } from '../../agent/runtime/types.ts';

type Answer<T> = T | Promise<T>;

export interface FakeRuntimeOptions {
  /** Default containerd. */
  idPrefix?: string;
  /** The socket it names in errors, as the real ones do; default none. */
  socket?: string;
  /** Where the calls are written: a test may log its other calls beside them. Default: a new list. */
  calls?: string[];
  /** Default: containerd, answering. */
  version?: () => Promise<RuntimeVersion>;
  /** `call` counts the status calls from 0. Default: no such container. */
  status?: (id: RuntimeContainerID, call: number) => Answer<RuntimeContainer | undefined>;
  /** Default: stopped at once. */
  stop?: (id: RuntimeContainerID, timeoutSeconds: number, signal?: string) => Promise<void>;
  /** Default: exit 0, no output. */
  exec?: (id: RuntimeContainerID, command: string[], timeoutSeconds: number) => Promise<ExecResult>;
  /** Default: none. */
  podContainers?: (podUid: string) => Answer<PodContainer[]>;
}

export type FakeRuntime = ContainerRuntime & { readonly calls: string[]; readonly socket?: string };

export function fakeRuntime(options: FakeRuntimeOptions = {}): FakeRuntime {
  const calls = options.calls ?? [];
  let statusCalls = 0;
  return {
    idPrefix: options.idPrefix ?? 'containerd',
    ...(options.socket === undefined ? {} : { socket: options.socket }),
    calls,
    version: options.version ?? (async () => ({ runtimeName: 'containerd', runtimeVersion: 'test' })),
    status: async (id) => {
      calls.push(`status ${id}`);
      return options.status?.(id, statusCalls++);
    },
    stop: async (id, timeoutSeconds, signal) => {
      calls.push(`stop ${id}`);
      await options.stop?.(id, timeoutSeconds, signal);
    },
    exec: async (id, command, timeoutSeconds) => {
      calls.push(`exec ${id} ${command.join(' ')}`);
      return options.exec ? options.exec(id, command, timeoutSeconds) : { exitCode: 0, stdout: '', stderr: '' };
    },
    podContainers: async (podUid) => {
      calls.push(`podContainers ${podUid}`);
      return options.podContainers?.(podUid) ?? [];
    },
    close: () => {},
  };
}
