// A container's log lines with the runtime's own timestamps (nanosecond RFC 3339, taken as each line
// was written): when a process in the container saw something, to the millisecond, from its own words.
import { kubectl } from './kubectl.ts';

export interface LogLine {
  atMs: number;
  text: string;
}

/** The container's log (its last run), each line with the time the runtime received it. */
export function timestampedLogs(namespace: string, pod: string, container: string): LogLine[] {
  const out = kubectl('-n', namespace, 'logs', pod, '-c', container, '--timestamps');
  return out.split('\n').filter(Boolean).map((line) => {
    const space = line.indexOf(' ');
    return { atMs: Date.parse(line.slice(0, space)), text: line.slice(space + 1) };
  });
}

/** The first line matching `pattern`, or undefined. */
export function firstLine(lines: LogLine[], pattern: RegExp): LogLine | undefined {
  return lines.find((l) => pattern.test(l.text));
}

/** For an assertion message: the lines, each with its time. */
export function showLines(lines: LogLine[]): string {
  return lines.map((l) => `${new Date(l.atMs).toISOString()} ${l.text}`).join('\n');
}
