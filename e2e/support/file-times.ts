// A node:test reporter that appends each test file's wall time to ST_E2E_TIMES_OUT, one line a file:
// `<release>\t<nodes>\t<file>\t<seconds>\t<pass|fail>` (e2e/run.sh sets the three variables;
// e2e/file-times.sh prints the lines). The runner reports a file's subprocess as a test named by
// its path, as given: its duration is the file's time, start to end, beside whatever ran with it.
import { appendFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';

interface TestEvent {
  type: string;
  data?: { file?: string; name?: string; details?: { duration_ms?: number; passed?: boolean } };
}

export default async function* fileTimes(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const lines: string[] = [];
  const release = process.env.ST_E2E_RELEASE ?? '';
  const nodes = process.env.ST_E2E_NODES ?? '1';
  for await (const { type, data } of source) {
    if (!data?.file) continue;
    if (type !== 'test:complete' || !data.name || resolve(data.name) !== resolve(data.file)) continue;
    const seconds = Math.round((data.details?.duration_ms ?? 0) / 1000);
    const result = data.details?.passed === false ? 'fail' : 'pass';
    lines.push(`${release}\t${nodes}\t${relative(process.cwd(), data.file)}\t${seconds}\t${result}\n`);
  }
  const out = process.env.ST_E2E_TIMES_OUT;
  if (out && lines.length > 0) appendFileSync(out, lines.join(''));
  yield '';
}
