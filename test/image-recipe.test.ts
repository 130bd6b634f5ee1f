// The image recipe, without Docker or a registry: scripts/image.sh (its commands, checked with a
// stand-in docker that records them), scripts/runtime-modules.ts (which packages the image gets) and
// the bundle itself (minified, its source map naming the .ts sources, both roles starting from it).
// test/project-image.test.ts runs the image built from the same parts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './support/images.ts';
import { run } from './support/run.ts';
import {
  STAND_IN_VERSION, copyPackages, externalPackages, runtimeClosure, writeStandIns, type Lockfile, type Metafile,
} from '../scripts/runtime-modules.ts';

const IMAGE_SH = join(REPO_ROOT, 'scripts/image.sh');
const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** The checkout's commit, which image.sh passes to the project image's build. */
const HEAD = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
const COMMIT = `--build-arg SOURCE_COMMIT=${HEAD}`;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, whatever its exit code. */
function exec(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      });
  });
}

describe('scripts/image.sh', () => {
  let dir: string;
  let docker: string;
  let log: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'st-image-sh-'));
    log = join(dir, 'docker.log');
    // A stand-in for docker: records each call; `buildx version` fails with NO_BUILDX set, `buildx ls`
    // prints BUILDERS.
    docker = join(dir, 'docker');
    writeFileSync(docker, [
      '#!/usr/bin/env bash',
      'echo "$*" >> "$DOCKER_LOG"',
      'case "$1 $2" in',
      '  "buildx version") [ -z "${NO_BUILDX:-}" ] || { echo "docker: unknown command: docker buildx" >&2; exit 1; }; echo "buildx v0.14.0" ;;',
      '  "buildx ls") printf "%s\\n" "$BUILDERS" ;;',
      'esac',
      '',
    ].join('\n'));
    chmodSync(docker, 0o755);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  /** image.sh with the stand-in docker; returns its result and the docker calls it made. */
  async function imageSh(args: string[], env: NodeJS.ProcessEnv): Promise<Result & { calls: string[] }> {
    rmSync(log, { force: true });
    const result = await exec('bash', [IMAGE_SH, ...args], { DOCKER: docker, DOCKER_LOG: log, ...env });
    const calls = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
    return { ...result, calls };
  }

  const ONLY_DEFAULT = [
    'NAME/NODE    DRIVER/ENDPOINT             STATUS  BUILDKIT PLATFORMS',
    'default *    docker',
    '  default    default                     running 20.10.17 linux/amd64',
  ].join('\n');
  const WITH_CONTAINER_BUILDERS = [
    'NAME/NODE           DRIVER/ENDPOINT                   STATUS    BUILDKIT   PLATFORMS',
    'other               docker-container',
    ' \\_ other0          \\_ unix:///var/run/docker.sock   running   v0.13.2    linux/amd64',
    'mine*               docker-container',
    ' \\_ mine0           \\_ unix:///var/run/docker.sock   running   v0.13.2    linux/amd64',
    'default             docker',
    ' \\_ default         \\_ default                       running   v0.12.5    linux/amd64',
  ].join('\n');

  it('parses (bash -n), and is `npm run image`', async () => {
    await run('bash', ['-n', IMAGE_SH]);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.equal(pkg.scripts.image, 'bash scripts/image.sh');
  });

  it('--dry-run: creates a docker-container builder when there is none, then builds both platforms and pushes, running neither', async () => {
    const { code, stdout, calls } = await imageSh(['--dry-run'], {
      IMAGE: 'registry.example.com/x/sidecar-terminator', TAG: '0.1.0', BUILDERS: ONLY_DEFAULT,
    });
    assert.equal(code, 0);
    assert.deepEqual(stdout.split('\n').filter(Boolean), [
      `+ cd ${REPO_ROOT.replace(/\/$/, '')}`,
      `+ ${docker} buildx create --name sidecar-terminator --driver docker-container`,
      `+ ${docker} buildx build --builder sidecar-terminator --platform linux/amd64,linux/arm64 --push ${COMMIT} -t registry.example.com/x/sidecar-terminator:0.1.0 .`,
    ]);
    // Only look-ups ran.
    assert.deepEqual(calls, ['buildx version', 'buildx ls']);
  });

  it('uses the current builder with the docker-container driver, else the first one; runs the build', async () => {
    const { code, calls, stderr } = await imageSh([], { IMAGE: 'r.example/st', TAG: '1.2.3', BUILDERS: WITH_CONTAINER_BUILDERS });
    assert.equal(code, 0, stderr);
    assert.deepEqual(calls, [
      'buildx version', 'buildx ls',
      `buildx build --builder mine --platform linux/amd64,linux/arm64 --push ${COMMIT} -t r.example/st:1.2.3 .`,
    ]);
    assert.match(stderr, /pushed r\.example\/st:1\.2\.3 for linux\/amd64,linux\/arm64/);
    const first = await imageSh([], {
      IMAGE: 'r.example/st', TAG: '1', BUILDERS: WITH_CONTAINER_BUILDERS.replace('mine*', 'mine '),
    });
    assert.equal(first.calls.at(-1), `buildx build --builder other --platform linux/amd64,linux/arm64 --push ${COMMIT} -t r.example/st:1 .`);
  });

  it('creates the builder when none has the docker-container driver, then builds; BUILDER names it', async () => {
    const created = await imageSh([], { IMAGE: 'r.example/st', BUILDERS: ONLY_DEFAULT });
    assert.equal(created.code, 0, created.stderr);
    assert.deepEqual(created.calls.slice(2), [
      'buildx create --name sidecar-terminator --driver docker-container',
      `buildx build --builder sidecar-terminator --platform linux/amd64,linux/arm64 --push ${COMMIT} -t r.example/st:${VERSION} .`,
    ]);
    const named = await imageSh([], { IMAGE: 'r.example/st', BUILDER: 'ci', BUILDERS: WITH_CONTAINER_BUILDERS, PLATFORMS: 'linux/arm64' });
    assert.deepEqual(named.calls.slice(2), [
      'buildx create --name ci --driver docker-container',
      `buildx build --builder ci --platform linux/arm64 --push ${COMMIT} -t r.example/st:${VERSION} .`,
    ]);
    const wrong = await imageSh([], { IMAGE: 'r.example/st', BUILDER: 'default', BUILDERS: ONLY_DEFAULT });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /builder default has the docker driver: pushing a multi-platform image needs the docker-container driver/);
  });

  it('also the quick-exit image, with QUICK_EXIT_IMAGE', async () => {
    const { code, calls } = await imageSh([], {
      IMAGE: 'r.example/st', TAG: '2', QUICK_EXIT_IMAGE: 'r.example/quick-exit', QUICK_EXIT_EXTRA_PATHS: '/opt/a /opt/b',
      BUILDERS: WITH_CONTAINER_BUILDERS,
    });
    assert.equal(code, 0);
    assert.deepEqual(calls.slice(2), [
      `buildx build --builder mine --platform linux/amd64,linux/arm64 --push ${COMMIT} -t r.example/st:2 .`,
      // Not the commit: the quick-exit image has no SOURCE_COMMIT.
      'buildx build --builder mine --platform linux/amd64,linux/arm64 --push --build-arg EXTRA_PATHS=/opt/a /opt/b -t r.example/quick-exit:1 images/quick-exit',
    ]);
  });

  it('--load: one platform into the local Docker, no builder needed, no registry, IMAGE optional', async () => {
    const { code, stdout, calls } = await imageSh(['--load'], { BUILDERS: ONLY_DEFAULT });
    assert.equal(code, 0);
    assert.deepEqual(calls, ['buildx version', `buildx build --load ${COMMIT} -t sidecar-terminator.local/sidecar-terminator:${VERSION} .`]);
    assert.match(stdout, /^\+ \S+ buildx build --load --build-arg SOURCE_COMMIT=[0-9a-f]{40} -t sidecar-terminator\.local\/sidecar-terminator:\S+ \.$/m);
    const arm = await imageSh(['--load', '--dry-run'], { PLATFORM: 'linux/arm64', IMAGE: 'st', TAG: 't' });
    assert.equal(arm.code, 0);
    assert.match(arm.stdout, /^\+ \S+ buildx build --platform linux\/arm64 --load --build-arg SOURCE_COMMIT=[0-9a-f]{40} -t st:t \.$/m);
    assert.deepEqual(arm.calls, ['buildx version']);
  });

  it('passes the checkout\'s commit as SOURCE_COMMIT (the project image only); SOURCE_COMMIT in the environment wins', async () => {
    const head = await imageSh([], { IMAGE: 'r.example/st', TAG: '3', BUILDERS: WITH_CONTAINER_BUILDERS });
    assert.equal(head.code, 0, head.stderr);
    assert.match(HEAD, /^[0-9a-f]{40}$/);
    assert.equal(head.calls.at(-1), `buildx build --builder mine --platform linux/amd64,linux/arm64 --push --build-arg SOURCE_COMMIT=${HEAD} -t r.example/st:3 .`);
    assert.doesNotMatch(head.stderr, /SOURCE_COMMIT/);
    const given = await imageSh(['--dry-run'], { IMAGE: 'r.example/st', TAG: '3', SOURCE_COMMIT: 'v3 (patched)', BUILDERS: ONLY_DEFAULT });
    assert.equal(given.code, 0, given.stderr);
    // Quoted as a shell would read it back.
    assert.equal(given.stdout.split('\n').filter(Boolean).at(-1),
      `+ ${docker} buildx build --builder sidecar-terminator --platform linux/amd64,linux/arm64 --push --build-arg 'SOURCE_COMMIT=v3 (patched)' -t r.example/st:3 .`);
  });

  it('builds without SOURCE_COMMIT outside a git checkout, saying so once', async () => {
    // A copy of the script in a directory without .git (an unpacked source archive).
    const plain = join(dir, 'plain');
    mkdirSync(join(plain, 'scripts'), { recursive: true });
    copyFileSync(IMAGE_SH, join(plain, 'scripts/image.sh'));
    copyFileSync(join(REPO_ROOT, 'package.json'), join(plain, 'package.json'));
    rmSync(log, { force: true });
    const result = await exec('bash', [join(plain, 'scripts/image.sh')], {
      DOCKER: docker, DOCKER_LOG: log, IMAGE: 'r.example/st', TAG: '4', QUICK_EXIT_IMAGE: 'r.example/quick-exit',
      BUILDERS: WITH_CONTAINER_BUILDERS,
    });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(readFileSync(log, 'utf8').split('\n').filter(Boolean).slice(2), [
      'buildx build --builder mine --platform linux/amd64,linux/arm64 --push -t r.example/st:4 .',
      'buildx build --builder mine --platform linux/amd64,linux/arm64 --push -t r.example/quick-exit:1 images/quick-exit',
    ]);
    const warnings = result.stderr.match(/^image\.sh: .* is not a git checkout: building without SOURCE_COMMIT, the image reports no commit$/gm);
    assert.equal(warnings?.length, 1, result.stderr);
    // SOURCE_COMMIT still wins there, without a warning.
    const given = await exec('bash', [join(plain, 'scripts/image.sh'), '--load', '--dry-run'], {
      DOCKER: docker, DOCKER_LOG: log, SOURCE_COMMIT: 'abc123',
    });
    assert.equal(given.code, 0, given.stderr);
    assert.match(given.stdout, /^\+ \S+ buildx build --load --build-arg SOURCE_COMMIT=abc123 -t sidecar-terminator\.local\/sidecar-terminator:\S+ \.$/m);
    assert.doesNotMatch(given.stderr, /SOURCE_COMMIT/);
  });

  it('fails clearly without docker, without buildx, without IMAGE, or with a tag in IMAGE', async () => {
    const noDocker = await imageSh([], { IMAGE: 'r.example/st', DOCKER: join(dir, 'not-there') });
    assert.equal(noDocker.code, 1);
    assert.match(noDocker.stderr, /^image\.sh: docker not found \(.*not-there\): install Docker/m);
    const noBuildx = await imageSh(['--load'], { NO_BUILDX: '1' });
    assert.equal(noBuildx.code, 1);
    assert.match(noBuildx.stderr, /^image\.sh: docker buildx not found: install Docker's buildx plugin/m);
    assert.deepEqual(noBuildx.calls, ['buildx version']);
    // A dry run still prints the commands, saying what is missing.
    const dry = await imageSh(['--dry-run'], { IMAGE: 'r.example/st', TAG: '1', NO_BUILDX: '1' });
    assert.equal(dry.code, 0);
    assert.match(dry.stderr, /docker buildx not found: printing the commands as if no builder existed/);
    assert.match(dry.stdout, /buildx create --name sidecar-terminator --driver docker-container\n.*buildx build --builder sidecar-terminator /);
    const noImage = await imageSh([], { BUILDERS: ONLY_DEFAULT });
    assert.equal(noImage.code, 2);
    assert.match(noImage.stderr, /IMAGE is not set/);
    assert.match(noImage.stderr, /usage: IMAGE=REPOSITORY \[TAG=TAG\] npm run image/);
    assert.deepEqual(noImage.calls, []);
    const tagged = await imageSh([], { IMAGE: 'localhost:5000/st:1' });
    assert.equal(tagged.code, 1);
    assert.match(tagged.stderr, /localhost:5000\/st:1: give the repository without a tag/);
    const unknown = await imageSh(['--push'], {});
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown argument: --push/);
  });
});

describe('scripts/runtime-modules.ts', () => {
  /** A lockfile: the project depends on a (external) and b (bundled); a needs c (two versions in the tree). */
  function lockfile(): Lockfile {
    return {
      lockfileVersion: 3,
      packages: {
        '': { dependencies: { a: '^1', b: '^1' }, devDependencies: { tool: '^1' } },
        'node_modules/a': { version: '1.0.0', dependencies: { c: '^2', '@s/d': '^1' }, optionalDependencies: { native: '^1' }, peerDependencies: { p: '*', q: '*' }, peerDependenciesMeta: { q: { optional: true } } },
        'node_modules/a/node_modules/c': { version: '2.0.0' },
        'node_modules/c': { version: '1.0.0' },
        'node_modules/@s/d': { version: '1.0.0', dependencies: { c: '^1' } },
        'node_modules/b': { version: '1.0.0', dependencies: { c: '^1' } },
        'node_modules/native': { version: '1.0.0', optional: true },
        'node_modules/p': { version: '1.0.0' },
        'node_modules/q': { version: '1.0.0', dev: true },
        'node_modules/tool': { version: '1.0.0', dev: true },
      },
    };
  }

  it('finds the packages the bundle imports at run time in its metafile', () => {
    const metafile: Metafile = {
      outputs: {
        'dist/main.js.map': { imports: [] },
        'dist/main.js': {
          imports: [
            { path: 'node:fs', kind: 'import-statement', external: true },
            { path: 'util', kind: 'require-call', external: true },
            { path: 'dockerode', kind: 'dynamic-import', external: true },
            { path: '@kubernetes/client-node/dist/x.js', kind: 'dynamic-import', external: true },
            { path: 'node_modules/winston/index.js', kind: 'import-statement' },
          ],
        },
      },
    };
    assert.deepEqual(externalPackages(metafile), ['@kubernetes/client-node', 'dockerode']);
  });

  it('follows dependencies and required peers by the lockfile layout; no optional dependencies', () => {
    assert.deepEqual(runtimeClosure(lockfile(), ['a']), {
      packages: ['node_modules/@s/d', 'node_modules/a', 'node_modules/a/node_modules/c', 'node_modules/c', 'node_modules/p'],
      standIns: [],
    });
  });

  it('never-loaded packages become stand-ins, at the path each dependent resolves, and their dependencies are not followed', () => {
    assert.deepEqual(runtimeClosure(lockfile(), ['a'], { '@s/d': 'unused here', c: 'unused too' }), {
      packages: ['node_modules/a', 'node_modules/p'],
      standIns: ['node_modules/@s/d', 'node_modules/a/node_modules/c'],
    });
  });

  it('a stand-in loads, and any use of it throws an error naming the package and the reason', () => {
    const dir = mkdtempSync(join(tmpdir(), 'st-stand-ins-'));
    try {
      writeStandIns(['node_modules/@s/d', 'node_modules/a/node_modules/c'], dir, { '@s/d': 'builds are not used', c: 'SSH is not supported' });
      const require = createRequire(join(dir, 'index.js'));
      const d = require('@s/d') as { Client: new () => unknown; pack: () => unknown; then?: unknown };
      assert.equal(d.then, undefined, 'not taken for a promise');
      assert.throws(() => new d.Client(), { message: '@s/d is left out of the sidecar-terminator image: builds are not used' });
      assert.throws(() => d.pack(), /^Error: @s\/d is left out/);
      const c = createRequire(join(dir, 'node_modules/a/index.js'))('c') as () => unknown;
      assert.throws(() => c(), { message: 'c is left out of the sidecar-terminator image: SSH is not supported' });
      const manifest = JSON.parse(readFileSync(join(dir, 'node_modules/@s/d/package.json'), 'utf8')) as { name: string; version: string };
      assert.deepEqual([manifest.name, manifest.version], ['@s/d', STAND_IN_VERSION]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails for an external that is not a production dependency, a missing or a platform-specific package', () => {
    assert.throws(() => runtimeClosure(lockfile(), ['tool']), /tool is left external by the bundle but is a devDependency in package\.json: move it to "dependencies"/);
    assert.throws(() => runtimeClosure(lockfile(), ['zzz']), /zzz is left external by the bundle but is not a dependency/);
    const missing = lockfile();
    delete missing.packages['node_modules/p'];
    assert.throws(() => runtimeClosure(missing, ['a']), /p \(needed by a\) is not in package-lock\.json/);
    const platform = lockfile();
    platform.packages['node_modules/c']!.cpu = ['x64'];
    assert.throws(() => runtimeClosure(platform, ['a']), /node_modules\/c \(needed by @s\/d\) is for x64 only/);
  });

  it('copies each package without its nested node_modules, TypeScript files or source maps; checks versions', () => {
    const dir = mkdtempSync(join(tmpdir(), 'st-runtime-modules-'));
    try {
      const project = join(dir, 'project');
      const files: Record<string, string> = {
        'node_modules/a/package.json': '{"version":"1.0.0"}',
        'node_modules/a/index.js': 'module.exports = 1;',
        'node_modules/a/index.js.map': '{}',
        'node_modules/a/index.d.ts': 'export {};',
        'node_modules/a/src/index.ts': 'export {};',
        'node_modules/a/types/only.d.mts': 'export {};',
        'node_modules/a/proto/x.proto': 'syntax = "proto3";',
        'node_modules/a/node_modules/c/package.json': '{"version":"2.0.0"}',
        'node_modules/a/node_modules/unused/package.json': '{"version":"9.0.0"}',
        'node_modules/c/package.json': '{"version":"1.0.0"}',
      };
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(join(project, path, '..'), { recursive: true });
        writeFileSync(join(project, path), text);
      }
      const out = join(dir, 'out');
      const lock = lockfile();
      copyPackages(lock, ['node_modules/a', 'node_modules/a/node_modules/c', 'node_modules/c'], project, out);
      const copied = (p: string) => existsSync(join(out, p));
      for (const p of ['node_modules/a/index.js', 'node_modules/a/proto/x.proto', 'node_modules/a/node_modules/c/package.json', 'node_modules/c/package.json']) {
        assert.ok(copied(p), `${p} copied`);
      }
      for (const p of ['node_modules/a/index.js.map', 'node_modules/a/index.d.ts', 'node_modules/a/src', 'node_modules/a/types', 'node_modules/a/node_modules/unused']) {
        assert.ok(!copied(p), `${p} left out`);
      }
      writeFileSync(join(project, 'node_modules/c/package.json'), '{"version":"1.0.1"}');
      assert.throws(() => copyPackages(lock, ['node_modules/c'], project, join(dir, 'out2')), /is version 1\.0\.1, package-lock\.json has 1\.0\.0: run npm ci/);
      assert.throws(() => copyPackages(lock, ['node_modules/p'], project, join(dir, 'out3')), /node_modules\/p is not installed: run npm ci/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the bundle (npm run build)', () => {
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'st-bundle-'));
    await run(process.execPath, [join(REPO_ROOT, 'scripts/build.ts'), join(dir, 'dist'), join(dir, 'meta.json')], { cwd: REPO_ROOT });
    // As in the image: package.json beside dist/ ("type": "module").
    writeFileSync(join(dir, 'package.json'), readFileSync(join(REPO_ROOT, 'package.json')));
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is minified, with a linked source map of the .ts sources as seen from dist/, without their text', () => {
    const js = readFileSync(join(dir, 'dist/main.js'), 'utf8');
    assert.ok(js.length / js.split('\n').length > 2_000, 'long lines: minified');
    assert.match(js, /\n\/\/# sourceMappingURL=main\.js\.map\n$/);
    const map = JSON.parse(readFileSync(join(dir, 'dist/main.js.map'), 'utf8')) as { sources: string[]; sourcesContent?: unknown };
    assert.equal(map.sourcesContent, undefined);
    for (const source of ['../main.ts', '../agent/main.ts', '../crr/main.ts']) assert.ok(map.sources.includes(source), source);
    assert.deepEqual(map.sources.filter((s) => !s.startsWith('../')), []);
  });

  it('starts each role (usage), and a stack trace names the .ts source with --enable-source-maps', async () => {
    const main = join(dir, 'dist/main.js');
    const agent = await exec(process.execPath, ['--enable-source-maps', main, 'agent']);
    assert.equal(agent.code, 2);
    assert.match(agent.stderr, /the node name is required: set NODE_NAME or --node-name\nusage: sidecar-terminator agent/);
    const controller = await exec(process.execPath, ['--enable-source-maps', main, 'controller', '--help']);
    assert.equal(controller.code, 0, controller.stderr);
    assert.match(controller.stdout, /^usage: sidecar-terminator controller \[flags\]/);
    // The bundle knows the commit it was built from (scripts/build.ts): git's HEAD here.
    const version = await exec(process.execPath, [main, '--version']);
    assert.match(version.stdout, /^sidecar-terminator \d+\.\d+\.\d+\S* \(commit [0-9a-f]{12}, node v\d+/);
    // The first write to stderr also prints the stack that made it.
    const preload = join(dir, 'stack.mjs');
    writeFileSync(preload, [
      'const write = process.stderr.write.bind(process.stderr); let first = true;',
      "process.stderr.write = (chunk, ...rest) => { if (first) { first = false; write(new Error('where').stack + '\\n'); } return write(chunk, ...rest); };",
    ].join('\n'));
    const mapped = await exec(process.execPath, ['--enable-source-maps', '--import', preload, main, 'agent']);
    assert.match(mapped.stderr, new RegExp(`^\\s+at .*${dir}/main\\.ts:\\d+:\\d+\\)?$`, 'm'), mapped.stderr);
    const unmapped = await exec(process.execPath, ['--import', preload, main, 'agent']);
    assert.match(unmapped.stderr, /dist\/main\.js:\d+:\d+\)?$/m, unmapped.stderr);
  });
});
