// The one way a list is read: in pages, each bounded by the client's answer cap. A page whose
// answer is over the cap (objects someone made big), or that the server could not serve in time, is
// asked again at half the size, down to one object, so a list gets through whatever its objects
// weigh, holding at most one capped answer at a time, where a fixed page size would either hold too
// much or fail for good. A collection listed again and again (an informer's relists) keeps the size
// it learned, so a relist does not pay for the large pages again, and grows back once lists pass.
import type { KubeApi, Query } from './api.ts';
import { KubeAnswerTooLargeError, KubeNoAnswerError } from './client.ts';

/** The page size of one collection, learned across its lists. */
export class PageSizing {
  readonly max: number;
  #limit: number;

  constructor(max: number) {
    this.max = Math.max(1, max);
    this.#limit = this.max;
  }

  get limit(): number {
    return this.#limit;
  }

  shrink(): void {
    this.#limit = Math.ceil(this.#limit / 2);
  }

  /** After a list that needed no smaller page: twice the size next time, up to `max`. */
  grow(): void {
    this.#limit = Math.min(this.max, this.#limit * 2);
  }
}

/**
 * The page was too much to read, or to serve before this client's timeout: the same page, smaller,
 * may pass. (The server's own 504 is not this: it answers that way when its watch cache has not
 * reached the version asked for, which a smaller page does not change.)
 */
function pageTooMuch(err: unknown): boolean {
  return err instanceof KubeAnswerTooLargeError || err instanceof KubeNoAnswerError;
}

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string };
}

export interface PagedList {
  /** The first page's query (selectors, and where it is served from). */
  first: Query;
  /** What every later page carries beside its continue token (the token pins the version). */
  next: Query;
  /** Objects per page to start with, or the size learned by earlier lists of the collection. */
  pageSize: number | PageSizing;
}

/** Reads every page of `path`, handing each page's items to `onItems`; resolves with the list's resourceVersion. */
export async function listPaged<T>(client: Pick<KubeApi, 'get'>, path: string, o: PagedList, onItems: (items: T[]) => void): Promise<string> {
  const sizing = typeof o.pageSize === 'number' ? new PageSizing(o.pageSize) : o.pageSize;
  let shrunk = false;
  let token: string | undefined;
  let version = '';
  for (;;) {
    const limit = sizing.limit;
    const query = token ? { ...o.next, limit, continue: token } : { ...o.first, limit };
    let page: ListPage<T>;
    try {
      page = await client.get<ListPage<T>>(path, query);
    } catch (err) {
      if (!pageTooMuch(err) || limit === 1) throw err;
      sizing.shrink();
      shrunk = true;
      continue;
    }
    onItems(page.items ?? []);
    version = page.metadata?.resourceVersion ?? version;
    token = page.metadata?.continue || undefined;
    if (!token) {
      if (!shrunk) sizing.grow();
      return version;
    }
  }
}
