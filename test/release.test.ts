// The release directory `npm run release` writes (scripts/release.sh): the files it should hold, for
// this version and architecture, their checksums, and that each is what its name says: the chart
// package of this version with the released image as its default, the image archives of the released
// names, an SBOM of the production dependencies. Needs the directory: ST_RELEASE_DIR (the release
// takes a minute or two; CI makes it while the unit tests run). Without it the tests are skipped;
// with ST_REQUIRE_RELEASE=1 (CI) that is a failure. e2e/helm.test.ts installs the same directory.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load as parseYaml } from 'js-yaml';
import { REPO_ROOT } from './support/images.ts';
import { RELEASED_QUICK_EXIT_IMAGE } from '../rules/requests.ts';
import type { Lockfile } from '../scripts/runtime-modules.ts';

const DIR = process.env.ST_RELEASE_DIR;
if (!DIR && process.env.ST_REQUIRE_RELEASE === '1') throw new Error('ST_REQUIRE_RELEASE=1 but ST_RELEASE_DIR is not set: run npm run release');
const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const ARCH = { x64: 'amd64', arm64: 'arm64' }[process.arch as string];
const RELEASED_IMAGE = 'ghcr.io/sidecar-terminator/sidecar-terminator';

/** One file of a tar archive, as text. */
function fromTar(archive: string, member: string, gzip = false): string {
  return execFileSync('tar', [gzip ? '-xzOf' : '-xOf', archive, member], { encoding: 'utf8', maxBuffer: 64 << 20 });
}

describe('the release directory (npm run release)', { skip: DIR ? false : 'ST_RELEASE_DIR not set (npm run release writes release/VERSION/)' }, () => {
  const file = (name: string) => join(DIR!, name);

  it('holds the chart package, both image archives for this architecture, the SBOM and their checksums, which verify', () => {
    assert.deepEqual(readdirSync(DIR!).sort(), [
      'SHA256SUMS',
      `quick-exit-${VERSION}-linux-${ARCH}.tar`,
      `sidecar-terminator-${VERSION}-linux-${ARCH}.tar`,
      `sidecar-terminator-${VERSION}.cdx.json`,
      `sidecar-terminator-${VERSION}.tgz`,
    ].sort());
    const listed = readFileSync(file('SHA256SUMS'), 'utf8').trim().split('\n').map((line) => line.split(/ [ *]/)[1]).sort();
    assert.deepEqual(listed, readdirSync(DIR!).filter((name) => name !== 'SHA256SUMS').sort());
    execFileSync('sha256sum', ['--check', '--strict', '--quiet', 'SHA256SUMS'], { cwd: DIR, stdio: ['ignore', 'pipe', 'pipe'] });
  });

  it('the chart package is this version and runs the released image of this version by default', () => {
    const chart = file(`sidecar-terminator-${VERSION}.tgz`);
    const meta = parseYaml(fromTar(chart, 'sidecar-terminator/Chart.yaml', true)) as { version: string; appVersion: string };
    assert.deepEqual([meta.version, meta.appVersion], [VERSION, VERSION]);
    const values = parseYaml(fromTar(chart, 'sidecar-terminator/values.yaml', true)) as { image: { repository: string; tag: string } };
    assert.deepEqual(values.image, { ...values.image, repository: RELEASED_IMAGE, tag: '' });
  });

  it('the project image archive loads as the released image of this version, with the Dockerfile\'s user and entrypoint', () => {
    const archive = file(`sidecar-terminator-${VERSION}-linux-${ARCH}.tar`);
    const [manifest] = JSON.parse(fromTar(archive, 'manifest.json')) as { RepoTags: string[]; Config: string }[];
    assert.deepEqual(manifest?.RepoTags, [`${RELEASED_IMAGE}:${VERSION}`]);
    const config = JSON.parse(fromTar(archive, manifest.Config)) as { architecture: string; config: { User: string; Entrypoint: string[] } };
    assert.equal(config.architecture, ARCH);
    assert.equal(config.config.User, '65532:65532');
    assert.deepEqual(config.config.Entrypoint, ['/nodejs/bin/node', '--enable-source-maps', '/app/dist/main.js']);
  });

  it('the quick-exit image archive is the released quick-exit image of this version', () => {
    const index = JSON.parse(fromTar(file(`quick-exit-${VERSION}-linux-${ARCH}.tar`), './index.json')) as { manifests: { annotations: Record<string, string> }[] };
    assert.equal(index.manifests[0]?.annotations['io.containerd.image.name'], `${RELEASED_QUICK_EXIT_IMAGE}:${VERSION}`);
  });

  it('the SBOM is CycloneDX, of this version, listing the production dependencies and no devDependency', () => {
    const sbom = JSON.parse(readFileSync(file(`sidecar-terminator-${VERSION}.cdx.json`), 'utf8')) as {
      bomFormat: string; metadata: { component: { name: string; version: string } }; components: { name: string; version: string }[];
    };
    assert.equal(sbom.bomFormat, 'CycloneDX');
    assert.deepEqual([sbom.metadata.component.name, sbom.metadata.component.version], ['sidecar-terminator', VERSION]);
    const listed = new Set(sbom.components.map((c) => `${c.name}@${c.version}`));
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as Lockfile;
    const atPath = (path: string) => `${path.replace(/^.*node_modules\//, '')}@${lock.packages[path]!.version}`;
    for (const name of Object.keys(lock.packages['']!.dependencies ?? {})) assert.ok(listed.has(atPath(`node_modules/${name}`)), `${name} in the SBOM`);
    // Only devDependencies need them (typescript, eslint, esbuild, ...).
    const devOnly = Object.keys(lock.packages).filter((path) => lock.packages[path]!.dev).map(atPath);
    assert.ok(devOnly.length > 0);
    assert.deepEqual(devOnly.filter((p) => listed.has(p)), []);
  });
});
