// Command-line flags of both programs: node's parseArgs, with the usage in its errors, the flags
// both share (--log-level, -v, --log-format, --help, --version), client-go's boolean forms, former
// flag names taken for one release, and the checks of values, in client-go's and
// controller-runtime's shapes where they have one (bind addresses, durations).
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { versionText } from './version.ts';

/** The levels --log-level takes (winston's npm levels), most severe first. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The formats --log-format takes: JSON lines for a log pipeline, text lines for a terminal. */
export const LOG_FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** klog's -v from which debug messages are logged (klog's convention: 4 is debug). */
const DEBUG_VERBOSITY = 4;

/** Options every program takes; spread into its parseFlags options. */
export const COMMON_OPTIONS = {
  'log-level': { type: 'string' },
  v: { type: 'string', short: 'v' },
  'log-format': { type: 'string', default: 'json' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

/** The usage lines of COMMON_OPTIONS, appended to each program's own. */
export const COMMON_USAGE = `  --log-level LEVEL                 ${LOG_LEVELS.join(', ')} (default: env LOG_LEVEL, else info)
  --v N, -v N                       klog's verbosity, instead of --log-level: 0 to ${DEBUG_VERBOSITY - 1} info, ${DEBUG_VERBOSITY} and more debug
  --log-format FORMAT               json (one object a line; the default) or text (one readable line an entry)
  --help, -h                        print this and exit
  --version                         print the version and exit`;

/**
 * Not a failure: the user asked for the usage or the version. main.ts prints `message` on stdout
 * and exits 0.
 */
export class InfoRequested extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InfoRequested';
  }
}

/** Flags the program cannot run with: main.ts prints the message and exits EXIT_BAD_FLAGS. */
export class FlagError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'FlagError';
  }
}

/** A flag's former name, still taken for one release: its value goes to the flag that replaced it. */
export interface RenamedFlag {
  old: string;
  current: string;
  /** The current flag's value for a value of the old one (default: the same value). */
  convert?: (oldValue: string) => string;
}

/** --metrics-port N, taken as controller-runtime's --metrics-bind-address=:N. */
export const METRICS_PORT_RENAMED: RenamedFlag = { old: 'metrics-port', current: 'metrics-bind-address', convert: (port) => `:${port}` };

type ParsedFlags<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>> & {
  /** One line for each renamed flag given, naming its replacement: the program logs them at start-up. */
  deprecations: string[];
};

/**
 * parseArgs, with the usage appended to its errors (an unknown flag, a missing value), InfoRequested
 * for `--help` (the usage) or `--version` whatever the other flags, and the values of `renamed`
 * flags moved to their current names.
 */
export function parseFlags<T extends ParseArgsConfig>(usage: string, config: T, renamed: readonly RenamedFlag[] = []): ParsedFlags<T> {
  const args = config.args ?? [];
  // Asked for help, the user gets it even beside a wrong flag; flags after `--` are not flags.
  const end = args.includes('--') ? args.indexOf('--') : args.length;
  const flags = args.slice(0, end);
  if (flags.includes('--help') || flags.includes('-h')) throw new InfoRequested(usage);
  if (flags.includes('--version')) throw new InfoRequested(versionText());
  let parsed;
  try {
    parsed = parseArgs({
      ...config,
      // pflag's `-v=4`: parseArgs would read the value as "=4".
      args: args.map((arg, i) => (i < end ? arg.replace(/^(-[a-zA-Z])=/, '$1') : arg)),
      options: { ...config.options, ...Object.fromEntries(renamed.map((r) => [r.old, { type: 'string' as const }])) },
      tokens: true,
    });
  } catch (err) {
    throw new FlagError(`${err instanceof Error ? err.message : String(err)}\n${usage}`, { cause: err });
  }
  const { tokens, ...result } = parsed;
  const values = result.values as Record<string, unknown>;
  const given = new Set((tokens ?? []).flatMap((t) => (t.kind === 'option' ? [t.name] : [])));
  const deprecations: string[] = [];
  for (const { old, current, convert = (value: string) => value } of renamed) {
    if (!given.has(old)) continue;
    if (given.has(current)) throw new FlagError(`--${old} is the former name of --${current}: give --${current} alone`);
    values[current] = convert(String(values[old]));
    delete values[old];
    deprecations.push(`--${old} is deprecated and will be removed in the next release: use --${current}=${String(values[current])}`);
  }
  return { ...(result as ReturnType<typeof parseArgs<T>>), deprecations };
}

/**
 * The level from --log-level, else from klog's -v, else env LOG_LEVEL, else info; anything else,
 * or both flags, is refused.
 */
export function logLevel(flags: { 'log-level'?: string; v?: string }, env: NodeJS.ProcessEnv): LogLevel {
  if (flags['log-level'] !== undefined && flags.v !== undefined) throw new FlagError('give --log-level or -v, not both');
  if (flags.v !== undefined) return verbosityLevel(flags.v);
  const value = flags['log-level'] ?? (env.LOG_LEVEL || 'info');
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (!level) throw new FlagError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`);
  return level;
}

/** klog's -v N as a winston level: klog's 0 to 3 (steady state, more or less chatty) are all info here. */
function verbosityLevel(value: string): LogLevel {
  const n = value.trim() === '' ? NaN : Number(value);
  if (!Number.isInteger(n) || n < 0) throw new FlagError(`-v must be a whole number from 0, got ${JSON.stringify(value)}`);
  return n >= DEBUG_VERBOSITY ? 'debug' : 'info';
}

export function logFormat(value: string): LogFormat {
  const format = LOG_FORMATS.find((f) => f === value);
  if (!format) throw new FlagError(`--log-format must be one of ${LOG_FORMATS.join(', ')}, got ${JSON.stringify(value)}`);
  return format;
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
  if (parsed === undefined) throw new FlagError(`--${flag} must be true or false (or 1, t, TRUE, 0, f, FALSE), got ${JSON.stringify(value)}`);
  return parsed;
}

export function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new FlagError(`--${flag} must be a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}

/** A whole number within min..max (the caller's bounds: for a request field, the CRD's). */
export function intInRange(flag: string, value: string, min: number, max: number, why?: string): number {
  const n = value.trim() === '' ? NaN : Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new FlagError(`--${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}${why ? `; ${why}` : ''}`);
  }
  return n;
}

/** Where a server listens: every interface when `host` is undefined. */
export interface BindAddress {
  host: string | undefined;
  port: number;
}

/**
 * controller-runtime's bind address: `[HOST]:PORT`, as `:9440` (every interface), `127.0.0.1:9440`
 * or `[::1]:9440`. Its `0` (no metrics server) is refused: the probes' /healthz and /readyz are
 * served on the same port.
 */
export function bindAddress(flag: string, value: string): BindAddress {
  if (value === '0') {
    throw new FlagError(`--${flag}=0 is refused: /healthz and /readyz, which the liveness and readiness probes ask, are served on the same port`);
  }
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]]*)):(\d+)$/.exec(value);
  const port = Number(m?.[3]);
  if (!m || !(port >= 1 && port <= 65535)) {
    throw new FlagError(`--${flag} must be [HOST]:PORT with a port from 1 to 65535 (e.g. :9440, 127.0.0.1:9440, [::1]:9440), got ${JSON.stringify(value)}`);
  }
  return { host: (m[1] ?? m[2]) || undefined, port };
}

/** The units of a Go duration, in seconds. */
const DURATION_UNITS: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, μs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/** A positive Go duration (time.ParseDuration's `15s`, `1m30s`, `500ms`, as pflag takes it), in seconds. */
export function durationSeconds(flag: string, value: string): number {
  const parts = [...value.matchAll(/(\d+(?:\.\d*)?|\.\d+)([a-zµμ]+)/g)];
  const seconds = parts.reduce((sum, [, n, unit]) => sum + Number(n) * (DURATION_UNITS[unit!] ?? NaN), 0);
  if (parts.map((p) => p[0]).join('') !== value || !(seconds > 0)) {
    throw new FlagError(`--${flag} must be a positive duration (e.g. 15s, 1m30s, 500ms), got ${JSON.stringify(value)}`);
  }
  return seconds;
}
