import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InfoRequested } from '../common/flags.ts';
import { RELEASED_QUICK_EXIT_IMAGE } from '../rules/requests.ts';
import { CONTROLLER_USAGE, parseControllerConfig } from './config.ts';

describe('parseControllerConfig', () => {
  it('defaults', () => {
    const config = parseControllerConfig([], {});
    assert.equal(config.requestDeadlineSeconds, 300);
    assert.equal(config.requestTTLSeconds, 600);
    assert.equal(config.sidecarStartTimeoutSeconds, 120);
  });

  const accepted: Array<[string[], keyof ReturnType<typeof parseControllerConfig>, number]> = [
    [['--request-deadline-seconds', '3'], 'requestDeadlineSeconds', 3],
    [['--request-deadline-seconds', '86400'], 'requestDeadlineSeconds', 86_400],
    [['--request-ttl-seconds', '604800'], 'requestTTLSeconds', 604_800],
    [['--sidecar-start-timeout-seconds', '30'], 'sidecarStartTimeoutSeconds', 30],
    [['--sidecar-start-timeout-seconds', '86400'], 'sidecarStartTimeoutSeconds', 86_400],
    [['--kube-api-qps', '2.5'], 'kubeApiQps', 2.5],
    [['--kube-api-burst', '3'], 'kubeApiBurst', 3],
    [['--agentless-after-seconds', '0'], 'agentlessAfterSeconds', 0],
    [['--agentless-after-seconds', '3600'], 'agentlessAfterSeconds', 3600],
  ];
  for (const [argv, field, want] of accepted) {
    it(`accepts ${argv.join(' ')}`, () => assert.equal(parseControllerConfig(argv, {})[field], want));
  }

  it('nodes where no agent runs (R22): none named, a 120 s wait, the agent Pods by the manifests\' labels in its own namespace', () => {
    const config = parseControllerConfig([], { POD_NAMESPACE: 'ops' });
    assert.equal(config.agentlessNodeSelector, '');
    assert.equal(config.agentlessAfterSeconds, 120);
    assert.equal(config.agentPodSelector, 'app.kubernetes.io/name=sidecar-terminator,app.kubernetes.io/component=agent');
    assert.equal(config.agentNamespace, 'ops');
    assert.equal(parseControllerConfig(['--agentless-node-selector', ' pool=fargate '], {}).agentlessNodeSelector, 'pool=fargate');
  });

  it('the images swapped in where no agent runs (R22): the released quick-exit image by default, a list, or none', () => {
    assert.deepEqual(parseControllerConfig([], {}).agentlessSwapImages, [RELEASED_QUICK_EXIT_IMAGE]);
    assert.deepEqual(parseControllerConfig(['--agentless-swap-images', ' registry.example.com/qe , busybox:1.36,'], {}).agentlessSwapImages, ['registry.example.com/qe', 'busybox:1.36']);
    assert.deepEqual(parseControllerConfig(['--agentless-swap-images', ''], {}).agentlessSwapImages, []);
  });

  const refused: Array<[string[], RegExp]> = [
    [['--agentless-after-seconds', '3601'], /--agentless-after-seconds must be a whole number from 0 to 3600/],
    [['--agent-pod-selector', ' '], /--agent-pod-selector must not be empty/],
    [['--agentless-swap-images', 'a b'], /--agentless-swap-images: "a b" is not an image reference/],
    [['--agentless-swap-images', 'x'.repeat(1025)], /--agentless-swap-images: "x+" is not an image reference/],
    [['--request-deadline-seconds', '2'], /--request-deadline-seconds must be a whole number from 3 to 86400, got "2"/],
    [['--request-deadline-seconds', '86401'], /--request-deadline-seconds must be a whole number from 3 to 86400, got "86401"/],
    [['--request-deadline-seconds', '3000000'], /from 3 to 86400/],
    [['--request-ttl-seconds', '604801'], /--request-ttl-seconds must be a whole number from 1 to 604800/],
    [['--request-ttl-seconds', '0'], /--request-ttl-seconds must be a whole number from 1 to 604800/],
    [['--sidecar-start-timeout-seconds', '0'], /--sidecar-start-timeout-seconds must be a whole number from 1 to 86400/],
    [['--sidecar-start-timeout-seconds', '86401'], /--sidecar-start-timeout-seconds must be a whole number from 1 to 86400/],
    [['--sidecar-start-timeout-seconds', '1.5'], /whole number/],
  ];
  for (const [argv, error] of refused) {
    it(`refuses ${argv.join(' ')}`, () => assert.throws(() => parseControllerConfig(argv, {}), error));
  }

  it('the usage names the new flag and the bounds', () => {
    assert.match(CONTROLLER_USAGE, /--sidecar-start-timeout-seconds N .*\(default 120\)/s);
    assert.match(CONTROLLER_USAGE, /--request-deadline-seconds N .*3 to 86400/);
    assert.match(CONTROLLER_USAGE, /--request-ttl-seconds N .*at most 604800/);
  });
  const leaderElect: [string[], boolean][] = [
    [[], true],
    [['--leader-elect'], true],
    [['--leader-elect', '--workers', '2'], true],
    [['--leader-elect=false'], false],
    [['--leader-elect=true'], true],
    [['--leader-elect=0'], false],
    [['--leader-elect', 'false'], false],
    [['--leader-elect=FALSE', '--leader-elect'], true],
  ];
  for (const [argv, want] of leaderElect) {
    it(`${argv.join(' ') || 'no flag'}: leader election ${want ? 'on' : 'off'}`, () => assert.equal(parseControllerConfig(argv, {}).leaderElect, want));
  }
  it('refuses a --leader-elect that is not a boolean', () => {
    assert.throws(() => parseControllerConfig(['--leader-elect=maybe'], {}), /--leader-elect must be true or false/);
  });

  it('takes --log-level, else LOG_LEVEL, else info; --help is asked for', () => {
    assert.equal(parseControllerConfig([], {}).logLevel, 'info');
    assert.equal(parseControllerConfig([], { LOG_LEVEL: 'error' }).logLevel, 'error');
    assert.equal(parseControllerConfig(['--log-level', 'debug'], { LOG_LEVEL: 'error' }).logLevel, 'debug');
    assert.throws(() => parseControllerConfig(['--help'], {}), (err: unknown) => err instanceof InfoRequested && err.message === CONTROLLER_USAGE);
    assert.match(CONTROLLER_USAGE, /--log-level LEVEL[\s\S]*--help, -h[\s\S]*--version/);
  });
});
