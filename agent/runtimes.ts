// The node's container runtimes, connected lazily: a runtime that is down at start-up, or goes away,
// is looked for again with backoff, and the agent reports not-ready until one answers.
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { Runtimes } from './runtime/discover.ts';
import type { ContainerRuntime } from './runtime/types.ts';

export type RuntimeDiscovery = () => Promise<Runtimes>;
/** A container exited in a runtime; its ID without the prefix. */
export type ExitListener = (runtime: ContainerRuntime, containerId: string, exitCode: number, exitedAtMs?: number) => void;

const MAX_BACKOFF_MS = 30_000;

export class RuntimeRegistry {
  private runtimes: Runtimes | undefined;
  private lastError: string | undefined = 'no runtime connected yet';
  private backoffMs = 500;
  private timer: NodeJS.Timeout | undefined;
  private readonly discover: RuntimeDiscovery;
  private readonly log: Logger;
  private readonly onExit: ExitListener | undefined;

  constructor(discover: RuntimeDiscovery, log: Logger, onExit?: ExitListener) {
    this.discover = discover;
    this.log = log;
    this.onExit = onExit;
  }

  /** Connects now, and keeps trying in the background until something answers. */
  async start(): Promise<void> {
    await this.connect();
  }

  runtimeFor(prefix: string): ContainerRuntime | undefined {
    return this.runtimes?.byPrefix(prefix);
  }

  /** Why the agent cannot reach a runtime, or undefined when it can. */
  notReadyReason(): string | undefined {
    return this.runtimes ? undefined : `container runtime: ${this.lastError}`;
  }

  prefixes(): string[] {
    return this.runtimes?.runtimes.map((r) => r.idPrefix) ?? [];
  }

  close(): void {
    clearTimeout(this.timer);
    this.runtimes?.close();
    this.runtimes = undefined;
  }

  /** The prefixes of the runtimes that report exits as they happen. */
  private watchExits(runtimes: Runtimes): string[] {
    const onExit = this.onExit;
    if (!onExit) return [];
    return runtimes.runtimes.filter((runtime) =>
      runtime.watchExits?.({
        onExit: (id, exitCode, exitedAtMs) => onExit(runtime, id, exitCode, exitedAtMs),
        onError: (error, retryInMs) =>
          this.log.warn('container exit stream broke, subscribing again', { runtime: runtime.idPrefix, error: error.message, retryInMs }),
      }),
    ).map((r) => r.idPrefix);
  }

  private async connect(): Promise<void> {
    try {
      this.runtimes = await this.discover();
      this.lastError = undefined;
      this.backoffMs = 500;
      const reportingExits = this.watchExits(this.runtimes);
      this.log.info('container runtimes connected', { runtimes: this.prefixes(), reportingExits, skipped: this.runtimes.skipped });
    } catch (err) {
      this.lastError = errorMessage(err);
      this.log.warn('no container runtime reachable, retrying', { error: this.lastError, retryInMs: this.backoffMs });
      this.timer = setTimeout(() => void this.connect(), this.backoffMs);
      this.timer.unref();
      this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    }
  }
}
