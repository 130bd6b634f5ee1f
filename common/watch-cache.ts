// A list+watch cache that never gives up: the client library re-lists after 410 Gone and backs
// off between reconnects, but stops on any other error; this restarts it with backoff.
import * as k8s from '@kubernetes/client-node';
import type { KubernetesObject } from '@kubernetes/client-node';

/** Anything with object metadata; custom objects arrive as plain JSON (timestamps as strings). */
export interface Named {
  metadata?: { name?: string; namespace?: string };
}
import type { Logger } from './log.ts';
import { errorMessage } from './log.ts';

export interface WatchCacheOptions<T extends Named> {
  kubeConfig: k8s.KubeConfig;
  /** API path to watch, e.g. /api/v1/pods */
  path: string;
  list: () => Promise<{ metadata?: { resourceVersion?: string }; items: T[] }>;
  labelSelector?: string;
  fieldSelector?: string;
  log: Logger;
  onChange: (obj: T, event: 'add' | 'update' | 'delete') => void;
  onRestart?: () => void;
}

const MAX_BACKOFF_MS = 30_000;

export class WatchCache<T extends Named> {
  private readonly listWatch: k8s.ListWatch<KubernetesObject>;
  private synced = false;
  private stopped = false;
  private backoffMs = 500;
  private readonly options: WatchCacheOptions<T>;

  constructor(options: WatchCacheOptions<T>) {
    this.options = options;
    this.listWatch = new k8s.ListWatch<KubernetesObject>(options.path, new k8s.Watch(options.kubeConfig),
      async () => {
        const list = await options.list();
        this.synced = true;
        this.backoffMs = 500;
        return list as k8s.KubernetesListObject<KubernetesObject>;
      },
      false, options.labelSelector, options.fieldSelector);
    this.listWatch.on(k8s.ADD, (obj) => options.onChange(obj as T, 'add'));
    this.listWatch.on(k8s.UPDATE, (obj) => options.onChange(obj as T, 'update'));
    this.listWatch.on(k8s.DELETE, (obj) => options.onChange(obj as T, 'delete'));
    this.listWatch.on(k8s.ERROR, (err) => this.restart(err));
  }

  async start(): Promise<void> {
    await this.listWatch.start();
  }

  stop(): void {
    this.stopped = true;
    void this.listWatch.stop();
  }

  /** True once the first list has been loaded. */
  isSynced(): boolean {
    return this.synced;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.listWatch.get(name, namespace) as T | undefined;
  }

  list(namespace?: string): T[] {
    return this.listWatch.list(namespace) as T[];
  }

  private restart(err: unknown): void {
    if (this.stopped) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    this.options.log.warn('watch failed, restarting', { path: this.options.path, error: errorMessage(err), retryInMs: delay });
    this.options.onRestart?.();
    setTimeout(() => {
      if (!this.stopped) this.listWatch.start().catch((e: unknown) => this.restart(e));
    }, delay).unref();
  }
}
