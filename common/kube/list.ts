// The one way a list is read: in pages, each bounded by the client's answer cap. A page whose
// answer is over the cap (objects someone made big) is asked again at half the size, down to one
// object, so a list gets through whatever its objects weigh, holding at most one capped answer at a
// time, where a fixed page size would either hold too much or fail for good.
import type { KubeApi, Query } from './api.ts';
import { KubeAnswerTooLargeError } from './client.ts';

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string };
}

export interface PagedList {
  /** The first page's query (selectors, and where it is served from). */
  first: Query;
  /** What every later page carries beside its continue token (the token pins the version). */
  next: Query;
  /** Objects per page to start with. */
  pageSize: number;
}

/** Reads every page of `path`, handing each page's items to `onItems`; resolves with the list's resourceVersion. */
export async function listPaged<T>(client: Pick<KubeApi, 'get'>, path: string, o: PagedList, onItems: (items: T[]) => void): Promise<string> {
  let limit = Math.max(1, o.pageSize);
  let token: string | undefined;
  let version = '';
  for (;;) {
    const query = token ? { ...o.next, limit, continue: token } : { ...o.first, limit };
    let page: ListPage<T>;
    try {
      page = await client.get<ListPage<T>>(path, query);
    } catch (err) {
      if (!(err instanceof KubeAnswerTooLargeError) || limit === 1) throw err;
      limit = Math.ceil(limit / 2);
      continue;
    }
    onItems(page.items ?? []);
    version = page.metadata?.resourceVersion ?? version;
    token = page.metadata?.continue || undefined;
    if (!token) return version;
  }
}
