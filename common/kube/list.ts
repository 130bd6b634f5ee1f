// The one way a list is read: in pages, each bounded by the client's answer cap. A page whose
// answer is over the cap (objects someone made big), or that the server could not serve in time, is
// asked again at half the size, down to one object, so a list gets through whatever its objects
// weigh, holding at most one capped answer at a time, where a fixed page size would either hold too
// much or fail for good. A collection listed again and again (an informer's relists) keeps the size
// it learned, so a relist does not pay for the large pages again, and grows back once lists pass.
// A page of one object still over the cap (an object served larger than it is stored) is read
// through for who it is and where the list goes on, and the list goes on without it.
import type { KubeApi, Query, UnreadableObject } from './api.ts';
import { identityFound, identityPaths } from './answer-scanner.ts';
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

/**
 * A page of one object over the cap, read through: the same page with no item, and who the item
 * was. Undefined when the answer did not say where the list goes on (it was cut off, or is no list).
 */
function pageWithout<T>(err: unknown): { page: ListPage<T>; object: UnreadableObject } | undefined {
  const scanned = err instanceof KubeAnswerTooLargeError ? err.scanned : undefined;
  const resourceVersion = scanned?.get('metadata.resourceVersion');
  if (!scanned || resourceVersion === undefined) return undefined;
  return { page: { items: [], metadata: { resourceVersion, continue: scanned.get('metadata.continue') } }, object: identityFound(scanned, 'items.0') };
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
  /** Told of each object left out because its page of one was still over the cap. */
  onUnreadable?: (object: UnreadableObject, reason: string) => void;
}

/** What a page of one object over the cap is read through for. */
const ONE_OBJECT_PAGE_PATHS = ['metadata.continue', 'metadata.resourceVersion', ...identityPaths('items.0')];

/** Reads every page of `path`, handing each page's items to `onItems`; resolves with the list's resourceVersion. */
export async function listPaged<T>(client: Pick<KubeApi, 'get'>, path: string, o: PagedList, onItems: (items: T[]) => void): Promise<string> {
  const sizing = typeof o.pageSize === 'number' ? new PageSizing(o.pageSize) : o.pageSize;
  let shrunk = false;
  // Past an object left out, pages grow back: the next objects need not be large too.
  let pastSkipped = false;
  let token: string | undefined;
  let version = '';
  for (;;) {
    const limit = sizing.limit;
    const query = token ? { ...o.next, limit, continue: token } : { ...o.first, limit };
    let page: ListPage<T>;
    try {
      page = await client.get<ListPage<T>>(path, query, limit === 1 ? { scanOversized: ONE_OBJECT_PAGE_PATHS } : undefined);
    } catch (err) {
      const skipped = limit === 1 ? pageWithout<T>(err) : undefined;
      if (skipped) {
        o.onUnreadable?.(skipped.object, (err as Error).message);
        page = skipped.page;
        pastSkipped = true;
      } else if (!pageTooMuch(err) || limit === 1) {
        throw err;
      } else {
        sizing.shrink();
        shrunk = true;
        continue;
      }
    }
    onItems(page.items ?? []);
    if (pastSkipped) sizing.grow();
    version = page.metadata?.resourceVersion ?? version;
    token = page.metadata?.continue || undefined;
    if (!token) {
      if (!shrunk) sizing.grow();
      return version;
    }
  }
}
