// containerd's own event stream, filtered to task exits of kubelet's namespace: the agent learns that
// a container exited the moment containerd does, instead of after kubelet's next relist and status
// update. The subscription is re-made with backoff whenever it ends (containerd restarted, socket
// gone); exits missed meanwhile still reach the agent the slow way, through the Pod status.
import type { RuntimeContainerID } from '../../api/container-id.ts';
import { runtimeContainerID } from '../../api/container-id.ts';
import { protoFile } from './proto-file.ts';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** containerd namespace kubelet's CRI plugin keeps Pods' containers in. */
export const KUBELET_NAMESPACE = 'k8s.io';
/** One filter: AND within it (comma), OR between filters. */
const EXIT_FILTER = `topic=="/tasks/exit",namespace=="${KUBELET_NAMESPACE}"`;

const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;

interface TaskExit {
  containerId: string;
  id: string;
  exitStatus: number;
  /** seconds arrive as a string (int64, proto-loader's longs: String). */
  exitedAt: { seconds: string; nanos: number } | null;
}

interface Envelope {
  topic: string;
  event: { value: TaskExit | null } | null;
}

export interface ExitStreamOptions {
  /**
   * Called whenever a container's own process exits (not exec'd processes). containerd's CRI plugin
   * learns of the exit from this same stream, so its view may lag behind for a moment.
   */
  onExit: (containerId: RuntimeContainerID, exitCode: number, exitedAtMs?: number) => void;
  /** The stream broke; it is re-made after `retryInMs`. */
  onError: (error: Error, retryInMs: number) => void;
}

let eventsConstructor: grpc.ServiceClientConstructor | undefined;

function eventsServiceConstructor(): grpc.ServiceClientConstructor {
  if (!eventsConstructor) {
    const definition = protoLoader.loadSync(protoFile('containerd-events.proto'), { keepCase: false, longs: String, defaults: true });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      containerd: { services: { events: { v1: { Events: grpc.ServiceClientConstructor } } } };
    };
    eventsConstructor = pkg.containerd.services.events.v1.Events;
  }
  return eventsConstructor;
}

export class ContainerdExitStream {
  readonly #client: grpc.Client;
  readonly #options: ExitStreamOptions;
  #call: grpc.ClientReadableStream<Envelope> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #backoffMs = FIRST_BACKOFF_MS;
  #closed = false;

  constructor(socket: string, options: ExitStreamOptions) {
    const Events = eventsServiceConstructor();
    this.#client = new Events(`unix://${socket}`, grpc.credentials.createInsecure());
    this.#options = options;
    this.#subscribe();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#call?.cancel();
    this.#client.close();
  }

  #subscribe(): void {
    const subscribe = (this.#client as unknown as { Subscribe: (req: unknown) => grpc.ClientReadableStream<Envelope> }).Subscribe;
    const call = subscribe.call(this.#client, { filters: [EXIT_FILTER] });
    this.#call = call;
    // containerd sends the headers once the subscription is in place.
    call.on('metadata', () => {
      this.#backoffMs = FIRST_BACKOFF_MS;
    });
    call.on('data', (envelope: Envelope) => {
      const exit = envelope.event?.value;
      // An exec'd process (a probe, a preStop hook) has its own ID; only the container's own counts.
      if (exit && exit.containerId && exit.id === exit.containerId) {
        const exitedAtMs = exit.exitedAt ? Number(exit.exitedAt.seconds) * 1000 + exit.exitedAt.nanos / 1e6 : undefined;
        this.#options.onExit(runtimeContainerID(exit.containerId), exit.exitStatus, exitedAtMs);
      }
    });
    call.on('error', (error: grpc.ServiceError) => this.#retry(call, error));
    call.on('end', () => this.#retry(call, new Error('containerd ended the event stream')));
  }

  /** Once per broken stream: 'error' and 'end' may both come. */
  #retry(call: grpc.ClientReadableStream<Envelope>, error: Error): void {
    if (this.#closed || call !== this.#call) return;
    this.#call = undefined;
    call.cancel();
    const retryInMs = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
    this.#options.onError(error, retryInMs);
    this.#timer = setTimeout(() => this.#subscribe(), retryInMs);
    this.#timer.unref();
  }
}
