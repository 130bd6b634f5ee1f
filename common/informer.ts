// List+watch that keeps only a projection of each object: what a controller needs, not the whole
// object, so that watching every Pod of a large cluster stays small. Lists in pages, resumes the
// watch from the last resource version (bookmarks keep it fresh), re-lists after 410 Gone, and backs
// off on errors without ever giving up.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from './log.ts';
import { errorMessage } from './log.ts';

export interface ObjectMeta {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; _continue?: string; continue?: string };
}

export interface InformerOptions<T extends ObjectMeta, P> {
  kubeConfig: k8s.KubeConfig;
  /** API path to watch, e.g. /api/v1/pods */
  path: string;
  /** One page of the list; `continueToken` is undefined for the first. */
  listPage: (continueToken: string | undefined, limit: number) => Promise<ListPage<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  /** What to keep of an object; undefined keeps nothing (the object is of no interest). */
  project: (obj: T) => P | undefined;
  /** Called for every change of a kept projection, and when one goes away (projection undefined). */
  onChange: (key: string, projection: P | undefined) => void;
  onRestart?: () => void;
  log: Logger;
  pageSize?: number;
}

const MAX_BACKOFF_MS = 30_000;

export function objectKey(obj: ObjectMeta): string {
  const { namespace, name } = obj.metadata ?? {};
  return namespace ? `${namespace}/${name}` : (name ?? '');
}

export class ProjectingInformer<T extends ObjectMeta, P> {
  private readonly items = new Map<string, P>();
  private readonly o: InformerOptions<T, P>;
  private readonly watch: k8s.Watch;
  private resourceVersion = '';
  private synced = false;
  private stopped = false;
  private backoffMs = 500;
  private abort: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: InformerOptions<T, P>) {
    this.o = options;
    this.watch = new k8s.Watch(options.kubeConfig);
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort?.abort();
  }

  isSynced(): boolean {
    return this.synced;
  }

  get(key: string): P | undefined {
    return this.items.get(key);
  }

  keys(): IterableIterator<string> {
    return this.items.keys();
  }

  size(): number {
    return this.items.size;
  }

  /** All kept projections, or those of one namespace. */
  list(namespace?: string): P[] {
    const out: P[] = [];
    for (const [key, value] of this.items) {
      if (namespace === undefined || key.startsWith(`${namespace}/`)) out.push(value);
    }
    return out;
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    try {
      if (!this.resourceVersion) await this.relist();
      this.abort = await this.watch.watch(
        this.o.path,
        { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, labelSelector: this.o.labelSelector, fieldSelector: this.o.fieldSelector },
        (phase, obj: T & { code?: number }) => this.onEvent(phase, obj),
        (err: unknown) => this.onDone(err),
      );
    } catch (err) {
      this.onDone(err);
    }
  }

  private async relist(): Promise<void> {
    const seen = new Set<string>();
    let token: string | undefined;
    let version = '';
    do {
      const page = await this.o.listPage(token, this.o.pageSize ?? 500);
      for (const obj of page.items) {
        const key = objectKey(obj);
        seen.add(key);
        this.apply(key, obj);
      }
      token = page.metadata?._continue ?? page.metadata?.continue ?? undefined;
      version = page.metadata?.resourceVersion ?? version;
    } while (token);
    for (const key of [...this.items.keys()]) {
      if (!seen.has(key)) this.remove(key);
    }
    this.resourceVersion = version;
    this.synced = true;
  }

  private onEvent(phase: string, obj: T & { code?: number }): void {
    if (phase === 'ERROR') {
      // 410 Gone: our resource version is too old; the watch ends and we re-list.
      if (obj.code === 410) this.resourceVersion = '';
      return;
    }
    if (phase === 'ADDED' || phase === 'MODIFIED') this.apply(objectKey(obj), obj);
    else if (phase === 'DELETED') this.remove(objectKey(obj));
    this.resourceVersion = obj.metadata?.resourceVersion ?? this.resourceVersion;
    this.backoffMs = 500;
  }

  private onDone(err: unknown): void {
    this.abort = undefined;
    if (this.stopped) return;
    const code = (err as { statusCode?: number; code?: number } | null)?.statusCode ?? (err as { code?: number } | null)?.code;
    if (code === 410) this.resourceVersion = '';
    if (!err) {
      // The server closed a healthy watch (its timeout): resume at once from where we were.
      void this.run();
      return;
    }
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    this.o.log.warn('watch failed, restarting', { path: this.o.path, error: errorMessage(err), retryInMs: delay });
    this.o.onRestart?.();
    this.timer = setTimeout(() => void this.run(), delay);
    this.timer.unref();
  }

  private apply(key: string, obj: T): void {
    const projection = this.o.project(obj);
    if (projection === undefined) {
      this.remove(key);
      return;
    }
    this.items.set(key, projection);
    this.o.onChange(key, projection);
  }

  private remove(key: string): void {
    if (this.items.delete(key)) this.o.onChange(key, undefined);
  }
}

