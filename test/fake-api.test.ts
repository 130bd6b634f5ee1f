// The fake API server answers as the API server does in the respects the shells' tests rely on:
// these tests pin each of them, so that a test passing against the fake means something.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { UnreadableEvent, WatchEvent } from '../common/kube/api.ts';
import { createIfAbsent, ignoreNotFound, isConflict, isNotFound } from '../common/kube/errors.ts';
import { FakeKubeApi, networkError } from './support/fake-api.ts';
import { podPath, resourcePath } from '../common/kube/paths.ts';
import { errorMessage, statusCode } from '../common/log.ts';

interface Obj {
  metadata: { name?: string; generateName?: string; namespace?: string; uid?: string; resourceVersion?: string; creationTimestamp?: string; deletionTimestamp?: string; labels?: Record<string, string | null>; finalizers?: string[] };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const CRRS = '/apis/sidecar-terminator.dev/v1alpha1/namespaces/ns/containerrecreaterequests';
const LEASES = resourcePath('coordination.k8s.io/v1', 'leases', 'ns');
const NOW = Date.parse('2025-01-01T00:00:00Z');
const fake = () => new FakeKubeApi({ now: () => NOW });
const pod = (name: string, labels: Record<string, string> = {}, node = 'node-a'): Obj => ({ metadata: { name, namespace: 'ns', labels }, spec: { nodeName: node } });

describe('FakeKubeApi: create and get', () => {
  it('creates with a uid, a resourceVersion and a creationTimestamp; a taken name is 409 AlreadyExists', async () => {
    const api = fake();
    const created = await api.create<Obj>(CRRS, { metadata: { name: 'r1' }, spec: { podName: 'p' }, status: { phase: 'Completed' } });
    assert.equal(created.metadata.namespace, 'ns');
    assert.equal(created.metadata.resourceVersion, '1');
    assert.equal(created.metadata.creationTimestamp, '2025-01-01T00:00:00.000Z');
    assert.ok(created.metadata.uid);
    assert.equal(created.status, undefined, 'status is written through the status subresource only');
    const again = await api.create(CRRS, { metadata: { name: 'r1' } }).catch((err: unknown) => err);
    assert.equal(isConflict(again), true);
    assert.match(errorMessage(again), /"r1" already exists/);
    assert.equal(await createIfAbsent(api, CRRS, { metadata: { name: 'r1' } }), undefined);
    assert.ok((await createIfAbsent(api, CRRS, { metadata: { name: 'r2' } as { name: string; uid?: string } }))?.metadata.uid);
    assert.deepEqual(api.lines(), [`POST ${CRRS} 201`, `POST ${CRRS} 409`, `POST ${CRRS} 409`, `POST ${CRRS} 201`]);
  });

  it('names from generateName, keeps nothing of a dry run, refuses another namespace', async () => {
    const api = fake();
    const events = resourcePath('v1', 'events', 'ns');
    const a = await api.create<Obj>(events, { metadata: { generateName: 'job-pod.' } });
    const b = await api.create<Obj>(events, { metadata: { generateName: 'job-pod.' } });
    assert.match(a.metadata.name!, /^job-pod\.\w{5}$/);
    assert.notEqual(a.metadata.name, b.metadata.name);
    await api.create(CRRS, { metadata: { name: 'dry' } }, { dryRun: 'All' });
    assert.equal(api.object(`${CRRS}/dry`), undefined);
    await assert.rejects(api.create(CRRS, { metadata: { name: 'x', namespace: 'other' } }), (err) => statusCode(err) === 400);
  });

  it('a missing object is 404 NotFound', async () => {
    const api = fake();
    const err = await api.get(podPath('ns', 'gone')).catch((e: unknown) => e);
    assert.equal(isNotFound(err), true);
    assert.equal(await api.get(podPath('ns', 'gone')).catch(ignoreNotFound), undefined);
  });

  it('serves what is set at a path that names no object (/version)', async () => {
    const api = fake();
    api.set('/version', { gitVersion: 'v1.33.1' });
    assert.deepEqual(await api.get('/version'), { gitVersion: 'v1.33.1' });
  });
});

describe('FakeKubeApi: updates', () => {
  it('a merge patch carrying a stale resourceVersion is 409; the latest one applies (null removes)', async () => {
    const api = fake();
    const path = `${CRRS}/r1`;
    api.set(path, { metadata: { labels: { a: '1', b: '2' } } });
    api.set(path, { metadata: { labels: { a: '1', b: '2' } } }); // another writer: resourceVersion 2
    const stale = await api.patch(path, { metadata: { resourceVersion: '1', labels: { a: 'x' } } }, 'merge').catch((e: unknown) => e);
    assert.equal(isConflict(stale), true);
    assert.equal(api.object<Obj>(path)?.metadata.labels?.a, '1');
    const patched = await api.patch<Obj>(path, { metadata: { resourceVersion: '2', labels: { a: 'x', b: null } } }, 'merge');
    assert.deepEqual(patched.metadata.labels, { a: 'x' });
    assert.equal(patched.metadata.resourceVersion, '3');
  });

  it('a patch that changes nothing keeps the resourceVersion', async () => {
    const api = fake();
    const path = `${CRRS}/r1`;
    api.set(path, { metadata: { labels: { a: '1' } } });
    const same = await api.patch<Obj>(path, { metadata: { labels: { a: '1' } } }, 'merge');
    assert.equal(same.metadata.resourceVersion, '1');
  });

  it('the status subresource writes status only; the object, everything but status', async () => {
    const api = fake();
    const path = `${CRRS}/r1`;
    api.set(path, { metadata: { labels: { a: '1' } }, spec: { podName: 'p' }, status: { phase: 'Pending' } });
    await api.patch(`${path}/status`, { metadata: { labels: { a: 'ignored' } }, status: { phase: 'Recreating' } }, 'merge');
    await api.patch(path, { metadata: { labels: { b: '2' } }, status: { phase: 'ignored' } }, 'merge');
    const stored = api.object<Obj>(path)!;
    assert.deepEqual(stored.metadata.labels, { a: '1', b: '2' });
    assert.deepEqual(stored.status, { phase: 'Recreating' });
    // Leases have no status subresource.
    api.set(`${LEASES}/l`, { spec: {} });
    await assert.rejects(api.patch(`${LEASES}/l/status`, { status: {} }, 'merge'), (err) => isNotFound(err));
  });

  it('a strategic merge patch merges containers by name and conditions by type', async () => {
    const api = fake();
    const path = podPath('ns', 'p');
    api.set(path, {
      spec: { containers: [{ name: 'app', image: 'app:1' }, { name: 'proxy', image: 'proxy:1' }] },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    });
    await api.patch(path, { spec: { containers: [{ name: 'proxy', image: 'quick-exit' }] } }, 'strategic');
    await api.patch(`${path}/status`, { status: { phase: 'Succeeded', conditions: [{ type: 'Done', status: 'True' }] } }, 'strategic');
    const stored = api.object<Obj>(path)!;
    assert.deepEqual(stored.spec?.containers, [{ name: 'app', image: 'app:1' }, { name: 'proxy', image: 'quick-exit' }]);
    assert.deepEqual(stored.status, { phase: 'Succeeded', conditions: [{ type: 'Ready', status: 'True' }, { type: 'Done', status: 'True' }] });
    // A merge patch replaces the list.
    await api.patch(path, { spec: { containers: [{ name: 'app', image: 'app:2' }] } }, 'merge');
    assert.deepEqual(api.object<Obj>(path)?.spec?.containers, [{ name: 'app', image: 'app:2' }]);
  });

  it('a replace carrying a stale resourceVersion is 409; one of a missing object 404', async () => {
    const api = fake();
    const path = `${LEASES}/l`;
    const lease = api.set<Obj>(path, { metadata: {}, spec: { holderIdentity: 'a' } });
    api.set(path, { spec: { holderIdentity: 'b' } });
    await assert.rejects(api.replace(path, { ...lease, spec: { holderIdentity: 'c' } }), (err) => isConflict(err));
    const latest = api.object<Obj>(path)!;
    const replaced = await api.replace<Obj>(path, { ...latest, spec: { holderIdentity: 'c' } });
    assert.equal(replaced.spec?.holderIdentity, 'c');
    assert.equal(replaced.metadata.uid, lease.metadata.uid);
    await assert.rejects(api.replace(`${LEASES}/none`, { metadata: { name: 'none' } }), (err) => isNotFound(err));
  });
});

describe('FakeKubeApi: delete', () => {
  it('404 when absent, 409 when the uid precondition fails, gone otherwise', async () => {
    const api = fake();
    const path = `${CRRS}/r1`;
    await assert.rejects(api.delete(path), (err) => isNotFound(err));
    api.set(path, { metadata: { uid: 'old' } });
    await assert.rejects(api.delete(path, { preconditions: { uid: 'new' } }), (err) => isConflict(err));
    await api.delete(path, { preconditions: { uid: 'old' } });
    assert.equal(api.object(path), undefined);
  });

  it('an object with finalizers is marked, and goes once the last one is removed', async () => {
    const api = fake();
    const path = `${CRRS}/r1`;
    api.set(path, { metadata: { finalizers: ['keep'] } });
    await api.delete(path);
    const deleting = api.object<Obj>(path);
    assert.equal(deleting?.metadata.deletionTimestamp, '2025-01-01T00:00:00.000Z');
    await api.patch(path, { metadata: { finalizers: null } }, 'merge');
    assert.equal(api.object(path), undefined);
  });
});

describe('FakeKubeApi: lists and watches', () => {
  it('lists by label and field selector, in pages of one snapshot', async () => {
    const api = fake();
    for (const [name, active, node] of [['a', 'true', 'node-a'], ['b', 'true', 'node-a'], ['c', 'false', 'node-a'], ['d', 'true', 'node-b']] as const) {
      api.set(podPath('ns', name), pod(name, { active }, node));
    }
    api.set(podPath('other', 'e'), pod('e', { active: 'true' }, 'node-c'));
    type List = { items: Obj[]; metadata: { resourceVersion: string; continue?: string } };
    const names = (l: List) => l.items.map((o) => o.metadata.name);
    assert.deepEqual(names(await api.get<List>(podPath(), { labelSelector: 'active=true', fieldSelector: 'spec.nodeName=node-a' })), ['a', 'b']);
    assert.deepEqual(names(await api.get<List>(podPath('ns'), { labelSelector: 'active!=true' })), ['c']);
    assert.deepEqual(names(await api.get<List>(podPath(), { labelSelector: '!active' })), []);
    const first = await api.get<List>(podPath(), { limit: 2 });
    assert.deepEqual(names(first), ['a', 'b']);
    api.set(podPath('ns', 'aa'), pod('aa')); // after the first page: not in this list
    const second = await api.get<List>(podPath(), { limit: 2, continue: first.metadata.continue });
    assert.deepEqual(names(second), ['c', 'd']);
    const third = await api.get<List>(podPath(), { limit: 2, continue: second.metadata.continue });
    assert.deepEqual(names(third), ['e']);
    assert.equal(third.metadata.continue, undefined);
    assert.equal(third.metadata.resourceVersion, first.metadata.resourceVersion);
    await assert.rejects(api.get(podPath(), { labelSelector: 'a in (b)' }), /not supported/);
  });

  it('a watch sends the changes after its resourceVersion, through its selectors, until it ends', async () => {
    const api = fake();
    api.set(podPath('ns', 'a'), pod('a', { active: 'true' }));
    api.set(podPath('ns', 'b'), pod('b', { active: 'true' }));
    const from = api.resourceVersion();
    api.set(podPath('ns', 'a'), pod('a', { active: 'false' })); // leaves the selector
    const seen: string[] = [];
    const abort = new AbortController();
    const watching = api.watch<Obj>(podPath(), { resourceVersion: from, labelSelector: 'active=true', allowWatchBookmarks: true }, (e: WatchEvent<Obj> | UnreadableEvent) => {
      assert.notEqual(e.type, 'UNREADABLE');
      if (e.type !== 'UNREADABLE') seen.push(`${e.type} ${e.object.metadata.name ?? ''}@${e.object.metadata.resourceVersion}`);
    }, abort.signal);
    api.set(podPath('ns', 'a'), pod('a', { active: 'true' })); // comes back
    api.remove(podPath('ns', 'b'));
    api.set(podPath('other', 'c'), pod('c', { active: 'false' })); // never seen
    api.bookmark();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, ['DELETED a@3', 'ADDED a@4', 'DELETED b@5', 'BOOKMARK @6']);
    assert.equal(api.openWatches(), 1);
    abort.abort();
    await watching;
    assert.equal(api.openWatches(), 0);
  });

  it('from "0" every object is ADDED first; expireWatches ends a watch with 410, as does a watch from before compact()', async () => {
    const api = fake();
    api.set(podPath('ns', 'a'), pod('a'));
    type Event = WatchEvent<Obj & { code?: number }> | UnreadableEvent;
    const describe = (e: Event) => `${e.type} ${e.type === 'UNREADABLE' ? '' : (e.object.metadata?.name ?? e.object.code)}`;
    const events: Event[] = [];
    const first = api.watch<Obj & { code?: number }>(podPath(), { resourceVersion: '0' }, (e) => events.push(e), new AbortController().signal);
    api.expireWatches();
    await first;
    assert.deepEqual(events.map(describe), ['ADDED a', 'ERROR 410']);
    api.set(podPath('ns', 'b'), pod('b'));
    api.compact();
    const gone: Event[] = [];
    await api.watch<Obj & { code?: number }>(podPath(), { resourceVersion: '1' }, (e) => gone.push(e), new AbortController().signal);
    assert.deepEqual(gone.map(describe), ['ERROR 410']);
  });

  it('endWatches ends a watch as the server\'s timeout does, or as a broken connection', async () => {
    const api = fake();
    const healthy = api.watch(podPath(), { resourceVersion: api.resourceVersion() }, () => {}, new AbortController().signal);
    api.endWatches();
    await healthy;
    const broken = api.watch(podPath(), { resourceVersion: api.resourceVersion() }, () => {}, new AbortController().signal);
    api.endWatches(networkError());
    await assert.rejects(broken, /ECONNRESET/);
    assert.equal(api.openWatches(), 0);
  });
});

describe('FakeKubeApi: faults and the record of calls', () => {
  it('injects error statuses, network errors and functions for the next matching calls only', async () => {
    const api = fake();
    const path = podPath('ns', 'p');
    api.set(path, pod('p'));
    api.inject({ method: 'get', path }, 500, 2);
    api.inject({ method: 'patch' }, networkError());
    await assert.rejects(api.get(path), (err) => statusCode(err) === 500);
    await assert.rejects(api.get(path), (err) => statusCode(err) === 500);
    await api.get(path);
    await assert.rejects(api.patch(path, {}, 'merge'), /ECONNRESET/);
    for (const code of [404, 409, 429]) {
      api.inject({ path: /\/pods\/p$/ }, code);
      await assert.rejects(api.get(path), (err) => statusCode(err) === code);
    }
    assert.deepEqual(api.lines(), [
      `GET ${path} 500`, `GET ${path} 500`, `GET ${path} 200`, `PATCH ${path} 0`, `GET ${path} 404`, `GET ${path} 409`, `GET ${path} 429`,
    ]);
  });

  it('a function runs before the call is served: another writer goes first, and the precondition fails', async () => {
    const api = fake();
    const path = `${CRRS}/r1`;
    const read = api.set<Obj>(path, { metadata: { labels: { a: '1' } } });
    api.inject({ method: 'patch', path }, () => void api.set(path, { metadata: { labels: { a: 'other' } } }));
    const err = await api.patch(path, { metadata: { resourceVersion: read.metadata.resourceVersion, labels: { a: 'mine' } } }, 'merge').catch((e: unknown) => e);
    assert.equal(isConflict(err), true);
    assert.equal(api.object<Obj>(path)?.metadata.labels?.a, 'other');
    const call = api.calls.at(-1)!;
    assert.deepEqual(call.body, { metadata: { resourceVersion: '1', labels: { a: 'mine' } } });
    assert.equal(call.patchType, 'merge');
    assert.equal(call.status, 409);
  });
});
