// A thin typed client for the CRI runtime.v1 RuntimeService over a unix socket, loaded at run time
// from proto/cri.proto. Field names are camelCase (proto-loader's default); int64 fields arrive as
// decimal strings and enums as their names.
import { now } from '../../common/clock.ts';
import { protoFile } from './proto-file.ts';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { RuntimeCallError } from './errors.ts';
import { EXEC_OUTPUT_BYTES } from './types.ts';

export type NamespaceMode = 'POD' | 'CONTAINER' | 'NODE' | 'TARGET';
export type CriContainerState = 'CONTAINER_CREATED' | 'CONTAINER_RUNNING' | 'CONTAINER_EXITED' | 'CONTAINER_UNKNOWN';
export type PodSandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
/** int64 as sent: a number or a decimal string. As received: always a decimal string. */
export type Int64 = string | number;

export interface VersionRequest { version?: string }
export interface VersionResponse {
  version: string;
  runtimeName: string;
  runtimeVersion: string;
  runtimeApiVersion: string;
}

export interface NamespaceOption {
  network?: NamespaceMode;
  pid?: NamespaceMode;
  ipc?: NamespaceMode;
  targetId?: string;
}

export interface PodSandboxMetadata { name: string; uid: string; namespace: string; attempt?: number }

export interface PodSandboxConfig {
  metadata: PodSandboxMetadata;
  hostname?: string;
  logDirectory?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  linux?: {
    cgroupParent?: string;
    securityContext?: { namespaceOptions?: NamespaceOption; privileged?: boolean };
    sysctls?: Record<string, string>;
  };
}

export interface ContainerMetadata { name: string; attempt?: number }
export interface ImageSpec { image: string; annotations?: Record<string, string>; userSpecifiedImage?: string }

export interface ContainerConfig {
  metadata: ContainerMetadata;
  image: ImageSpec;
  command?: string[];
  args?: string[];
  workingDir?: string;
  envs?: { key: string; value: string }[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  logPath?: string;
  stdin?: boolean;
  stdinOnce?: boolean;
  tty?: boolean;
  linux?: { securityContext?: { privileged?: boolean; namespaceOptions?: NamespaceOption } };
}

export interface PodSandbox {
  id: string;
  metadata: PodSandboxMetadata | null;
  state: PodSandboxState;
  createdAt: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  runtimeHandler: string;
}

export interface Container {
  id: string;
  podSandboxId: string;
  metadata: ContainerMetadata | null;
  image: ImageSpec | null;
  imageRef: string;
  state: CriContainerState;
  createdAt: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  imageId: string;
}

export interface ContainerStatus {
  id: string;
  metadata: ContainerMetadata | null;
  state: CriContainerState;
  createdAt: string;
  startedAt: string;
  finishedAt: string;
  exitCode: number;
  image: ImageSpec | null;
  imageRef: string;
  reason: string;
  message: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  logPath: string;
  imageId: string;
}

export interface ContainerFilter {
  id?: string;
  state?: { state: CriContainerState };
  podSandboxId?: string;
  labelSelector?: Record<string, string>;
}

export interface PodSandboxFilter {
  id?: string;
  state?: { state: PodSandboxState };
  labelSelector?: Record<string, string>;
}

/** Request and response type of each RuntimeService method in proto/cri.proto. */
export interface CriMethods {
  Version: [VersionRequest, VersionResponse];
  RunPodSandbox: [{ config: PodSandboxConfig; runtimeHandler?: string }, { podSandboxId: string }];
  StopPodSandbox: [{ podSandboxId: string }, Record<string, never>];
  RemovePodSandbox: [{ podSandboxId: string }, Record<string, never>];
  ListPodSandbox: [{ filter?: PodSandboxFilter }, { items: PodSandbox[] }];
  CreateContainer: [
    { podSandboxId: string; config: ContainerConfig; sandboxConfig: PodSandboxConfig },
    { containerId: string },
  ];
  StartContainer: [{ containerId: string }, Record<string, never>];
  StopContainer: [{ containerId: string; timeout: Int64 }, Record<string, never>];
  RemoveContainer: [{ containerId: string }, Record<string, never>];
  ListContainers: [{ filter?: ContainerFilter }, { containers: Container[] }];
  ContainerStatus: [
    { containerId: string; verbose?: boolean },
    { status: ContainerStatus | null; info: Record<string, string> },
  ];
  ExecSync: [{ containerId: string; cmd: string[]; timeout: Int64 }, { stdout: Buffer; stderr: Buffer; exitCode: number }];
}

export type CriMethod = keyof CriMethods;

export interface CallOptions {
  /** gRPC deadline for this call, in milliseconds from now. */
  timeoutMs: number;
  /** Named in errors. */
  containerId?: string;
}

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: unknown) => void,
) => grpc.ClientUnaryCall;

const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

let serviceConstructor: grpc.ServiceClientConstructor | undefined;

function runtimeServiceConstructor(): grpc.ServiceClientConstructor {
  if (!serviceConstructor) {
    const definition = protoLoader.loadSync(protoFile('cri.proto'), LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      runtime: { v1: { RuntimeService: grpc.ServiceClientConstructor } };
    };
    serviceConstructor = pkg.runtime.v1.RuntimeService;
  }
  return serviceConstructor;
}

/** Strips an optional unix:// scheme; the socket path is what we name in errors. */
export function socketPath(socket: string): string {
  return socket.replace(/^unix:\/\//, '');
}

/**
 * The largest answer read from the runtime, but ExecSync's: statuses and a Pod's container list are
 * a few KiB. grpc-js refuses a larger message from its length prefix, before holding any of it.
 */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
/** ExecSync's answer: the output the agent reads, and room for the exit code and framing. */
const MAX_EXEC_ANSWER_BYTES = EXEC_OUTPUT_BYTES + 1024;

export class CriClient {
  readonly socket: string;
  readonly #client: grpc.Client;
  /**
   * ExecSync's own channel, with a receive limit of its own: the runtimes send up to 16 MiB of each
   * of stdout and stderr, written by whoever wrote the Pod, and several hooks run at once.
   */
  readonly #execClient: grpc.Client;

  constructor(socket: string) {
    this.socket = socketPath(socket);
    const Service = runtimeServiceConstructor();
    const channel = (maxBytes: number) =>
      new Service(`unix://${this.socket}`, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': maxBytes });
    this.#client = channel(MAX_ANSWER_BYTES);
    this.#execClient = channel(MAX_EXEC_ANSWER_BYTES);
  }

  call<M extends CriMethod>(method: M, request: CriMethods[M][0], options: CallOptions): Promise<CriMethods[M][1]> {
    const client = method === 'ExecSync' ? this.#execClient : this.#client;
    const fn = (client as unknown as Record<string, UnaryMethod>)[method];
    if (typeof fn !== 'function') throw new Error(`CRI method ${method} is not in proto/cri.proto`);
    const deadline = new Date(now() + options.timeoutMs);
    return new Promise((resolve, reject) => {
      fn.call(client, request, new grpc.Metadata(), { deadline }, (error, response) => {
        if (error) {
          reject(this.#wrap(method, error, options, now() >= deadline.getTime()));
        } else {
          resolve(response as CriMethods[M][1]);
        }
      });
    });
  }

  #wrap(method: string, error: grpc.ServiceError, options: CallOptions, pastDeadline: boolean): RuntimeCallError {
    const codeName = grpc.status[error.code] ?? String(error.code);
    const details = error.details || error.message;
    // DEADLINE_EXCEEDED is also what a runtime answers when its own timeout (e.g. ExecSync's) runs out.
    const timedOut = error.code === grpc.status.DEADLINE_EXCEEDED;
    return new RuntimeCallError({
      protocol: 'CRI',
      socket: this.socket,
      call: method,
      containerId: options.containerId,
      code: codeName,
      // containerd and CRI-O answer NOT_FOUND; cri-dockerd passes Docker's "No such container" on.
      notFound: error.code === grpc.status.NOT_FOUND || /no such container/i.test(details),
      timedOut,
      detail: timedOut && pastDeadline ? `no answer within ${options.timeoutMs} ms (${details})` : details,
      cause: error,
    });
  }

  close(): void {
    this.#client.close();
    this.#execClient.close();
  }
}
