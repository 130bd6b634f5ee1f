import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { COMMON_OPTIONS, InfoRequested, bareBoolFlags, boolFlag, logLevel, parseFlags } from './flags.ts';
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

  it('an unknown flag is an error with the usage', () => {
    assert.throws(() => parse(['--bogus']), (err: unknown) => !(err instanceof InfoRequested) && /Unknown option '--bogus'\nusage: x$/.test((err as Error).message));
  });
});

describe('logLevel (R51)', () => {
  const cases: [string | undefined, NodeJS.ProcessEnv, string][] = [
    [undefined, {}, 'info'],
    [undefined, { LOG_LEVEL: '' }, 'info'],
    [undefined, { LOG_LEVEL: 'debug' }, 'debug'],
    ['warn', { LOG_LEVEL: 'debug' }, 'warn'],
    ['ERROR', {}, 'error'],
  ];
  for (const [flag, env, want] of cases) {
    it(`--log-level ${flag} with LOG_LEVEL=${env.LOG_LEVEL}: ${want}`, () => assert.equal(logLevel(flag, env), want));
  }
  it('refuses a level winston does not have, naming the ones it has', () => {
    assert.throws(() => logLevel('loud', {}), /--log-level must be one of error, warn, info, http, verbose, debug, silly, got "loud"/);
    assert.throws(() => logLevel(undefined, { LOG_LEVEL: 'trace' }), /got "trace"/);
  });
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
    it(`refuses ${JSON.stringify(value)}`, () => assert.throws(() => boolFlag('leader-elect', value), /--leader-elect must be true or false/));
  }
});
