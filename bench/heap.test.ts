// Heap snapshots: their summary by class, the change between two, and one snapshot of a real process.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diffHeapSummaries, heapSnapshot, summarizeHeapSnapshot, type HeapClass, type HeapSnapshotFile, type HeapSummary } from './heap.ts';
import { openInspector } from './inspector.ts';
import { MB } from './stats.ts';

const TYPES = ['hidden', 'array', 'string', 'object', 'code', 'closure', 'regexp', 'number', 'native', 'synthetic', 'concatenated string'];
const FIELDS = ['type', 'name', 'id', 'self_size', 'edge_count', 'detachedness'];

interface TestNode { type: string; name: string; size: number }

/** A snapshot of the given nodes, in V8's layout: the fields of each node flat, names in `strings`. */
function snapshotOf(nodes: TestNode[], fields = FIELDS): HeapSnapshotFile {
  const strings = [...new Set(nodes.map((n) => n.name))];
  const value = (n: TestNode, id: number, f: string) =>
    ({ type: TYPES.indexOf(n.type), name: strings.indexOf(n.name), id, self_size: n.size })[f] ?? 0;
  return {
    snapshot: { meta: { node_fields: fields, node_types: fields.map((f) => (f === 'type' ? TYPES : f === 'name' ? 'string' : 'number')) } },
    nodes: nodes.flatMap((n, id) => fields.map((f) => value(n, id, f))),
    strings,
  };
}

const cls = (name: string, count: number, bytes: number): HeapClass => ({ name, count, bytes, mib: Math.round((bytes / MB) * 100) / 100 });

describe('the summary of a heap snapshot', () => {
  const cases: { title: string; snapshot: HeapSnapshotFile; expected: HeapSummary }[] = [
    {
      title: 'objects by constructor name, other nodes by type, largest first',
      snapshot: snapshotOf([
        { type: 'object', name: 'Watch', size: 3 * MB },
        { type: 'object', name: 'Watch', size: 1 * MB },
        { type: 'string', name: 'hello', size: 2 * MB },
        { type: 'string', name: 'world', size: 2 * MB },
        { type: 'closure', name: 'onEvent', size: 64 },
        { type: 'code', name: 'onEvent', size: 2048 },
        { type: 'concatenated string', name: 'a+b', size: 32 },
        { type: 'hidden', name: 'system / Map', size: 40 },
      ]),
      expected: {
        count: 8,
        bytes: 8 * MB + 2184,
        mib: 8,
        classes: [cls('(string)', 2, 4 * MB), cls('Watch', 2, 4 * MB), cls('(code)', 1, 2048), cls('(closure)', 1, 64), cls('(hidden)', 1, 40), cls('(concatenated string)', 1, 32)],
      },
    },
    {
      title: 'read by the fields the snapshot names, in its order',
      snapshot: snapshotOf([{ type: 'object', name: 'Pod', size: 100 }, { type: 'native', name: 'Node / TCPWrap', size: 50 }], ['self_size', 'id', 'name', 'type']),
      expected: { count: 2, bytes: 150, mib: 0, classes: [cls('Pod', 1, 100), cls('(native)', 1, 50)] },
    },
    {
      title: 'the 25 largest classes, the rest as "(other)"',
      snapshot: snapshotOf(Array.from({ length: 28 }, (_, i) => ({ type: 'object', name: `C${i}`, size: 1000 - i }))),
      expected: {
        count: 28,
        bytes: 28 * 1000 - (27 * 28) / 2,
        mib: 0.03,
        classes: [...Array.from({ length: 25 }, (_, i) => cls(`C${i}`, 1, 1000 - i)), cls('(other)', 3, 975 + 974 + 973)],
      },
    },
    { title: 'an empty snapshot', snapshot: snapshotOf([]), expected: { count: 0, bytes: 0, mib: 0, classes: [] } },
  ];
  for (const { title, snapshot, expected } of cases) {
    it(title, () => assert.deepEqual(summarizeHeapSnapshot(snapshot), expected));
  }
});

describe('the change between two heap summaries', () => {
  const summary = (classes: HeapClass[]): HeapSummary => ({
    count: classes.reduce((n, c) => n + c.count, 0),
    bytes: classes.reduce((n, c) => n + c.bytes, 0),
    mib: 0,
    classes,
  });
  const cases: { title: string; before: HeapClass[]; after: HeapClass[]; expected: HeapClass[] }[] = [
    {
      title: 'per class, by the size of the change either way; unchanged classes left out',
      before: [cls('(string)', 100, 4 * MB), cls('Watch', 10, MB), cls('(code)', 5, 5000)],
      after: [cls('(string)', 90, 3 * MB), cls('Watch', 30, 3 * MB), cls('(code)', 5, 5000)],
      expected: [cls('Watch', 20, 2 * MB), cls('(string)', -10, -MB)],
    },
    {
      title: 'a class in one summary only is counted as none in the other',
      before: [cls('Gone', 4, 400)],
      after: [cls('New', 7, 700)],
      expected: [cls('New', 7, 700), cls('Gone', -4, -400)],
    },
    {
      title: 'the 15 largest changes',
      before: [],
      after: Array.from({ length: 20 }, (_, i) => cls(`C${i}`, 1, 100 + i)),
      expected: Array.from({ length: 15 }, (_, i) => cls(`C${19 - i}`, 1, 119 - i)),
    },
  ];
  for (const { title, before, after, expected } of cases) {
    it(title, () => {
      const diff = diffHeapSummaries(summary(before), summary(after));
      assert.deepEqual(diff.classes, expected);
      assert.equal(diff.bytes, summary(after).bytes - summary(before).bytes);
      assert.equal(diff.count, summary(after).count - summary(before).count);
    });
  }
});

/** A Node process running `code`, once it has printed that it is ready. */
async function nodeProcess(code: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', `${code}; setInterval(() => {}, 1000); console.log('ready');`], { stdio: ['ignore', 'pipe', 'ignore'] });
  await once(child.stdout!, 'data');
  return child;
}

describe('a heap snapshot of a running Node process', () => {
  it('lists its 20,000 BenchLeak objects, and leaves its inspector switched off', async () => {
    const leaky = await nodeProcess(`
      class BenchLeak { constructor(i) { this.a = i; this.b = i; this.c = i; this.d = i; } }
      globalThis.kept = Array.from({ length: 20000 }, (_, i) => new BenchLeak(i));
    `);
    const dir = mkdtempSync(join(tmpdir(), 'heap-test-'));
    try {
      const out = join(dir, 'leaky.heapsnapshot');
      const summary = await heapSnapshot(leaky.pid!, out, { enterNamespace: false });
      const leak = summary.classes.find((c) => c.name === 'BenchLeak');
      assert.ok(leak && leak.count >= 20000, JSON.stringify(summary.classes));
      assert.equal(summary.file, out);
      assert.deepEqual(JSON.parse(readFileSync(join(dir, 'leaky.summary.json'), 'utf8')), summary);
      assert.equal(leaky.exitCode, null, 'the process still runs');
      await assert.rejects(fetch('http://127.0.0.1:9229/json/list'), 'the inspector port is closed again');
    } finally {
      leaky.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("is not taken of another process whose inspector holds the port", async () => {
    const [holder, target] = await Promise.all([nodeProcess(''), nodeProcess('')]);
    const inspector = await openInspector(holder.pid!);
    try {
      await assert.rejects(heapSnapshot(target.pid!, join(tmpdir(), 'wrong.heapsnapshot'), { enterNamespace: false }), new RegExp(`is pid ${holder.pid}'s, not ${target.pid}'s`));
    } finally {
      await inspector.close();
      holder.kill();
      target.kill();
    }
  });

  it("fails with the CLI's error when there is no such process", async () => {
    const out = join(tmpdir(), 'no-such-process.heapsnapshot');
    await assert.rejects(heapSnapshot(2 ** 31 - 1, out, { enterNamespace: false }), /heap snapshot of pid 2147483647 failed: .*ENOENT.*\/proc\/2147483647\/status/s);
  });
});
