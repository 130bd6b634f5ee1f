// Errors from a container runtime call, saying which endpoint, which call and what failed.
import { parseContainerID } from '../../api/container-id.ts';

export interface RuntimeCallErrorInit {
  /** "CRI" or "Docker". */
  protocol: string;
  /** The socket path the call went to. */
  socket: string;
  /** The call, e.g. "StopContainer" or "POST /containers/{id}/stop". */
  call: string;
  /** The container the call was about, if any. */
  containerId?: string;
  /** gRPC status name or HTTP status code, when the runtime answered. */
  code?: string | number;
  /** The runtime has no such container. */
  notFound?: boolean;
  /** The call ran out of time (our deadline or the runtime's own timeout). */
  timedOut?: boolean;
  detail: string;
  cause?: unknown;
}

export class RuntimeCallError extends Error {
  readonly protocol: string;
  readonly socket: string;
  readonly call: string;
  readonly containerId: string | undefined;
  readonly code: string | number | undefined;
  readonly notFound: boolean;
  readonly timedOut: boolean;

  constructor(init: RuntimeCallErrorInit) {
    const about = init.containerId ? ` for container ${init.containerId}` : '';
    const code = init.code !== undefined ? ` [${init.code}]` : '';
    super(`${init.protocol} ${init.call}${about} on ${init.socket} failed${code}: ${init.detail}`, {
      cause: init.cause,
    });
    this.name = 'RuntimeCallError';
    this.protocol = init.protocol;
    this.socket = init.socket;
    this.call = init.call;
    this.containerId = init.containerId;
    this.code = init.code;
    this.notFound = init.notFound ?? false;
    this.timedOut = init.timedOut ?? false;
  }
}

/** Container IDs of containerd, CRI-O and Docker: 64 lowercase hex digits. */
const CONTAINER_ID = /^[0-9a-f]{64}$/;

/**
 * Rejects anything but a full, bare container ID. Runtimes resolve ID prefixes (and Docker names),
 * so a short or malformed ID could otherwise reach a different container than the one meant.
 */
export function assertContainerId(id: string): void {
  if (!CONTAINER_ID.test(id)) {
    const hint = parseContainerID(id) ? ' (pass the bare ID, without the "<runtime>://" prefix)' : '';
    throw new TypeError(`invalid container ID ${JSON.stringify(id)}: expected 64 hex digits${hint}`);
  }
}

export function assertTimeout(what: string, seconds: number, min: number): void {
  if (!Number.isInteger(seconds) || seconds < min) {
    throw new RangeError(`${what}: timeout must be an integer number of seconds >= ${min}, got ${seconds}`);
  }
}

/** A signal name as the Pod API allows it for Linux (SIGTERM, SIGUSR1, SIGRTMIN+3, ...): nothing else reaches a runtime's query. */
const SIGNAL_NAME = /^SIG[A-Z0-9]{2,8}([+-]\d{1,2})?$/;

export function assertSignalName(what: string, signal: string): void {
  if (!SIGNAL_NAME.test(signal)) throw new TypeError(`${what}: invalid stop signal ${JSON.stringify(signal)}`);
}
