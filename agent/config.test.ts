import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EXIT_BAD_FLAGS, exitCodeFor } from '../common/exit-codes.ts';
import { FlagError, InfoRequested } from '../common/flags.ts';
import { parseAgentConfig } from './config.ts';

describe('parseAgentConfig', () => {
  it('takes the node name from NODE_NAME and defaults the rest', () => {
    assert.deepEqual(parseAgentConfig([], { NODE_NAME: 'n1' }), {
      nodeName: 'n1', namespace: 'default', hostRunDir: '/var/run', runtimeSocket: undefined, metricsHost: undefined, metricsPort: 9440, workers: 32, resyncSeconds: 30,
      kubeconfig: undefined, requestDeadlineSeconds: 300, requestTTLSeconds: 600, prestopHttpHooks: true, logLevel: 'info', logFormat: 'json', deprecations: [],
      kubeApiQps: 100, kubeApiBurst: 500,
    });
  });
  it('takes its namespace from POD_NAMESPACE', () => {
    assert.equal(parseAgentConfig([], { NODE_NAME: 'n1', POD_NAMESPACE: 'ops' }).namespace, 'ops');
  });
  it('refuses to start without a node name, as a bad flag', () => {
    assert.throws(() => parseAgentConfig([], {}), (err: unknown) => err instanceof FlagError && /NODE_NAME/.test(err.message));
  });
  it('rejects a bad number with the flag named', () => {
    assert.throws(() => parseAgentConfig(['--workers', 'many'], { NODE_NAME: 'n1' }), /--workers must be a positive whole number/);
  });
  it('rejects unknown flags, with the usage', () => {
    assert.throws(() => parseAgentConfig(['--nope'], { NODE_NAME: 'n1' }), /Unknown option '--nope'\nusage: sidecar-terminator agent/);
  });
  it('flags win over the environment', () => {
    const c = parseAgentConfig(['--node-name', 'n2', '--runtime-socket', '/run/x.sock', '--kubeconfig', '/k'], { NODE_NAME: 'n1', KUBECONFIG: '/e' });
    assert.equal(c.nodeName, 'n2');
    assert.equal(c.runtimeSocket, '/run/x.sock');
    assert.equal(c.kubeconfig, '/k');
  });
  it('takes the deadline and TTL of the requests it creates, within the CRD\'s bounds', () => {
    const c = parseAgentConfig(['--request-deadline-seconds', '3', '--request-ttl-seconds', '301'], { NODE_NAME: 'n1' });
    assert.equal(c.requestDeadlineSeconds, 3);
    assert.equal(c.requestTTLSeconds, 301);
    const max = parseAgentConfig(['--request-deadline-seconds', '86400', '--request-ttl-seconds', '604800'], { NODE_NAME: 'n1' });
    assert.equal(max.requestDeadlineSeconds, 86400);
    assert.equal(max.requestTTLSeconds, 604800);
  });
  const bad: [string, string, RegExp][] = [
    ['--request-deadline-seconds', '2', /--request-deadline-seconds must be a whole number from 3 to 86400, got "2"/],
    ['--request-deadline-seconds', '86401', /from 3 to 86400, got "86401"/],
    ['--request-deadline-seconds', '1.5', /from 3 to 86400, got "1.5"/],
    ['--request-deadline-seconds', '', /from 3 to 86400, got ""/],
    ['--request-ttl-seconds', '0', /--request-ttl-seconds must be a whole number from 301 to 604800, got "0"/],
    ['--request-ttl-seconds', '604801', /from 301 to 604800/],
    ['--request-ttl-seconds', 'soon', /from 301 to 604800, got "soon"/],
  ];
  for (const [flag, value, message] of bad) {
    it(`rejects ${flag} ${JSON.stringify(value)}`, () => {
      assert.throws(() => parseAgentConfig([`${flag}=${value}`], { NODE_NAME: 'n1' }), message);
    });
  }
  it('R38: --prestop-http-hooks: true by default; false (client-go\'s boolean forms) turns HTTP hooks off', () => {
    assert.equal(parseAgentConfig([], { NODE_NAME: 'n1' }).prestopHttpHooks, true);
    assert.equal(parseAgentConfig(['--prestop-http-hooks=false'], { NODE_NAME: 'n1' }).prestopHttpHooks, false);
    assert.equal(parseAgentConfig(['--prestop-http-hooks', 'f'], { NODE_NAME: 'n1' }).prestopHttpHooks, false);
    assert.equal(parseAgentConfig(['--prestop-http-hooks'], { NODE_NAME: 'n1' }).prestopHttpHooks, true);
    assert.throws(() => parseAgentConfig(['--prestop-http-hooks=off'], { NODE_NAME: 'n1' }), /--prestop-http-hooks must be true or false/);
  });
  it('lists the flags in its usage', () => {
    assert.throws(() => parseAgentConfig(['--help'], { NODE_NAME: 'n1' }), /--request-deadline-seconds N[\s\S]*--request-ttl-seconds N/);
  });
  it('takes --log-level, else LOG_LEVEL, else info', () => {
    assert.equal(parseAgentConfig([], { NODE_NAME: 'n1' }).logLevel, 'info');
    assert.equal(parseAgentConfig([], { NODE_NAME: 'n1', LOG_LEVEL: 'debug' }).logLevel, 'debug');
    assert.equal(parseAgentConfig(['--log-level=warn'], { NODE_NAME: 'n1', LOG_LEVEL: 'debug' }).logLevel, 'warn');
    assert.throws(() => parseAgentConfig(['--log-level', 'loud'], { NODE_NAME: 'n1' }), /--log-level must be one of/);
  });
  const metrics: [string[], { metricsHost: string | undefined; metricsPort: number; deprecations: string[] }][] = [
    [['--metrics-bind-address=:9550'], { metricsHost: undefined, metricsPort: 9550, deprecations: [] }],
    [['--metrics-bind-address', '127.0.0.1:9440'], { metricsHost: '127.0.0.1', metricsPort: 9440, deprecations: [] }],
    [['--metrics-bind-address=[::1]:9440'], { metricsHost: '::1', metricsPort: 9440, deprecations: [] }],
    [['--metrics-port', '9550'], { metricsHost: undefined, metricsPort: 9550,
      deprecations: ['--metrics-port is deprecated and will be removed in the next release: use --metrics-bind-address=:9550'] }],
  ];
  for (const [argv, want] of metrics) {
    it(`${argv.join(' ')}: metrics on ${want.metricsHost ?? 'every interface'}, port ${want.metricsPort}${want.deprecations.length ? ', with a deprecation line' : ''}`, () => {
      const { metricsHost, metricsPort, deprecations } = parseAgentConfig(argv, { NODE_NAME: 'n1' });
      assert.deepEqual({ metricsHost, metricsPort, deprecations }, want);
    });
  }
  const badFlags: [string[], RegExp][] = [
    [['--metrics-bind-address=0'], /--metrics-bind-address=0 is refused: \/healthz and \/readyz/],
    [['--metrics-bind-address=9440'], /--metrics-bind-address must be \[HOST\]:PORT/],
    [['--metrics-port=0'], /--metrics-bind-address must be \[HOST\]:PORT .*got ":0"/],
    [['--metrics-port=9440', '--metrics-bind-address=:9440'], /--metrics-port is the former name of --metrics-bind-address/],
    [['-v', '4', '--log-level=info'], /give --log-level or -v, not both/],
    [['--log-format=yaml'], /--log-format must be one of json, text/],
    [['--workers=0'], /--workers must be a positive whole number/],
    [['--nope'], /Unknown option '--nope'/],
  ];
  for (const [argv, message] of badFlags) {
    it(`${argv.join(' ')}: a bad flag, exit code ${EXIT_BAD_FLAGS}`, () => {
      assert.throws(() => parseAgentConfig(argv, { NODE_NAME: 'n1' }), (err: unknown) => message.test((err as Error).message) && exitCodeFor(err) === EXIT_BAD_FLAGS);
    });
  }
  it('takes -v N as klog does (4 and more: debug) and --log-format', () => {
    assert.equal(parseAgentConfig(['-v', '4'], { NODE_NAME: 'n1', LOG_LEVEL: 'warn' }).logLevel, 'debug');
    assert.equal(parseAgentConfig(['--v=2'], { NODE_NAME: 'n1' }).logLevel, 'info');
    assert.equal(parseAgentConfig(['--log-format=text'], { NODE_NAME: 'n1' }).logFormat, 'text');
  });
  it('an empty --runtime-socket (the chart\'s default) looks for one', () => {
    assert.equal(parseAgentConfig(['--runtime-socket='], { NODE_NAME: 'n1' }).runtimeSocket, undefined);
  });
  it('--help and --version are asked for, even without a node name', () => {
    assert.throws(() => parseAgentConfig(['--help'], {}), (err: unknown) => err instanceof InfoRequested && err.message.startsWith('usage: sidecar-terminator agent'));
    assert.throws(() => parseAgentConfig(['--version'], {}), (err: unknown) => err instanceof InfoRequested && err.message.startsWith('sidecar-terminator '));
  });
});
