import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeClient, Query, WatchEvent } from './kube/client.ts';
import { createLogger } from './log.ts';
import { ProjectingInformer } from './informer.ts';

interface Obj { metadata: { namespace: string; name: string; resourceVersion: string }; owner: string }
const obj = (name: string, owner: string, rv: string): Obj => ({ metadata: { namespace: 'ns', name, resourceVersion: rv }, owner });

/** A scripted API: each list returns the next listing; each watch plays the next script, then ends. */
function scriptedClient(listings: Obj[][], watches: WatchEvent<Obj>[][]) {
  const calls: { watchFrom: string[]; lists: number } = { watchFrom: [], lists: 0 };
  let pending: (() => void) | undefined;
  const client = {
    get: async (_path: string, query: Query) => {
      assert.equal(query.limit, 500);
      return { items: listings[calls.lists++] ?? [], metadata: { resourceVersion: `list-${calls.lists}` } };
    },
    watch: async (_path: string, query: Query, onEvent: (e: WatchEvent<Obj>) => void, signal: AbortSignal) => {
      calls.watchFrom.push(String(query.resourceVersion));
      const script = watches.shift();
      if (script) for (const e of script) onEvent(e);
      else await new Promise<void>((resolve) => { pending = resolve; signal.addEventListener('abort', () => resolve()); });
    },
  } as unknown as KubeClient;
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
    assert.deepEqual(changes, ['ns/a=p1', 'ns/b=p1', 'ns/c=p2', 'ns/a=p2', 'ns/b=-', 'ns/b=p2', 'ns/d=p2', 'ns/a=-', 'ns/c=-']);
    assert.deepEqual(informer.byIndex('p1'), []);
    assert.deepEqual(informer.byIndex('p2'), ['p2', 'p2']);
    assert.deepEqual([...informer.keys()].sort(), ['ns/b', 'ns/d']);
    assert.equal(informer.isSynced(), true);
  });
});
