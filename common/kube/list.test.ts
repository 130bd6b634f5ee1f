import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { GetOptions, Query } from './api.ts';
import { KubeAnswerTooLargeError, KubeApiError, KubeNoAnswerError } from './client.ts';
import { listPaged, PageSizing, type PagedList } from './list.ts';

/**
 * A collection of `sizes` (each object's weight) served in pages: a page over `cap` is refused as
 * the client refuses an answer over its cap, read through for the paths asked (GetOptions) as the
 * client reads them. Records every query.
 */
function collection(sizes: number[], cap: number, overCap: (path: string) => Error = (path) => new KubeAnswerTooLargeError(`GET ${path}`, cap)) {
  const queries: Query[] = [];
  const client = {
    get: <T>(path: string, query: Query = {}, options: GetOptions = {}): Promise<T> => {
      queries.push(query);
      const from = query.continue ? Number(query.continue) : 0;
      const to = Math.min(sizes.length, from + Number(query.limit));
      const weight = sizes.slice(from, to).reduce((a, b) => a + b, 0);
      if (weight > cap && options.scanOversized) {
        const read = { 'metadata.resourceVersion': '7', 'metadata.continue': to < sizes.length ? String(to) : '', 'items.0.metadata.name': `n${from}`, 'items.0.metadata.uid': `u${from}` };
        return Promise.reject(new KubeAnswerTooLargeError(`GET ${path}`, cap, new Map(Object.entries(read).filter(([k]) => options.scanOversized!.includes(k)))));
      }
      if (weight > cap) return Promise.reject(overCap(path));
      const items = sizes.slice(from, to).map((_, i) => ({ n: from + i }));
      return Promise.resolve({ items, metadata: { resourceVersion: '7', continue: to < sizes.length ? String(to) : '' } } as T);
    },
  };
  return { client, queries };
}

async function all(sizes: number[], cap: number, pageSize: number | PageSizing, overCap?: (path: string) => Error) {
  const { client, queries } = collection(sizes, cap, overCap);
  const seen: number[] = [];
  const unreadable: string[] = [];
  const pages: PagedList = {
    first: { labelSelector: 'a=b', resourceVersion: '5' }, next: { labelSelector: 'a=b' }, pageSize,
    onUnreadable: (o, reason) => unreadable.push(`${JSON.stringify(o)}: ${reason}`),
  };
  const version = await listPaged<{ n: number }>(client, '/apis/g/v1/things', pages, (items) => {
    for (const i of items) seen.push(i.n);
  });
  return { seen, version, queries, unreadable };
}

describe('listPaged (R48): every object, one capped answer at a time, whatever the objects weigh', () => {
  it('light objects: full pages; the first page carries the first query, later ones the token and the selectors only', async () => {
    const { seen, version, queries } = await all(Array(5).fill(1), 100, 2);
    assert.deepEqual(seen, [0, 1, 2, 3, 4]);
    assert.equal(version, '7');
    assert.deepEqual(queries, [
      { labelSelector: 'a=b', resourceVersion: '5', limit: 2 },
      { labelSelector: 'a=b', limit: 2, continue: '2' },
      { labelSelector: 'a=b', limit: 2, continue: '4' },
    ]);
  });

  it('heavy objects: a page over the cap is asked again at half the size, from the same place, and the list gets through', async () => {
    const sizes = [...Array(10).fill(1), ...Array(10).fill(40)];
    const { seen, queries } = await all(sizes, 100, 8);
    assert.deepEqual(seen, sizes.map((_, i) => i));
    // 8 light; then 2 light + 6 heavy refused, 4 (2 light + 2 heavy) served; from there 2 a page.
    assert.deepEqual(queries.map((q) => [q.continue ?? '', q.limit]), [['', 8], ['8', 8], ['8', 4], ['12', 4], ['12', 2], ['14', 2], ['16', 2], ['18', 2]]);
  });

  it('a page not served before the client\'s timeout is asked again smaller, as one over the cap', async () => {
    const { seen, queries } = await all(Array(6).fill(40), 100, 8, (path) => new KubeNoAnswerError(`GET ${path}`, 30_000));
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5]);
    assert.deepEqual(queries.map((q) => q.limit), [8, 4, 2, 2, 2]);
  });

  it('the server\'s 504 (its watch cache behind the version asked) fails the list as it is: a smaller page would not help', async () => {
    await assert.rejects(all(Array(6).fill(40), 100, 8, (path) => new KubeApiError(504, 'GET', path, '')), (err) => err instanceof KubeApiError && err.code === 504);
  });

  it('relists keep the size learned: no large page asked again, and the size grows back once a list needs no smaller page', async () => {
    const sizing = new PageSizing(8);
    const heavy = Array(6).fill(40);
    assert.deepEqual((await all(heavy, 100, sizing)).queries.map((q) => q.limit), [8, 4, 2, 2, 2]);
    assert.deepEqual((await all(heavy, 100, sizing)).queries.map((q) => q.limit), [2, 2, 2]);
    assert.equal(sizing.limit, 4);
    await all(Array(6).fill(1), 100, sizing);
    assert.equal(sizing.limit, 8);
    await all(Array(6).fill(1), 100, sizing);
    assert.equal(sizing.limit, 8, 'never past the size it started with');
  });

  it('one object over the cap alone is left out and told, and the list goes on past it, its pages growing back', async () => {
    const { seen, queries, unreadable } = await all([1, 1, 500, 1, 1, 1, 1, 1], 100, 4);
    assert.deepEqual(seen, [0, 1, 3, 4, 5, 6, 7]);
    assert.deepEqual(unreadable, ['{"name":"n2","uid":"u2"}: GET /apis/g/v1/things: the answer is over 100 bytes, more than this client reads']);
    assert.deepEqual(queries.map((q) => [q.continue ?? '', q.limit]), [['', 4], ['', 2], ['2', 2], ['2', 1], ['3', 2], ['5', 4]]);
  });

  it('the last object over the cap: the list ends with it, at the version its page gave', async () => {
    const { seen, version, unreadable } = await all([1, 500], 100, 1);
    assert.deepEqual(seen, [0]);
    assert.equal(version, '7');
    assert.equal(unreadable.length, 1);
  });

  it('an object over the cap whose answer did not say where the list goes on fails the list with the cap\'s error', async () => {
    const { client } = collection([1, 1, 500, 1], 100);
    const cutOff = { get: <T>(path: string, query?: Query) => client.get<T>(path, query) };
    await assert.rejects(listPaged(cutOff, '/x', { first: {}, next: {}, pageSize: 4 }, () => {}), KubeAnswerTooLargeError);
  });

  it('any other error fails the list as it is', async () => {
    const client = { get: () => Promise.reject(new Error('boom')) };
    await assert.rejects(listPaged(client, '/x', { first: {}, next: {}, pageSize: 10 }, () => {}), /boom/);
  });
});
