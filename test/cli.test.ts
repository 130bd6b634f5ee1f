// The program as a user runs it (`node main.ts ...`): --help and --version print to stdout and exit
// 0, for the program and each of its roles; a wrong flag is an error on stderr, exit 2; a start that
// fails, exit 1.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../common/version.ts';

const MAIN = fileURLToPath(new URL('../main.ts', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH } });

describe('sidecar-terminator on the command line (R51)', () => {
  for (const [args, usage] of [
    [['-h'], /^usage: sidecar-terminator agent\|controller/],
    [['agent', '--help'], /^usage: sidecar-terminator agent \[flags\][\s\S]*--node-name[\s\S]*--log-level/],
    [['controller', '--help'], /^usage: sidecar-terminator controller \[flags\][\s\S]*--leader-elect[\s\S]*--log-level/],
  ] as const) {
    it(`${args.join(' ')}: the usage on stdout, exit 0`, () => {
      const result = run(...args);
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, usage);
      assert.equal(result.stderr, '');
    });
  }

  // Each run loads the whole program (~2 s): the parsers' own tests cover the rest.
  for (const args of [['agent', '--version']]) {
    it(`${args.join(' ')}: the version on stdout, exit 0`, () => {
      const result = run(...args);
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, new RegExp(`^sidecar-terminator ${VERSION.replaceAll('.', '\\.')} \\(.*node v\\d+`));
    });
  }

  for (const [args, error] of [
    [['nodes'], /^unknown role "nodes"/],
    [['controller', '--leader-elect=maybe'], /--leader-elect must be true or false/],
    [['controller', '--metrics-bind-address=0'], /--metrics-bind-address=0 is refused/],
    [[], /^usage: sidecar-terminator agent\|controller/],
  ] as const) {
    it(`${args.join(' ') || 'no arguments'}: an error on stderr, exit 2`, () => {
      const result = run(...args);
      assert.equal(result.status, 2);
      assert.match(result.stderr, error);
      assert.equal(result.stdout, '');
    });
  }

  it('a start that fails (a kubeconfig that is not there): exit 1, after the deprecation line of a former flag name, in the text format', () => {
    const result = run('agent', '--node-name=n', '--metrics-port=9999', '--log-format=text', '--kubeconfig=/nonexistent/kubeconfig');
    assert.equal(result.status, 1, result.stderr);
    assert.match(result.stdout, /^\S+Z WARN {2}--metrics-port is deprecated and will be removed in the next release: use --metrics-bind-address=:9999 node=n component=agent\n$/);
    assert.match(result.stderr, /ENOENT.*\/nonexistent\/kubeconfig/);
  });
});
