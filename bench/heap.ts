// Heap snapshots of a deployed component's Node process, summarized by class, for finding what holds
// its memory. As in profile.ts, the snapshot is taken over the DevTools protocol from inside the Pod's
// network namespace (inspector.ts). Usage, with the e2e cluster up, as root:
//   nsenter --net=/proc/<pid>/ns/net node bench/heap.ts <pid> <out.heapsnapshot> <summary.json>
// or heapSnapshot(pid, out) from the benchmark, which runs that. The target pauses while V8 writes
// the snapshot.
import { execFile } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { openInspector } from './inspector.ts';
import { MB } from './stats.ts';

/** A class's (or a change's) self size and instance count. */
export interface HeapClass { name: string; count: number; bytes: number; mib: number }

export interface HeapSummary {
  count: number;
  bytes: number;
  mib: number;
  /** The largest classes by self size, then "(other)" for the rest. */
  classes: HeapClass[];
  /** Set when taken by heapSnapshot: the .heapsnapshot file, when, and how long the snapshot took. */
  file?: string;
  takenAt?: string;
  snapshotMs?: number;
}

/** The change from one summary to another. */
export interface HeapDiff { count: number; bytes: number; mib: number; classes: HeapClass[] }

/** The parts of a .heapsnapshot file read here: the nodes, flat, `meta.node_fields` numbers each. */
export interface HeapSnapshotFile {
  snapshot: { meta: { node_fields: string[]; node_types: (string | string[])[] } };
  nodes: number[];
  strings: string[];
}

const TOP_CLASSES = 25;
const TOP_CHANGES = 15;
const OTHER = '(other)';

const mib = (bytes: number) => Math.round((bytes / MB) * 100) / 100;
const bySizeThenName = (a: HeapClass, b: HeapClass) => Math.abs(b.bytes) - Math.abs(a.bytes) || a.name.localeCompare(b.name);

/** Objects by constructor name, everything else (closures, strings, code, arrays...) by node type. */
function className(type: string, name: string): string {
  return type === 'object' ? name : `(${type})`;
}

export function summarizeHeapSnapshot(heap: HeapSnapshotFile): HeapSummary {
  const fields = heap.snapshot.meta.node_fields;
  const types = heap.snapshot.meta.node_types[fields.indexOf('type')] as string[];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const classes = new Map<string, HeapClass>();
  let count = 0;
  let bytes = 0;
  for (let i = 0; i < heap.nodes.length; i += fields.length) {
    const name = className(types[heap.nodes[i + typeAt]!]!, heap.strings[heap.nodes[i + nameAt]!]!);
    const size = heap.nodes[i + sizeAt]!;
    const c = classes.get(name) ?? { name, count: 0, bytes: 0, mib: 0 };
    c.count++;
    c.bytes += size;
    classes.set(name, c);
    count++;
    bytes += size;
  }
  return { count, bytes, mib: mib(bytes), classes: topAndOther([...classes.values()], TOP_CLASSES) };
}

/** The `top` largest, MiB set, and the rest summed as "(other)" if there is a rest. */
function topAndOther(classes: HeapClass[], top: number): HeapClass[] {
  const sorted = classes.toSorted(bySizeThenName).map((c) => ({ ...c, mib: mib(c.bytes) }));
  const rest = sorted.slice(top);
  if (rest.length === 0) return sorted;
  const other = rest.reduce((o, c) => ({ ...o, count: o.count + c.count, bytes: o.bytes + c.bytes }), { name: OTHER, count: 0, bytes: 0, mib: 0 });
  return [...sorted.slice(0, top), { ...other, mib: mib(other.bytes) }];
}

/**
 * From `before` to `after`, per class, the largest changes in size. A class listed in only one
 * summary counts as none in the other, though it may be inside that one's "(other)".
 */
export function diffHeapSummaries(before: HeapSummary, after: HeapSummary): HeapDiff {
  const changes = new Map<string, HeapClass>();
  const add = (c: HeapClass, sign: number) => {
    const d = changes.get(c.name) ?? { name: c.name, count: 0, bytes: 0, mib: 0 };
    changes.set(c.name, { ...d, count: d.count + sign * c.count, bytes: d.bytes + sign * c.bytes });
  };
  for (const c of before.classes) add(c, -1);
  for (const c of after.classes) add(c, 1);
  const classes = [...changes.values()]
    .filter((c) => c.bytes !== 0 || c.count !== 0)
    .sort(bySizeThenName)
    .slice(0, TOP_CHANGES)
    .map((c) => ({ ...c, mib: mib(c.bytes) }));
  const bytes = after.bytes - before.bytes;
  return { count: after.count - before.count, bytes, mib: mib(bytes), classes };
}

const HEAP_CLI = fileURLToPath(import.meta.url);

/**
 * Snapshots the heap of Node process `pid` (a host pid) into `outFile`, its summary next to it in
 * .summary.json. Runs this file's CLI inside the process' network namespace, which needs root; with
 * `enterNamespace: false` it runs it here, for a process sharing this namespace.
 */
export async function heapSnapshot(pid: number, outFile: string, { enterNamespace = true } = {}): Promise<HeapSummary> {
  const summaryFile = `${outFile.replace(/\.heapsnapshot$/, '')}.summary.json`;
  const cli = [process.execPath, HEAP_CLI, String(pid), outFile, summaryFile];
  const [command, ...args] = enterNamespace ? ['nsenter', `--net=/proc/${pid}/ns/net`, ...cli] : cli;
  try {
    await promisify(execFile)(command!, args);
  } catch (err) {
    const { stderr, message } = err as { stderr?: string; message: string };
    throw new Error(`heap snapshot of pid ${pid} failed: ${stderr?.trim() || message}`, { cause: err });
  }
  return JSON.parse(readFileSync(summaryFile, 'utf8')) as HeapSummary;
}

/**
 * Writes the snapshot's chunks to `outFile` as they come rather than gathering them in memory;
 * returns how long the snapshot took, the target paused.
 */
async function writeHeapSnapshot(pid: number, outFile: string): Promise<number> {
  const inspector = await openInspector(pid);
  const fd = openSync(outFile, 'w');
  try {
    inspector.on('HeapProfiler.addHeapSnapshotChunk', (params) => writeSync(fd, (params as { chunk: string }).chunk));
    const start = performance.now();
    await inspector.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    return Math.round(performance.now() - start);
  } finally {
    closeSync(fd);
    await inspector.close();
  }
}

async function main(pid: number, outFile: string, summaryFile: string): Promise<void> {
  const takenAt = new Date();
  const snapshotMs = await writeHeapSnapshot(pid, outFile);
  const summary = summarizeHeapSnapshot(JSON.parse(readFileSync(outFile, 'utf8')) as HeapSnapshotFile);
  writeFileSync(summaryFile, JSON.stringify({ ...summary, file: outFile, takenAt: takenAt.toISOString(), snapshotMs }, null, 2));
  console.log(`wrote ${outFile}: ${summary.mib} MiB in ${summary.count} nodes, ${snapshotMs} ms; ${summaryFile}`);
}

if (import.meta.main) {
  const [pid, outFile, summaryFile] = process.argv.slice(2);
  if (!pid || !outFile || !summaryFile) throw new Error('usage: node bench/heap.ts <pid> <out.heapsnapshot> <summary.json>');
  await main(Number(pid), outFile, summaryFile);
}
