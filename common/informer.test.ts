import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeApi, Query, WatchEvent } from './kube/api.ts';
import { KubeApiError } from './kube/client.ts';
import { createLogger } from './log.ts';
import { ProjectingInformer } from './informer.ts';

interface Obj { metadata: { namespace: string; name: string; resourceVersion: string }; owner: string }
const obj = (name: string, owner: string, rv: string): Obj => ({ metadata: { namespace: 'ns', name, resourceVersion: rv }, owner });

/** The list parameters that decide where the API server serves a list from, as sent (unset ones left out). */
const listParams = (q: Query) =>
  Object.fromEntries(['resourceVersion', 'resourceVersionMatch', 'limit', 'continue'].filter((k) => q[k] !== undefined).map((k) => [k, q[k]]));

/**
 * A scripted API: each list returns the next listing (in pages of `pageSize`, with continue tokens
 * while more are left); each watch plays the next script, then ends.
 */
function scriptedClient(listings: Obj[][], watches: WatchEvent<Obj>[][], o: { pageSize?: number } = {}) {
  const calls: { watchFrom: string[]; lists: number; listQueries: Record<string, unknown>[] } = { watchFrom: [], lists: 0, listQueries: [] };
  let pending: (() => void) | undefined;
  const pageSize = o.pageSize ?? Infinity;
  const client = {
    get: async (_path: string, query: Query) => {
      calls.listQueries.push(listParams(query));
      const from = query.continue ? Number(query.continue) : 0;
      if (!from) calls.lists++;
      const listing = listings[calls.lists - 1] ?? [];
      const next = from + pageSize < listing.length ? String(from + pageSize) : undefined;
      return { items: listing.slice(from, from + pageSize), metadata: { resourceVersion: `list-${calls.lists}`, continue: next } };
    },
    watch: async (_path: string, query: Query, onEvent: (e: WatchEvent<Obj>) => void, signal: AbortSignal) => {
      calls.watchFrom.push(String(query.resourceVersion));
      const script = watches.shift();
      if (script) for (const e of script) onEvent(e);
      else await new Promise<void>((resolve) => { pending = resolve; signal.addEventListener('abort', () => resolve()); });
    },
  } as unknown as KubeApi;
  return { client, calls, idle: () => pending !== undefined };
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(cond(), 'condition not reached');
}

describe('ProjectingInformer', () => {
  it('keeps projections, indexes them, resumes from the last version and re-lists after 410 Gone', async () => {
    const changes: string[] = [];
    const api = scriptedClient(
      [[obj('a', 'p1', '1'), obj('b', 'p1', '2')], [obj('b', 'p2', '9'), obj('d', 'p2', '9')]],
      [
        [
          { type: 'ADDED', object: obj('c', 'p2', '3') },
          { type: 'MODIFIED', object: obj('a', 'p2', '4') },
          { type: 'DELETED', object: obj('b', 'p1', '5') },
          { type: 'BOOKMARK', object: obj('', '', '6') },
        ],
        [{ type: 'ERROR', object: { code: 410 } as unknown as Obj }],
      ],
    );
    const informer = new ProjectingInformer<Obj, string>({
      client: api.client, path: '/x', log: createLogger('test', 'error'),
      project: (o) => (o.owner === 'ignored' ? undefined : o.owner),
      indexBy: (owner) => [owner],
      onChange: (key, p) => changes.push(`${key}=${p ?? '-'}`),
    });
    informer.start();
    await until(api.idle);
    informer.stop();

    // First list (a, b), watch from its version (c added, a moved to p2, b deleted, a bookmark),
    // resumed from the bookmark's version, then 410: a new list prunes what is gone (a, c).
    assert.deepEqual(api.calls.watchFrom, ['list-1', '6', 'list-2']);
    // The first list is a consistent read in pages. The re-list after 410 Gone asks for no older
    // than the newest version seen (the bookmark's), without a limit since the last list fit in one
    // page: the API server answers it from its watch cache.
    assert.deepEqual(api.calls.listQueries, [{ limit: 500 }, { resourceVersion: '6', resourceVersionMatch: 'NotOlderThan' }]);
    assert.deepEqual(changes, ['ns/a=p1', 'ns/b=p1', 'ns/c=p2', 'ns/a=p2', 'ns/b=-', 'ns/b=p2', 'ns/d=p2', 'ns/a=-', 'ns/c=-']);
    assert.deepEqual(informer.byIndex('p1'), []);
    assert.deepEqual(informer.byIndex('p2'), ['p2', 'p2']);
    assert.deepEqual([...informer.keys()].sort(), ['ns/b', 'ns/d']);
    assert.equal(informer.isSynced(), true);
  });
  const gone: WatchEvent<Obj> = { type: 'ERROR', object: { code: 410 } as unknown as Obj };
  const newInformer = (client: KubeApi, o: { pageSize?: number; smallCollection?: boolean } = {}) =>
    new ProjectingInformer<Obj, string>({ client, path: '/x', log: createLogger('test', 'error'), project: (x) => x.owner, onChange: () => {}, ...o });

  it('keeps pages for a collection larger than a page: the re-list is paged, continue pages carry only their token', async () => {
    const api = scriptedClient(
      [[obj('a', 'p', '1'), obj('b', 'p', '1'), obj('c', 'p', '1')], [obj('a', 'p', '8'), obj('b', 'p', '8'), obj('c', 'p', '8')]],
      [[{ type: 'MODIFIED', object: obj('a', 'p', '7') }, gone]],
      { pageSize: 2 },
    );
    const informer = newInformer(api.client, { pageSize: 2 });
    informer.start();
    await until(api.idle);
    informer.stop();
    assert.deepEqual(api.calls.listQueries, [
      { limit: 2 },
      { limit: 2, continue: '2' },
      { resourceVersion: '7', resourceVersionMatch: 'NotOlderThan', limit: 2 },
      { limit: 2, continue: '2' },
    ]);
    assert.deepEqual(api.calls.watchFrom, ['list-1', 'list-2']);
    assert.equal(informer.size(), 3);
  });

  it('a small collection is first listed from the watch cache at any version (resourceVersion=0), never again', async () => {
    const api = scriptedClient([[obj('a', 'p', '1')], [obj('a', 'p', '4')]], [[{ type: 'MODIFIED', object: obj('a', 'p', '3') }, gone]]);
    const informer = newInformer(api.client, { smallCollection: true });
    informer.start();
    await until(api.idle);
    informer.stop();
    assert.deepEqual(api.calls.listQueries, [
      { resourceVersion: '0', limit: 500 },
      { resourceVersion: '3', resourceVersionMatch: 'NotOlderThan' },
    ]);
  });

  it('falls back to a consistent read when the API server cannot serve the version seen (504)', async () => {
    const tooLarge = new KubeApiError(504, 'GET', '/x', JSON.stringify({ reason: 'Timeout', message: 'Too large resource version: 3, current: 2' }));
    const api = scriptedClient([[obj('a', 'p', '1')], [obj('a', 'p', '2')]], [[{ type: 'MODIFIED', object: obj('a', 'p', '3') }, gone]]);
    // The re-list (the second list call) fails once.
    let failed = false;
    const get = api.client.get.bind(api.client);
    (api.client as { get: unknown }).get = async (path: string, query: Query) => {
      if (api.calls.lists === 1 && !failed) {
        failed = true;
        api.calls.listQueries.push(listParams(query));
        throw tooLarge;
      }
      return get(path, query);
    };
    const informer = newInformer(api.client);
    informer.start();
    await until(() => api.idle() && api.calls.lists === 2);
    informer.stop();
    assert.deepEqual(api.calls.listQueries, [
      { limit: 500 },
      { resourceVersion: '3', resourceVersionMatch: 'NotOlderThan' },
      { limit: 500 },
    ]);
    assert.equal(informer.get('ns/a'), 'p');
  });
});
