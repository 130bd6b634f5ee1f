// CPU profile of a deployed component's Node process, for finding where the time goes (not part of
// `npm run bench`). The process' inspector is switched on with SIGUSR1 (it listens on 127.0.0.1:9229
// inside the Pod's network namespace), and this script, run inside that namespace, drives the
// V8 profiler over the DevTools protocol, then switches the inspector off again (inspector.ts).
// Usage, with the e2e cluster up, as root:
//   nsenter --net=/proc/<pid>/ns/net node bench/profile.ts <pid> <seconds> <out.cpuprofile>
//   node bench/profile.ts --summary <file.cpuprofile>     (self time by function and by file)
import { readFileSync, writeFileSync } from 'node:fs';
import { openInspector } from './inspector.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

async function record(pid: number, seconds: number, out: string): Promise<void> {
  const { call, close } = await openInspector(pid);
  await call('Profiler.enable');
  await call('Profiler.setSamplingInterval', { interval: 500 });
  await call('Profiler.start');
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const { profile } = (await call('Profiler.stop')) as { profile: Profile };
  writeFileSync(out, JSON.stringify(profile));
  await close();
  console.log(`wrote ${out}`);
  summary(profile);
}

function summary(p: Profile): void {
  const total = p.samples.length;
  const selfById = new Map<number, number>();
  for (const s of p.samples) selfById.set(s, (selfById.get(s) ?? 0) + 1);
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const n of p.nodes) {
    const hits = selfById.get(n.id) ?? 0;
    if (!hits) continue;
    const file = n.callFrame.url.replace(/^file:\/\/\/app\//, '').replace(/^node:/, 'node:') || '(native)';
    const fn = `${n.callFrame.functionName || '(anonymous)'} ${file}:${n.callFrame.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + hits);
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? file.split('/').slice(0, 2).join('/');
    byFile.set(pkg, (byFile.get(pkg) ?? 0) + hits);
  }
  const seconds = (p.endTime - p.startTime) / 1e6;
  console.log(`${total} samples over ${seconds.toFixed(1)} s`);
  const show = (title: string, m: Map<string, number>, k: number) => {
    console.log(title);
    for (const [name, hits] of [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, k)) console.log(`  ${((hits / total) * 100).toFixed(1).padStart(5)}%  ${name}`);
  };
  show('self time by package/file:', byFile, 15);
  show('self time by function:', byFn, 25);
}

const [a, b, c] = process.argv.slice(2);
if (a === '--summary') summary(JSON.parse(readFileSync(b!, 'utf8')) as Profile);
else await record(Number(a), Number(b), c!);
