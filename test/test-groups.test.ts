// Every e2e test file says on its first line whether it runs beside others (shared) or alone
// (serial, with why), and e2e/run.sh refuses a file that says neither, naming it, before it builds or
// starts anything. Of `npm test`'s files (scripts/test.sh), exactly those that start a daemon of their
// own say `// test group: serial — why`: they run one at a time, the rest side by side.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const GROUP_LINE = /^\/\/ e2e group: (shared|serial — \S.*)$/;
/** What starts a daemon of a test's own: a private containerd or dockerd, the project image run in one. */
const STARTS_A_DAEMON = /support\/(containerd|dockerd|fixtures)\.ts|build-(project-image|dockerfile)/;

function e2eTestFiles(): string[] {
  return readdirSync(path.join(ROOT, 'e2e'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => path.join('e2e', f));
}

const firstLine = (file: string) => readFileSync(path.join(ROOT, file), 'utf8').split('\n')[0]!;

describe('e2e groups', () => {
  it('every e2e test file names its group on its first line, and a serial one says why', () => {
    const files = e2eTestFiles();
    assert.ok(files.length > 10, files.join(' '));
    const ungrouped = files.filter((f) => !GROUP_LINE.test(firstLine(f)));
    assert.deepEqual(ungrouped, []);
  });

  it('e2e/run.sh refuses a file with no group, naming it, before it builds anything', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'e2e-groups-'));
    const grouped = path.join(dir, 'grouped.test.ts');
    const ungrouped = path.join(dir, 'ungrouped.test.ts');
    writeFileSync(grouped, '// e2e group: shared\n');
    writeFileSync(ungrouped, '// a test file that forgot its group\n');
    const run = spawnSync('bash', ['e2e/run.sh'], {
      cwd: ROOT, encoding: 'utf8',
      // A release no build exists for: reaching the build would fail differently (and slowly).
      env: { ...process.env, K8S_VERSION: 'v0.0.0-none', ST_E2E_TESTS: `${grouped} ${ungrouped}` },
    });
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, new RegExp(`e2e: ${ungrouped} has no group`));
    assert.doesNotMatch(run.stderr, /\/grouped\.test\.ts has no group/);
    assert.doesNotMatch(run.stderr, /build-k8s/);
  });
});

describe('npm test groups', () => {
  it('scripts/test.sh runs a file alone exactly when it starts a daemon of its own, and says why', () => {
    const listed = spawnSync('bash', ['scripts/test.sh', '--list'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(listed.status, 0, listed.stderr);
    const groups = listed.stdout.trim().split('\n').map((line) => line.split(' ') as [string, string]);
    assert.ok(groups.length > 50, listed.stdout);
    const source = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
    const wrong = groups.filter(([group, file]) => (group === 'serial') !== STARTS_A_DAEMON.test(source(file))).map(([, file]) => file);
    assert.deepEqual(wrong, [], 'each starts a daemon but runs beside others, or runs alone without starting one');
    const noWhy = groups.filter(([group, file]) => group === 'serial' && !/^\/\/ test group: serial — \S/.test(firstLine(file))).map(([, file]) => file);
    assert.deepEqual(noWhy, [], 'a serial file says why on its first line');
  });
});
