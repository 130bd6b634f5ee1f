// What an answer too large to parse still says of itself: which object it carries and where its
// list goes on. A Pod with a megabyte of `<` in its env is served as six (JSON escapes it as
// `\u003c`), over the client's answer cap, and a stream that gave up on it would stop at it for good.
// So the client reads such an answer through, holding none of it: this scanner walks the JSON as it
// arrives, chunk by chunk, and keeps only a few short strings at the paths it was asked for
// (`object.metadata.name`, `metadata.continue`, ...). Field order does not matter: a custom
// resource is served with its keys sorted (metadata after the annotations, a list's metadata after
// its items), a built-in type in its struct's order.
import type { UnreadableObject } from './api.ts';

/** The longest string value kept: names, versions and continue tokens are all far shorter. */
const MAX_KEPT_CHARS = 4096;

interface Frame {
  array: boolean;
  /** The key whose value is being read (objects), or the element's index (arrays). */
  key: string;
  index: number;
  wantKey: boolean;
}

/** Where a string inside a JSON string ends or escapes: the only characters a string's scan stops at. */
const STRING_STOP = /["\\]/g;

export class AnswerScanner {
  readonly #wanted: ReadonlySet<string>;
  readonly #frames: Frame[] = [];
  /** Inside a string: its raw text so far (kept only when wanted), and whether a backslash is pending. */
  #inString = false;
  #escaped = false;
  #raw = '';
  #keep = false;
  #isKey = false;
  #tooLong = false;
  readonly #found = new Map<string, string>();

  /** `wanted`: dotted paths of string values to keep, array elements by index (`items.0.metadata.name`). */
  constructor(wanted: Iterable<string>) {
    this.#wanted = new Set(wanted);
  }

  /** The kept string values, by path. */
  get found(): ReadonlyMap<string, string> {
    return this.#found;
  }

  /** Whether every object and array opened so far was closed: the answer was read to its end. */
  get closed(): boolean {
    return this.#frames.length === 0 && !this.#inString;
  }

  feed(chunk: string): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.#inString) {
        i = this.#readString(chunk, i);
        continue;
      }
      const c = chunk[i++];
      if (c === '"') this.#openString();
      else if (c === '{' || c === '[') this.#frames.push({ array: c === '[', key: '', index: 0, wantKey: c === '{' });
      else if (c === '}' || c === ']') this.#frames.pop();
      else if (c === ',') {
        const top = this.#frames.at(-1);
        if (top?.array) top.index++;
        else if (top) top.wantKey = true;
      }
      // ':', whitespace, numbers, true/false/null: nothing to keep.
    }
  }

  #openString(): void {
    const top = this.#frames.at(-1);
    this.#isKey = top !== undefined && !top.array && top.wantKey;
    this.#keep = this.#isKey || this.#wanted.has(this.#path());
    this.#inString = true;
    this.#escaped = false;
    this.#raw = '';
    this.#tooLong = false;
  }

  /** Reads a string's text from `i` to its closing quote (or the chunk's end); returns where it stopped. */
  #readString(chunk: string, i: number): number {
    if (!this.#keep) return this.#skipString(chunk, i);
    if (this.#escaped) {
      this.#escaped = false;
      this.#append(chunk[i]!);
      return i + 1;
    }
    STRING_STOP.lastIndex = i;
    const stop = STRING_STOP.exec(chunk);
    if (!stop) {
      this.#append(chunk.slice(i));
      return chunk.length;
    }
    this.#append(chunk.slice(i, stop.index));
    if (stop[0] === '\\') {
      this.#escaped = true;
      this.#append('\\');
      return stop.index + 1;
    }
    this.#closeString();
    return stop.index + 1;
  }

  /**
   * A string nobody asked for goes by at the speed of indexOf: from quote to quote, a quote after an
   * odd run of backslashes being part of the text (`\u003c` six bytes at a time would be slow).
   */
  #skipString(chunk: string, i: number): number {
    let from = i;
    if (this.#escaped) {
      this.#escaped = false;
      from = i + 1;
    }
    for (;;) {
      const quote = chunk.indexOf('"', from);
      if (quote < 0) {
        this.#escaped = backslashesBefore(chunk, chunk.length, from) % 2 === 1;
        return chunk.length;
      }
      if (backslashesBefore(chunk, quote, from) % 2 === 0) {
        this.#closeString();
        return quote + 1;
      }
      from = quote + 1;
    }
  }

  #append(text: string): void {
    if (!this.#keep || this.#tooLong) return;
    if (this.#raw.length + text.length > MAX_KEPT_CHARS) {
      this.#tooLong = true;
      this.#raw = '';
    } else {
      this.#raw += text;
    }
  }

  #closeString(): void {
    this.#inString = false;
    const value = this.#keep && !this.#tooLong ? (JSON.parse(`"${this.#raw}"`) as string) : undefined;
    this.#raw = '';
    const top = this.#frames.at(-1);
    if (this.#isKey && top) {
      // A key too long to keep is no key anyone asked for.
      top.key = value ?? '\0';
      top.wantKey = false;
    } else if (value !== undefined) {
      this.#found.set(this.#path(), value);
    }
  }

  #path(): string {
    return this.#frames.map((f) => (f.array ? String(f.index) : f.key)).join('.');
  }
}

/** How many backslashes come right before `end`, counting back no further than `start`. */
function backslashesBefore(text: string, end: number, start: number): number {
  let n = 0;
  while (end - n > start && text[end - n - 1] === '\\') n++;
  return n;
}

const IDENTITY_FIELDS = ['namespace', 'name', 'uid', 'resourceVersion'] as const;

/** The paths of an object's identity under `prefix` (`object` in a watch event, `items.0` in a list page). */
export function identityPaths(prefix: string): string[] {
  return IDENTITY_FIELDS.map((field) => `${prefix}.metadata.${field}`);
}

/** The identity found under `prefix`. */
export function identityFound(found: ReadonlyMap<string, string>, prefix: string): UnreadableObject {
  const out: UnreadableObject = {};
  for (const field of IDENTITY_FIELDS) {
    const value = found.get(`${prefix}.metadata.${field}`);
    if (value !== undefined) out[field] = value;
  }
  return out;
}
