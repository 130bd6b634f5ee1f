import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Query } from './kube/api.ts';
import { FakeKubeApi, networkError } from '../test/support/fake-api.ts';
import { podPath, resourcePath } from './kube/paths.ts';
import { createLogger } from './log.ts';
import { ProjectingInformer } from './informer.ts';

interface Obj { metadata: { namespace?: string; name?: string; resourceVersion?: string }; owner: string }
const obj = (name: string, owner: string): Obj => ({ metadata: { namespace: 'ns', name }, owner });
const at = (name: string) => podPath('ns', name);
const PODS = podPath();

/** The list parameters that decide where the API server serves a list from, as sent (unset ones left out; a continue token as <token>). */
const listParams = (q: Query | undefined) =>
  Object.fromEntries(['resourceVersion', 'resourceVersionMatch', 'limit', 'continue']
    .filter((k) => q?.[k] !== undefined)
    .map((k) => [k, k === 'continue' ? '<token>' : q![k]]));

const lists = (api: FakeKubeApi) => api.calls.filter((c) => c.method === 'get').map((c) => listParams(c.query));
const watchFrom = (api: FakeKubeApi) => api.calls.filter((c) => c.method === 'watch').map((c) => String(c.query?.resourceVersion));

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(cond(), 'condition not reached');
}

/** Until the informer has opened its `n`th watch and it is open. */
const watching = (api: FakeKubeApi, n: number) => () => api.openWatches() === 1 && watchFrom(api).length === n;

const newInformer = (api: FakeKubeApi, o: { pageSize?: number; changes?: string[] } = {}) =>
  new ProjectingInformer<Obj, string>({
    client: api, path: PODS, log: createLogger('test', 'error'),
    project: (x) => (x.owner === 'ignored' ? undefined : x.owner),
    indexBy: (owner) => [owner],
    onChange: (key, p) => o.changes?.push(`${key}=${p ?? '-'}`),
    ...o,
  });

describe('ProjectingInformer', () => {
  it('keeps projections, indexes them, resumes from the last version and re-lists after 410 Gone', async () => {
    const api = new FakeKubeApi();
    api.set(at('a'), obj('a', 'p1'));
    api.set(at('b'), obj('b', 'p1'));
    const changes: string[] = [];
    const informer = newInformer(api, { changes });
    informer.start();
    await until(watching(api, 1));
    // While watching: c added, a moved to p2, b deleted; a write elsewhere, then a bookmark at its version.
    api.set(at('c'), obj('c', 'p2'));
    api.set(at('a'), obj('a', 'p2'));
    api.remove(at('b'));
    api.set(resourcePath('v1', 'nodes', undefined, 'n'), { metadata: {} });
    api.bookmark();
    // The server ends the watch (its timeout): resumed from the bookmark's version.
    api.endWatches();
    await until(watching(api, 2));
    // 410 Gone, and what changed meanwhile is seen only by a new list, which prunes what is gone (a, c).
    api.expireWatches();
    api.remove(at('a'));
    api.remove(at('c'));
    api.set(at('b'), obj('b', 'p2'));
    api.set(at('d'), obj('d', 'p2'));
    await until(watching(api, 3));
    informer.stop();

    assert.deepEqual(watchFrom(api), ['2', '6', '10']);
    // The first list is a consistent read in pages. The re-list after 410 Gone asks for no older
    // than the newest version seen (the bookmark's), in pages too.
    assert.deepEqual(lists(api), [{ limit: 500 }, { resourceVersion: '6', resourceVersionMatch: 'NotOlderThan', limit: 500 }]);
    assert.deepEqual(changes, ['ns/a=p1', 'ns/b=p1', 'ns/c=p2', 'ns/a=p2', 'ns/b=-', 'ns/b=p2', 'ns/d=p2', 'ns/a=-', 'ns/c=-']);
    assert.deepEqual(informer.byIndex('p1'), []);
    assert.deepEqual(informer.byIndex('p2'), ['p2', 'p2']);
    assert.deepEqual([...informer.keys()].sort(), ['ns/b', 'ns/d']);
    assert.equal(informer.isSynced(), true);
    assert.equal(api.openWatches(), 0, 'stop() ends the watch');
  });

  it('keeps pages for a collection larger than a page: the re-list is paged, continue pages carry only their token', async () => {
    const api = new FakeKubeApi();
    for (const name of ['a', 'b', 'c']) api.set(at(name), obj(name, 'p'));
    const informer = newInformer(api, { pageSize: 2 });
    informer.start();
    await until(watching(api, 1));
    api.set(at('a'), obj('a', 'q'));
    await until(() => informer.get('ns/a') === 'q');
    api.expireWatches();
    await until(watching(api, 2));
    informer.stop();
    assert.deepEqual(lists(api), [
      { limit: 2 },
      { limit: 2, continue: '<token>' },
      { resourceVersion: '4', resourceVersionMatch: 'NotOlderThan', limit: 2 },
      { limit: 2, continue: '<token>' },
    ]);
    assert.deepEqual(watchFrom(api), ['3', '4']);
    assert.equal(informer.size(), 3);
  });

  it('R48: every list is paged, never resourceVersion=0 (answered whole from the watch cache): first list, re-list and continue pages', async () => {
    const api = new FakeKubeApi();
    for (const name of ['a', 'b', 'c']) api.set(at(name), obj(name, 'p'));
    const informer = newInformer(api, { pageSize: 2 });
    informer.start();
    await until(watching(api, 1));
    api.remove(at('c'));
    await until(() => informer.size() === 2);
    api.expireWatches();
    await until(watching(api, 2));
    informer.stop();
    const queries = lists(api);
    assert.equal(queries.length, 3);
    for (const q of queries) {
      assert.equal(q.limit, 2, JSON.stringify(q));
      assert.notEqual(q.resourceVersion, '0', JSON.stringify(q));
    }
  });

  it('falls back to a consistent read when the API server cannot serve the version seen (504)', async () => {
    const api = new FakeKubeApi();
    api.set(at('a'), obj('a', 'p'));
    const informer = newInformer(api);
    informer.start();
    await until(watching(api, 1));
    api.set(at('a'), obj('a', 'q'));
    await until(() => informer.get('ns/a') === 'q');
    // The re-list fails once: the watch cache has not reached version 2.
    api.inject({ method: 'get', path: PODS }, 504);
    api.expireWatches();
    await until(watching(api, 2));
    informer.stop();
    assert.deepEqual(api.lines({ method: 'get' }), [`GET ${PODS} 200`, `GET ${PODS} 504`, `GET ${PODS} 200`]);
    assert.deepEqual(lists(api), [
      { limit: 500 },
      { resourceVersion: '2', resourceVersionMatch: 'NotOlderThan', limit: 500 },
      { limit: 500 },
    ]);
    assert.equal(informer.get('ns/a'), 'q');
  });

  it('R54: a resource that may be absent (a CRD not installed, an older RBAC) answering 404 or 403 counts as empty and synced, and is not asked again at once', async () => {
    const api = new FakeKubeApi();
    api.inject({ method: 'get', path: PODS }, 404);
    const informer = new ProjectingInformer<Obj, string>({
      client: api, path: PODS, log: createLogger('test', 'error'), project: (x) => x.owner, onChange: () => {}, mayBeAbsent: true,
    });
    informer.start();
    await until(() => informer.isSynced());
    await new Promise((r) => setTimeout(r, 100));
    informer.stop();
    assert.equal(informer.size(), 0);
    assert.deepEqual(api.lines({ method: 'get' }), [`GET ${PODS} 404`]);
    const denied = new FakeKubeApi();
    denied.inject({ method: 'get', path: PODS }, 403);
    const older = new ProjectingInformer<Obj, string>({
      client: denied, path: PODS, log: createLogger('test', 'error'), project: (x) => x.owner, onChange: () => {}, mayBeAbsent: true,
    });
    older.start();
    await until(() => older.isSynced());
    older.stop();
    assert.deepEqual(denied.lines({ method: 'get' }), [`GET ${PODS} 403`], 'an RBAC from before the resource: the same');
  });

  it('keeps each namespace\'s keys apart: keysIn and list(namespace) read them without a scan, and follow adds, drops and deletes', async () => {
    const api = new FakeKubeApi();
    api.set(at('a'), obj('a', 'p'));
    api.set(podPath('other', 'b'), { metadata: { namespace: 'other', name: 'b' }, owner: 'q' });
    const informer = newInformer(api);
    informer.start();
    await until(watching(api, 1));
    assert.deepEqual(informer.keysIn('ns'), ['ns/a']);
    assert.deepEqual(informer.list('other'), ['q']);
    api.set(at('c'), obj('c', 'r'));
    api.set(at('a'), obj('a', 'ignored'));
    api.remove(podPath('other', 'b'));
    await until(() => informer.keysIn('ns').join() === 'ns/c' && informer.keysIn('other').length === 0);
    informer.stop();
    assert.deepEqual(informer.list('ns'), ['r']);
    assert.deepEqual(informer.list(), ['r']);
  });

  it('refreshNamespace reads one namespace again and applies only what was kept in part; narrowNamespace keeps less', async () => {
    const api = new FakeKubeApi();
    api.set(at('a'), obj('a', 'p'));
    api.set(podPath('other', 'b'), { metadata: { namespace: 'other', name: 'b' }, owner: 'q' });
    let full = false;
    const informer = new ProjectingInformer<Obj, string>({
      client: api, path: PODS, log: createLogger('test', 'error'), onChange: () => {},
      project: (x) => (full || x.metadata.namespace === 'other' ? x.owner : 'partial'),
      namespacePath: (namespace) => podPath(namespace),
      isPartial: (p) => p === 'partial',
    });
    informer.start();
    await until(watching(api, 1));
    assert.deepEqual([informer.get('ns/a'), informer.get('other/b')], ['partial', 'q']);
    full = true;
    await informer.refreshNamespace('ns');
    assert.deepEqual([informer.get('ns/a'), informer.get('other/b')], ['p', 'q']);
    assert.deepEqual(lists(api).at(-1), { limit: 500 }, 'a consistent read, in pages');
    informer.narrowNamespace('ns', () => 'partial');
    informer.stop();
    assert.deepEqual([informer.get('ns/a'), informer.get('other/b')], ['partial', 'q']);
  });

  it('a watch broken by the network is resumed from the last version seen, without a re-list; not current from the failure to its next event', async () => {
    const api = new FakeKubeApi();
    api.set(at('a'), obj('a', 'p'));
    let restarts = 0;
    const informer = new ProjectingInformer<Obj, string>({
      client: api, path: PODS, log: createLogger('test', 'error'), project: (x) => x.owner, onChange: () => {}, onRestart: () => restarts++,
    });
    assert.equal(informer.isCurrent(), false, 'not before its list');
    informer.start();
    await until(watching(api, 1));
    assert.equal(informer.isCurrent(), true);
    api.set(at('a'), obj('a', 'q'));
    await until(() => informer.get('ns/a') === 'q');
    api.endWatches(networkError());
    // Failed: what it keeps may be behind, until the resumed watch delivers something.
    await until(() => !informer.isCurrent());
    await until(watching(api, 2));
    assert.equal(informer.isCurrent(), false, 'a watch open again says nothing yet');
    // Changes while it is away come with the resumed watch.
    api.set(at('b'), obj('b', 'p'));
    await until(() => informer.get('ns/b') === 'p');
    assert.equal(informer.isCurrent(), true);
    informer.stop();
    assert.equal(restarts, 1);
    assert.deepEqual(watchFrom(api), ['1', '2']);
    assert.equal(lists(api).length, 1);
  });

  it('R48: an object it cannot read (over the answer cap) is left out as if deleted, counted and logged once, and list and watch go on past it', async () => {
    // An owner "huge" is served as over the cap, as a Pod full of `<` is.
    const api = new FakeKubeApi({ oversized: (x) => x.owner === 'huge' });
    for (const name of ['a', 'b', 'c', 'd']) api.set(at(name), obj(name, name === 'b' ? 'huge' : 'p'));
    const changes: string[] = [];
    const unreadable: string[] = [];
    const logged: string[] = [];
    const log = createLogger('test', 'error');
    log.warn = ((message: string, meta?: Record<string, unknown>) => {
      logged.push(`${message} ${String(meta?.name)}`);
      return log;
    }) as typeof log.warn;
    const informer = new ProjectingInformer<Obj, string>({
      client: api, path: PODS, log, pageSize: 4,
      project: (x) => x.owner,
      onChange: (key, p) => changes.push(`${key}=${p ?? '-'}`),
      onUnreadable: (o) => unreadable.push(`${o.namespace}/${o.name}@${o.resourceVersion}`),
    });
    informer.start();
    await until(watching(api, 1));
    assert.deepEqual([...informer.keys()].sort(), ['ns/a', 'ns/c', 'ns/d'], 'the list read past b');
    // c grows over the cap, then d changes, b is edited again (still too big), then shrinks.
    api.set(at('c'), obj('c', 'huge'));
    api.set(at('d'), obj('d', 'q'));
    api.set(at('b'), obj('b', 'huge'));
    api.set(at('b'), obj('b', 'p'));
    await until(() => informer.get('ns/b') === 'p');
    informer.stop();
    assert.deepEqual(changes, ['ns/a=p', 'ns/c=p', 'ns/d=p', 'ns/c=-', 'ns/d=q', 'ns/b=p']);
    assert.deepEqual(unreadable, ['ns/b@2', 'ns/c@5', 'ns/b@7']);
    assert.deepEqual(logged, ['an object could not be read: left out, as if deleted b', 'an object could not be read: left out, as if deleted c']);
    assert.deepEqual(watchFrom(api), ['4'], 'one watch: it went on past every object it could not read');
    // The page of four over the cap, then smaller down to a alone, b alone (left out), then growing back.
    assert.deepEqual(lists(api).map((q) => q.limit), [4, 2, 1, 1, 2]);
  });
});
