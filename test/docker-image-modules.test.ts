// test group: serial — it starts a private dockerd.
// The Docker path against the node_modules of the image the shipped Dockerfile builds: the integration
// tests of the Docker runtime (test/docker.test.ts, agent/runtime/docker.test.ts) run again with
// dockerode loaded from the image's /app (test/support/dockerode-from-image.ts), so the packages the
// image leaves out (scripts/runtime-modules.ts NEVER_LOADED) are proven never to load on that path.
// Needs the image: ST_IMAGE_ARCHIVE, a `docker save` archive of it, written by
// `bash e2e/images/build-dockerfile.sh DIR` (DIR/sidecar-terminator-docker.tar) or by `npm run release`.
// Without it the tests are skipped; with ST_REQUIRE_DOCKER_IMAGE=1 (CI) that is a failure.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './support/images.ts';
import { run } from './support/run.ts';
import { NEVER_LOADED, STAND_IN_VERSION } from '../scripts/runtime-modules.ts';

const ARCHIVE = process.env.ST_IMAGE_ARCHIVE;
if (!ARCHIVE && process.env.ST_REQUIRE_DOCKER_IMAGE === '1') {
  throw new Error('ST_REQUIRE_DOCKER_IMAGE=1 but ST_IMAGE_ARCHIVE is not set: build the image with e2e/images/build-dockerfile.sh');
}

/** Unpacks the image's file system from a `docker save` archive (its layers in order) into `dir`; returns its /app. */
async function unpackApp(archive: string, dir: string): Promise<string> {
  const saved = join(dir, 'saved');
  mkdirSync(saved);
  await run('tar', ['-xf', archive, '-C', saved]);
  const [manifest] = JSON.parse(readFileSync(join(saved, 'manifest.json'), 'utf8')) as { Layers: string[] }[];
  assert.ok(manifest, 'manifest.json names an image');
  const root = join(dir, 'root');
  mkdirSync(root);
  for (const layer of manifest.Layers) await run('tar', ['-xf', join(saved, layer), '-C', root]);
  rmSync(saved, { recursive: true, force: true });
  return join(root, 'app');
}

describe('the Docker path against the Dockerfile image\'s own node_modules', { skip: ARCHIVE ? false : 'ST_IMAGE_ARCHIVE not set (e2e/images/build-dockerfile.sh DIR)' }, () => {
  let dir: string;
  let app: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'st-image-modules-'));
    app = await unpackApp(ARCHIVE!, dir);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('holds dockerode, and stand-ins for the packages never loaded (ssh2, the second grpc-js)', () => {
    const version = (path: string) => (JSON.parse(readFileSync(join(app, 'node_modules', path, 'package.json'), 'utf8')) as { version: string }).version;
    assert.notEqual(version('dockerode'), STAND_IN_VERSION);
    for (const name of ['ssh2', '@grpc/grpc-js']) {
      assert.ok(Object.hasOwn(NEVER_LOADED, name));
      assert.equal(version(name), STAND_IN_VERSION, `${name} is a stand-in`);
    }
  });

  it('the Docker runtime\'s integration tests pass with dockerode from the image', async (t) => {
    const resolutions = join(dir, 'resolutions.log');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ST_IMAGE_APP: app,
      ST_IMAGE_RESOLUTIONS: resolutions,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${join(REPO_ROOT, 'test/support/dockerode-from-image.ts')}`.trim(),
    };
    // The nested test run reports on its own instead of to this one.
    delete env.NODE_TEST_CONTEXT;
    const { stdout } = await run(process.execPath, ['--test', '--test-reporter=spec', 'test/docker.test.ts', 'agent/runtime/docker.test.ts'],
      { cwd: REPO_ROOT, env, timeoutMs: 300_000 });
    t.diagnostic(stdout.split('\n').filter((line) => /^ℹ (tests|pass|fail|duration_ms)/.test(line)).join('; '));
    assert.match(stdout, /^ℹ fail 0$/m);
    const loaded = new Set(readFileSync(resolutions, 'utf8').split('\n').filter(Boolean));
    assert.deepEqual([...loaded], [`file://${app}/node_modules/dockerode/lib/docker.js`]);
  });

  it('an ssh:// DOCKER_HOST fails with an error that says why, and the process goes on', async () => {
    const script = [
      "const { default: Docker } = await import('dockerode');",
      "await new Docker().version().then(() => console.log('answered'), (e) => console.log('refused:', e.message));",
      "console.log('still running');",
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script],
      { cwd: app, env: { ...process.env, DOCKER_HOST: 'ssh://someone@127.0.0.1' } });
    assert.equal(stdout, 'refused: ssh2 is left out of the sidecar-terminator image: Docker over SSH (an ssh:// DOCKER_HOST) ' +
      'is not supported: the agent reaches the Docker Engine by its unix socket\nstill running\n');
  });
});
