// Command-line flags of both programs: node's parseArgs, with the usage in its errors, and the
// checks of numeric values.
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** parseArgs, with the usage appended to its errors (an unknown flag, `--help`, a missing value). */
export function parseFlags<T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${usage}`, { cause: err });
  }
}

export function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${flag} must be a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}

/** A whole number within min..max (the caller's bounds: for a request field, the CRD's). */
export function intInRange(flag: string, value: string, min: number, max: number): number {
  const n = value.trim() === '' ? NaN : Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`--${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return n;
}
