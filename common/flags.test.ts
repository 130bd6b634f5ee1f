import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  COMMON_OPTIONS, FlagError, InfoRequested, METRICS_PORT_RENAMED, bareBoolFlags, bindAddress, boolFlag, durationSeconds, logFormat, logLevel, parseFlags,
} from './flags.ts';
import { VERSION } from './version.ts';

const parse = (args: string[]) => parseFlags('usage: x', { args, options: { ...COMMON_OPTIONS, name: { type: 'string' } } });

describe('parseFlags (R51)', () => {
  for (const args of [['--help'], ['-h'], ['--name', 'n', '--help'], ['--bogus', '--help']]) {
    it(`${args.join(' ')}: the usage, asked for (not an error)`, () => {
      assert.throws(() => parse(args), (err: unknown) => err instanceof InfoRequested && err.message === 'usage: x');
    });
  }

  it('--version: the version and the Node.js release', () => {
    assert.throws(() => parse(['--version']), (err: unknown) =>
      err instanceof InfoRequested && err.message.includes(`sidecar-terminator ${VERSION} (`) && err.message.includes(`node ${process.version}`));
  });

  it('after `--`, --help is not a flag', () => {
    assert.throws(() => parse(['--', '--help']), (err: unknown) => !(err instanceof InfoRequested) && /positional/.test((err as Error).message));
  });

  it('an unknown flag is a bad flag, with the usage', () => {
    assert.throws(() => parse(['--bogus']), (err: unknown) => err instanceof FlagError && /Unknown option '--bogus'\nusage: x$/.test(err.message));
  });

  for (const args of [['-v', '4'], ['-v4'], ['-v=4'], ['--v', '4'], ['--v=4']]) {
    it(`${args.join(' ')}: klog's -v, in every form pflag takes`, () => assert.equal(parse(args).values.v, '4'));
  }
  it('after `--`, -v=4 is left as it is', () => {
    assert.deepEqual(parseFlags('usage: x', { args: ['--', '-v=4'], options: COMMON_OPTIONS, allowPositionals: true }).positionals, ['-v=4']);
  });
});

describe('renamed flags: the former name taken for one release, with a deprecation line', () => {
  const renamed = [METRICS_PORT_RENAMED, { old: 'lease-name', current: 'leader-elect-resource-name' }];
  const options = { 'metrics-bind-address': { type: 'string', default: ':9440' }, 'leader-elect-resource-name': { type: 'string', default: 'l' } } as const;
  const parseRenamed = (args: string[]) => parseFlags('usage: x', { args, options, strict: true }, renamed);
  const cases: [string[], Record<string, string>, string[]][] = [
    [[], { 'metrics-bind-address': ':9440', 'leader-elect-resource-name': 'l' }, []],
    [['--metrics-bind-address=127.0.0.1:9550'], { 'metrics-bind-address': '127.0.0.1:9550', 'leader-elect-resource-name': 'l' }, []],
    [['--metrics-port', '9550'], { 'metrics-bind-address': ':9550', 'leader-elect-resource-name': 'l' },
      ['--metrics-port is deprecated and will be removed in the next release: use --metrics-bind-address=:9550']],
    [['--lease-name=x', '--metrics-port=1', '--lease-name=y'], { 'metrics-bind-address': ':1', 'leader-elect-resource-name': 'y' }, [
      '--metrics-port is deprecated and will be removed in the next release: use --metrics-bind-address=:1',
      '--lease-name is deprecated and will be removed in the next release: use --leader-elect-resource-name=y',
    ]],
  ];
  for (const [args, values, deprecations] of cases) {
    it(`${args.join(' ') || 'no flags'}: ${deprecations.length} deprecation line(s)`, () => {
      const parsed = parseRenamed(args);
      assert.deepEqual({ ...parsed.values }, values);
      assert.deepEqual(parsed.deprecations, deprecations);
    });
  }
  it('refuses a flag given under both names, as a bad flag', () => {
    assert.throws(() => parseRenamed(['--metrics-port=1', '--metrics-bind-address=:2']),
      (err: unknown) => err instanceof FlagError && err.message === '--metrics-port is the former name of --metrics-bind-address: give --metrics-bind-address alone');
  });
});

describe('logLevel: --log-level, or klog\'s -v (R51)', () => {
  const cases: [{ 'log-level'?: string; v?: string }, NodeJS.ProcessEnv, string][] = [
    [{}, {}, 'info'],
    [{}, { LOG_LEVEL: '' }, 'info'],
    [{}, { LOG_LEVEL: 'debug' }, 'debug'],
    [{ 'log-level': 'warn' }, { LOG_LEVEL: 'debug' }, 'warn'],
    [{ 'log-level': 'ERROR' }, {}, 'error'],
    [{ v: '0' }, {}, 'info'],
    [{ v: '2' }, {}, 'info'],
    [{ v: '3' }, { LOG_LEVEL: 'error' }, 'info'],
    [{ v: '4' }, {}, 'debug'],
    [{ v: '10' }, {}, 'debug'],
  ];
  for (const [flags, env, want] of cases) {
    it(`${JSON.stringify(flags)} with LOG_LEVEL=${env.LOG_LEVEL}: ${want}`, () => assert.equal(logLevel(flags, env), want));
  }
  const refused: [{ 'log-level'?: string; v?: string }, NodeJS.ProcessEnv, RegExp][] = [
    [{ 'log-level': 'loud' }, {}, /--log-level must be one of error, warn, info, http, verbose, debug, silly, got "loud"/],
    [{}, { LOG_LEVEL: 'trace' }, /got "trace"/],
    [{ v: '-1' }, {}, /-v must be a whole number from 0, got "-1"/],
    [{ v: 'high' }, {}, /-v must be a whole number from 0, got "high"/],
    [{ v: '' }, {}, /-v must be a whole number from 0, got ""/],
    [{ v: '4', 'log-level': 'info' }, {}, /give --log-level or -v, not both/],
  ];
  for (const [flags, env, message] of refused) {
    it(`refuses ${JSON.stringify(flags)}${env.LOG_LEVEL ? ` with LOG_LEVEL=${env.LOG_LEVEL}` : ''}, as a bad flag`, () =>
      assert.throws(() => logLevel(flags, env), (err: unknown) => err instanceof FlagError && message.test(err.message)));
  }
});

describe('logFormat', () => {
  for (const format of ['json', 'text']) it(`takes ${format}`, () => assert.equal(logFormat(format), format));
  for (const format of ['', 'JSON', 'logfmt']) {
    it(`refuses ${JSON.stringify(format)}`, () => assert.throws(() => logFormat(format), (err: unknown) => err instanceof FlagError && /--log-format must be one of json, text/.test(err.message)));
  }
});

describe('bindAddress: controller-runtime\'s [HOST]:PORT', () => {
  const taken: [string, { host: string | undefined; port: number }][] = [
    [':9440', { host: undefined, port: 9440 }],
    ['0.0.0.0:9441', { host: '0.0.0.0', port: 9441 }],
    ['127.0.0.1:1', { host: '127.0.0.1', port: 1 }],
    ['localhost:65535', { host: 'localhost', port: 65535 }],
    ['[::1]:9440', { host: '::1', port: 9440 }],
    ['[::]:9440', { host: '::', port: 9440 }],
  ];
  for (const [value, want] of taken) it(`${value}: ${JSON.stringify(want)}`, () => assert.deepEqual(bindAddress('metrics-bind-address', value), want));
  for (const value of ['9440', ':0', ':65536', ':', '', 'host:', '::1:9440', 'a b:1', ':9440 ', ':-1']) {
    it(`refuses ${JSON.stringify(value)}`, () => assert.throws(() => bindAddress('metrics-bind-address', value),
      (err: unknown) => err instanceof FlagError && err.message.startsWith('--metrics-bind-address must be [HOST]:PORT with a port from 1 to 65535')));
  }
  it('refuses 0 (no metrics server): the probes ask the same port', () => {
    assert.throws(() => bindAddress('metrics-bind-address', '0'), (err: unknown) => err instanceof FlagError && /--metrics-bind-address=0 is refused: \/healthz and \/readyz/.test(err.message));
  });
});

describe('durationSeconds: a Go duration', () => {
  const taken: [string, number][] = [['15s', 15], ['2s', 2], ['1m30s', 90], ['1h', 3600], ['500ms', 0.5], ['1.5s', 1.5], ['.5s', 0.5], ['1m0.5s', 60.5], ['2000000us', 2]];
  for (const [value, want] of taken) it(`${value}: ${want} s`, () => assert.equal(durationSeconds('leader-elect-lease-duration', value), want));
  for (const value of ['', '15', '0s', '0', '-1s', '1d', '15 s', 's', '1m 30s', '15sec']) {
    it(`refuses ${JSON.stringify(value)}`, () => assert.throws(() => durationSeconds('leader-elect-lease-duration', value),
      (err: unknown) => err instanceof FlagError && err.message === `--leader-elect-lease-duration must be a positive duration (e.g. 15s, 1m30s, 500ms), got ${JSON.stringify(value)}`));
  }
});

describe('boolean flags as client-go takes them (R51)', () => {
  const cases: [string[], string[]][] = [
    [['--leader-elect'], ['--leader-elect=true']],
    [['--leader-elect', '--workers', '2'], ['--leader-elect=true', '--workers', '2']],
    [['--leader-elect=false'], ['--leader-elect=false']],
    [['--leader-elect', 'false'], ['--leader-elect', 'false']],
    [['--leader-elect', 'F'], ['--leader-elect', 'F']],
    [['--leader-elect', 'toString'], ['--leader-elect=true', 'toString']],
    [['--', '--leader-elect'], ['--', '--leader-elect']],
    [['--leader-elect', '--', 'false'], ['--leader-elect=true', '--', 'false']],
  ];
  for (const [args, want] of cases) {
    it(`${args.join(' ')} → ${want.join(' ')}`, () => assert.deepEqual(bareBoolFlags(args, ['leader-elect']), want));
  }
  for (const [value, want] of [['true', true], ['1', true], ['t', true], ['TRUE', true], ['True', true], ['false', false], ['0', false], ['f', false], ['FALSE', false]] as const) {
    it(`${value}: ${want}`, () => assert.equal(boolFlag('leader-elect', value), want));
  }
  for (const value of ['', 'yes', 'on', 'tRuE', 'toString', '__proto__']) {
    it(`refuses ${JSON.stringify(value)}`, () => assert.throws(() => boolFlag('leader-elect', value), (err: unknown) => err instanceof FlagError && /--leader-elect must be true or false/.test(err.message)));
  }
});
