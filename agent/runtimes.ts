// The node's container runtimes, connected lazily: a runtime that is down at start-up, or goes away,
// is looked for again with backoff, and the agent reports not-ready until one answers.
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { ContainerRuntime } from './runtime/types.ts';

export type RuntimeDiscovery = () => Promise<ContainerRuntime[]>;

const MAX_BACKOFF_MS = 30_000;

export class RuntimeRegistry {
  private runtimes = new Map<string, ContainerRuntime>();
  private lastError: string | undefined = 'no runtime connected yet';
  private backoffMs = 500;
  private timer: NodeJS.Timeout | undefined;
  private readonly discover: RuntimeDiscovery;
  private readonly log: Logger;

  constructor(discover: RuntimeDiscovery, log: Logger) {
    this.discover = discover;
    this.log = log;
  }

  /** Connects now, and keeps trying in the background until something answers. */
  async start(): Promise<void> {
    await this.connect();
  }

  runtimeFor(prefix: string): ContainerRuntime | undefined {
    return this.runtimes.get(prefix);
  }

  /** Why the agent cannot reach a runtime, or undefined when it can. */
  notReadyReason(): string | undefined {
    return this.runtimes.size === 0 ? `container runtime: ${this.lastError}` : undefined;
  }

  prefixes(): string[] {
    return [...this.runtimes.keys()];
  }

  close(): void {
    clearTimeout(this.timer);
    for (const r of this.runtimes.values()) r.close();
    this.runtimes.clear();
  }

  private async connect(): Promise<void> {
    try {
      const found = await this.discover();
      if (found.length === 0) throw new Error('no runtime socket found');
      for (const r of this.runtimes.values()) r.close();
      this.runtimes = new Map(found.map((r) => [r.idPrefix, r]));
      this.lastError = undefined;
      this.backoffMs = 500;
      this.log.info('container runtimes connected', { runtimes: this.prefixes() });
    } catch (err) {
      this.lastError = errorMessage(err);
      this.log.warn('no container runtime reachable, retrying', { error: this.lastError, retryInMs: this.backoffMs });
      this.timer = setTimeout(() => void this.connect(), this.backoffMs);
      this.timer.unref();
      this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    }
  }
}
