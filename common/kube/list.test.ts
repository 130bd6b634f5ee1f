import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Query } from './api.ts';
import { KubeAnswerTooLargeError } from './client.ts';
import { listPaged } from './list.ts';

/**
 * A collection of `sizes` (each object's weight) served in pages: a page over `cap` is refused as
 * the client refuses an answer over its cap. Records every query.
 */
function collection(sizes: number[], cap: number) {
  const queries: Query[] = [];
  const client = {
    get: <T>(path: string, query: Query = {}): Promise<T> => {
      queries.push(query);
      const from = query.continue ? Number(query.continue) : 0;
      const to = Math.min(sizes.length, from + Number(query.limit));
      const weight = sizes.slice(from, to).reduce((a, b) => a + b, 0);
      if (weight > cap) return Promise.reject(new KubeAnswerTooLargeError(`GET ${path}`, cap));
      const items = sizes.slice(from, to).map((_, i) => ({ n: from + i }));
      return Promise.resolve({ items, metadata: { resourceVersion: '7', continue: to < sizes.length ? String(to) : '' } } as T);
    },
  };
  return { client, queries };
}

async function all(sizes: number[], cap: number, pageSize: number) {
  const { client, queries } = collection(sizes, cap);
  const seen: number[] = [];
  const version = await listPaged<{ n: number }>(client, '/apis/g/v1/things', { first: { labelSelector: 'a=b', resourceVersion: '5' }, next: { labelSelector: 'a=b' }, pageSize }, (items) => {
    for (const i of items) seen.push(i.n);
  });
  return { seen, version, queries };
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

  it('one object over the cap alone fails the list with the cap\'s error, never reads past it', async () => {
    await assert.rejects(all([1, 1, 500, 1], 100, 4), KubeAnswerTooLargeError);
  });

  it('any other error fails the list as it is', async () => {
    const client = { get: () => Promise.reject(new Error('boom')) };
    await assert.rejects(listPaged(client, '/x', { first: {}, next: {}, pageSize: 10 }, () => {}), /boom/);
  });
});
