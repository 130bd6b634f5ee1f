// The node's container runtimes, connected lazily: a runtime that is down at start-up, or stops
// answering (asked every 10 s; twice in a row, so one slow answer under load drops nothing), is
// looked for again with backoff, and the agent reports not-ready until one answers, and not live
// once none has answered for 2 minutes.
// A runtime that restarted made a new socket, which a socket mounted alone into the agent shows only
// to a new container: once a runtime has answered in this process, a connection refused on its
// socket (the mounted file has no listener any more) means just that, or a runtime that is down.
// Either way only a new container helps, so the agent asks to be restarted at once (onSocketGone):
// kubelet starts it again with a fresh mount as soon as the runtime serves (it cannot start one
// before), and the requests created meanwhile are carried out then. containerd's exit stream
// breaks the moment containerd goes, which has the runtime checked at once.
import type { Clock } from '../common/clock.ts';
import { now } from '../common/clock.ts';
import type { RuntimeContainerID } from '../api/container-id.ts';
import type { Logger } from '../common/log.ts';
import { errorMessage } from '../common/log.ts';
import type { ContainerRuntimeOf, DiscoveredRuntimes } from './runtime/discover.ts';
import type { ContainerRuntime } from './runtime/types.ts';

export type RuntimeDiscovery = () => Promise<DiscoveredRuntimes>;
/** A container exited in a runtime. */
export type ExitListener = (runtime: ContainerRuntime, containerId: RuntimeContainerID, exitCode: number, exitedAtMs?: number) => void;

const MAX_BACKOFF_MS = 30_000;
const CHECK_EVERY_MS = 10_000;
const LOST_AFTER_MS = 120_000;
/** What a connection to a socket file with nothing listening (or no file) fails with. */
const SOCKET_GONE = /\b(ECONNREFUSED|ENOENT)\b/;

export interface RuntimeRegistryOptions {
  /** A container exited in a runtime (the fast path). */
  onExit?: ExitListener;
  /** A runtime that answered before refuses connections: the agent should be restarted, for a fresh mount of its socket. */
  onSocketGone?: (reason: string) => void;
  now?: Clock;
}

export class RuntimeRegistry {
  private runtimes: DiscoveredRuntimes | undefined;
  private lastError: string | undefined = 'no runtime connected yet';
  private backoffMs = 500;
  private timer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  /** When a runtime last answered (or the registry started). */
  private lastAnsweredMs: number;
  private failedChecks = 0;
  /** A runtime has answered in this process: a refused connection since is a socket gone. */
  private answeredOnce = false;
  private checking: Promise<void> | undefined;
  private readonly now: Clock;
  private readonly discover: RuntimeDiscovery;
  private readonly log: Logger;
  private readonly onExit: ExitListener | undefined;
  private readonly onSocketGone: ((reason: string) => void) | undefined;

  constructor(discover: RuntimeDiscovery, log: Logger, options: RuntimeRegistryOptions = {}) {
    this.discover = discover;
    this.log = log;
    this.onExit = options.onExit;
    this.onSocketGone = options.onSocketGone;
    this.now = options.now ?? now;
    this.lastAnsweredMs = this.now();
  }

  /** Connects now, and keeps trying in the background until something answers. */
  async start(): Promise<void> {
    await this.connect();
  }

  runtimeFor(prefix: string): ContainerRuntime | undefined {
    return this.runtimes?.runtimeFor(prefix);
  }

  /** The runtime of a Pod status container ID (`<runtime>://<id>`) and the ID's parts, or why none serves it. */
  forContainer(containerID: string): ContainerRuntimeOf {
    return this.runtimes?.forContainer(containerID) ?? { error: `no container runtime connected (${this.lastError})` };
  }

  /** Why the agent cannot reach a runtime, or undefined when it can. */
  notReadyReason(): string | undefined {
    return this.runtimes ? undefined : `container runtime: ${this.lastError}`;
  }

  /** Why the agent should be restarted (its liveness): no runtime has answered for LOST_AFTER_MS. */
  notLiveReason(): string | undefined {
    const silentMs = this.now() - this.lastAnsweredMs;
    if (this.runtimes || silentMs < LOST_AFTER_MS) return undefined;
    return `no container runtime has answered for ${Math.round(silentMs / 1000)} s (${this.lastError}): a restarted runtime's new socket shows only to a new container`;
  }

  /**
   * Asks each runtime its version: none answering twice in a row, the runtimes are dropped and looked
   * for again; a socket refusing connections, the agent asks to be restarted. One check at a time.
   */
  check(): Promise<void> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async checkOnce(): Promise<void> {
    const runtimes = this.runtimes;
    if (!runtimes) return;
    const answers = await Promise.allSettled(runtimes.runtimes.map((r) => r.version()));
    if (answers.some((a) => a.status === 'fulfilled')) {
      this.lastAnsweredMs = this.now();
      this.failedChecks = 0;
      return;
    }
    const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected');
    if (this.socketGone(failed?.reason)) return;
    if (this.runtimes !== runtimes || ++this.failedChecks < 2) return;
    this.failedChecks = 0;
    this.lastError = errorMessage(failed?.reason);
    this.log.warn('container runtime stopped answering, looking for it again', { runtimes: this.prefixes(), error: this.lastError });
    this.runtimes = undefined;
    runtimes.close();
    clearTimeout(this.timer);
    void this.connect();
  }

  /** A refused connection after a runtime answered: the agent asks to be restarted (once). Whether it did. */
  private socketGone(err: unknown): boolean {
    const message = errorMessage(err);
    if (!this.answeredOnce || !this.onSocketGone || !SOCKET_GONE.test(message)) return false;
    const onSocketGone = this.onSocketGone;
    this.answeredOnce = false;
    this.lastError = message;
    this.log.error('the container runtime socket refuses connections: the runtime restarted (its new socket shows only to a new container) or is down; the agent exits so that kubelet starts it again with a fresh mount', { error: message });
    onSocketGone(message);
    return true;
  }

  prefixes(): string[] {
    return this.runtimes?.runtimes.map((r) => r.idPrefix) ?? [];
  }

  close(): void {
    clearTimeout(this.timer);
    clearInterval(this.checkTimer);
    this.runtimes?.close();
    this.runtimes = undefined;
  }

  /** The prefixes of the runtimes that report exits as they happen. */
  private watchExits(runtimes: DiscoveredRuntimes): string[] {
    const onExit = this.onExit;
    if (!onExit) return [];
    return runtimes.runtimes.filter((runtime) =>
      runtime.watchExits?.({
        onExit: (id, exitCode, exitedAtMs) => onExit(runtime, id, exitCode, exitedAtMs),
        onError: (error, retryInMs) => {
          this.log.warn('container exit stream broke, subscribing again', { runtime: runtime.idPrefix, error: error.message, retryInMs });
          // The runtime may have gone: asked now rather than at the next check.
          void this.check();
        },
      }),
    ).map((r) => r.idPrefix);
  }

  private async connect(): Promise<void> {
    try {
      this.runtimes = await this.discover();
      this.lastError = undefined;
      this.lastAnsweredMs = this.now();
      this.answeredOnce = true;
      if (!this.checkTimer) {
        this.checkTimer = setInterval(() => void this.check(), CHECK_EVERY_MS);
        this.checkTimer.unref();
      }
      this.backoffMs = 500;
      const reportingExits = this.watchExits(this.runtimes);
      this.log.info('container runtimes connected', { runtimes: this.prefixes(), reportingExits, skipped: this.runtimes.skipped });
    } catch (err) {
      this.lastError = errorMessage(err);
      if (this.socketGone(err)) return;
      this.log.warn('no container runtime reachable, retrying', { error: this.lastError, retryInMs: this.backoffMs });
      this.timer = setTimeout(() => void this.connect(), this.backoffMs);
      this.timer.unref();
      this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    }
  }
}
