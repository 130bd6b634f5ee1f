// Command-line flags of both programs: node's parseArgs, with the usage in its errors, the flags
// both share (--log-level, --help, --version), client-go's boolean forms, and the checks of numeric
// values.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { versionText } from './version.ts';

/** The levels --log-level takes (winston's npm levels), most severe first. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Options every program takes; spread into its parseFlags options. */
export const COMMON_OPTIONS = {
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

/** The usage lines of COMMON_OPTIONS, appended to each program's own. */
export const COMMON_USAGE = `  --log-level LEVEL                 ${LOG_LEVELS.join(', ')} (default: env LOG_LEVEL, else info)
  --help, -h                        print this and exit
  --version                         print the version and exit`;

/**
 * Not a failure: the user asked for the usage or the version. main.ts prints `message` on stdout
 * and exits 0 (an error goes to stderr with exit code 2).
 */
export class InfoRequested extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InfoRequested';
  }
}

/**
 * parseArgs, with the usage appended to its errors (an unknown flag, a missing value), and
 * InfoRequested for `--help` (the usage) or `--version`, whatever the other flags.
 */
export function parseFlags<T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  const args = config.args ?? [];
  // Asked for help, the user gets it even beside a wrong flag; flags after `--` are not flags.
  const flags = args.slice(0, args.includes('--') ? args.indexOf('--') : args.length);
  if (flags.includes('--help') || flags.includes('-h')) throw new InfoRequested(usage);
  if (flags.includes('--version')) throw new InfoRequested(versionText());
  try {
    return parseArgs(config);
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${usage}`, { cause: err });
  }
}

/** --log-level, else env LOG_LEVEL, else info; anything else is refused. */
export function logLevel(flag: string | undefined, env: NodeJS.ProcessEnv): LogLevel {
  const value = flag ?? (env.LOG_LEVEL || 'info');
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (!level) throw new Error(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`);
  return level;
}

/** The spellings Go's strconv.ParseBool takes, as client-go's programs (pflag) take them for a boolean flag. */
const GO_BOOLS: Record<string, boolean> = {
  1: true, t: true, T: true, true: true, TRUE: true, True: true,
  0: false, f: false, F: false, false: false, FALSE: false, False: false,
};

/**
 * Rewrites a boolean flag given alone (`--name`) to `--name=true`, so that parseArgs can take it as a
 * string option: `--name`, `--name=false` (client-go's forms) and `--name false` (this program's
 * earlier form) all parse. Declare the flag `{ type: 'string' }` and read it with boolFlag.
 */
export function bareBoolFlags(args: string[], names: string[]): string[] {
  const end = args.includes('--') ? args.indexOf('--') : args.length;
  return args.map((arg, i) => {
    const bare = i < end && names.some((name) => arg === `--${name}`);
    const valueFollows = i + 1 < end && Object.hasOwn(GO_BOOLS, args[i + 1]!);
    return bare && !valueFollows ? `${arg}=true` : arg;
  });
}

export function boolFlag(flag: string, value: string): boolean {
  const parsed = Object.hasOwn(GO_BOOLS, value) ? GO_BOOLS[value] : undefined;
  if (parsed === undefined) throw new Error(`--${flag} must be true or false (or 1, t, TRUE, 0, f, FALSE), got ${JSON.stringify(value)}`);
  return parsed;
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
