// e2e/cluster/check-sources.sh against the real Go module proxy, with modules made unreachable the
// way the proxy drops them: GONOPROXY sends a module's lookups past the proxy, where this machine
// has no network, so it resolves as a module the proxy no longer serves would. Only the Kubernetes
// releases are checked (ST_CHECK_ONLY), both cases at once: each is a minute of module downloads.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRIPT = new URL('../e2e/cluster/check-sources.sh', import.meta.url).pathname;
const VERSIONS = readFileSync(new URL('../e2e/cluster/versions.env', import.meta.url), 'utf8');
const release = (name: string) => {
  const version = new RegExp(`^${name}=(v[\\d.]+)$`, 'm').exec(VERSIONS)?.[1];
  if (!version) throw new Error(`no ${name} in e2e/cluster/versions.env`);
  return version;
};
const inRegExp = (version: string) => version.replaceAll('.', '\\.');
const OLDEST = release('K8S_OLDEST');
const NEWEST = release('K8S_NEWEST');
const GO_PATH = `/usr/local/go/bin:${process.env.PATH}`;

/** Runs the check of the Kubernetes releases with HOME (where its build cache lives) and GONOPROXY set. */
function check(home: string, unreachable: string): Promise<{ status: number | null; output: string }> {
  const run = spawn('bash', [SCRIPT], {
    env: { ...process.env, PATH: GO_PATH, HOME: home, GONOPROXY: unreachable, ST_CHECK_ONLY: 'kubernetes' },
  });
  let output = '';
  run.stdout.on('data', (chunk: Buffer) => { output += chunk; });
  run.stderr.on('data', (chunk: Buffer) => { output += chunk; });
  return new Promise((resolve, reject) => {
    run.on('error', reject);
    run.on('close', (status) => resolve({ status, output }));
  });
}

/** A Go binary whose build info lists `module` as a dependency, as a cached kubelet built against it would. */
function binaryContaining(module: string, out: string) {
  const src = mkdtempSync(join(tmpdir(), 'st-fake-kubelet-'));
  try {
    mkdirSync(join(src, 'dep'));
    writeFileSync(join(src, 'dep/go.mod'), `module ${module}\n\ngo 1.22\n`);
    writeFileSync(join(src, 'dep/dep.go'), 'package dep\n\nconst Name = "dep"\n');
    writeFileSync(join(src, 'go.mod'), `module example.test/kubelet\n\ngo 1.22\n\nrequire ${module} v0.0.0\n\nreplace ${module} => ./dep\n`);
    writeFileSync(join(src, 'main.go'), `package main\n\nimport dep "${module}"\n\nfunc main() { println(dep.Name) }\n`);
    execFileSync('go', ['build', '-o', out, '.'], { cwd: src, env: { ...process.env, PATH: GO_PATH, GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' } });
  } finally {
    rmSync(src, { recursive: true, force: true });
  }
}

describe('check-sources.sh: what a fresh machine could no longer get fails the check, named', { concurrency: true }, () => {
  it('a module of a release\'s graph the proxy no longer serves fails that release, naming the module', async () => {
    const home = mkdtempSync(join(tmpdir(), 'st-check-home-'));
    try {
      const { status, output } = await check(home, 'github.com/spf13/cobra');
      assert.equal(status, 1, output);
      assert.match(output, new RegExp(`FAILED: Kubernetes ${inRegExp(OLDEST)}`));
      assert.match(output, /github\.com\/spf13\/cobra/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('an unserved staging module is stood in for, unless a cached build contains it: then a fresh machine could not build it', async () => {
    const home = mkdtempSync(join(tmpdir(), 'st-check-home-'));
    try {
      const bins = join(home, `.cache/sidecar-terminator/k8s-${OLDEST}/bin`);
      mkdirSync(bins, { recursive: true });
      binaryContaining('k8s.io/sample-controller', join(bins, 'kubelet'));
      const { status, output } = await check(home, 'k8s.io/sample-controller');
      assert.equal(status, 1, output);
      assert.match(output, new RegExp(`FAILED: Kubernetes ${inRegExp(OLDEST)}`));
      assert.match(output, /contain k8s\.io\/sample-controller, which the module proxy no longer serves/);
      // The newest release has no cached build here: the stand-in is taken, and its build decides.
      assert.match(output, new RegExp(`ok: Kubernetes ${inRegExp(NEWEST)}`));
      assert.match(output, /no k8s\.io\/sample-controller v0\.\d+\.x; an empty local module stands in for it/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
