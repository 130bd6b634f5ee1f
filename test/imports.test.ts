// Imports flow one way (docs/design.md, "Where the rules live"): the agent and the controller each
// build on the shared rules, the API and the plumbing, never on each other; the rules build on the
// API and the plumbing; the API on the plumbing alone; the plumbing on nothing of ours. Every import
// specifier of every .ts file in those folders is read (static, type-only, re-exports, dynamic).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Each folder, and the folders its files may import from (itself included). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  common: ['common'],
  api: ['api', 'common'],
  rules: ['rules', 'api', 'common'],
  agent: ['agent', 'rules', 'api', 'common'],
  crr: ['crr', 'rules', 'api', 'common'],
};

/** Files outside the folders that code in them may read: the package's own version. */
const SHARED_FILES = new Set(['package.json']);
/** What only tests use (fixtures, the fake API server): tests anywhere may import it, nothing else. */
const TEST_SUPPORT = 'test/support/';

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) return tsFiles(rel);
    return entry.name.endsWith('.ts') ? [rel] : [];
  });
}

/** Every module specifier of the source: imports, `import type`, `export ... from`, `import()`. */
function specifiers(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

/** Why `file` (relative to the repository) may not import `specifier`, or undefined when it may. */
function violation(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined; // node: built-ins and packages
  const from = file.split('/')[0]!;
  const allowed = MAY_IMPORT[from];
  if (!allowed) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
  const to = target.split('/')[0]!;
  if (allowed.includes(to) || SHARED_FILES.has(target)) return undefined;
  if (file.endsWith('.test.ts') && target.startsWith(TEST_SUPPORT)) return undefined;
  return `${file} imports ${specifier} (${target}): ${from}/ may import only from ${allowed.map((d) => `${d}/`).join(', ')}`;
}

/** Each loop of the graph once, as the files around it (depth-first: a file met again while open closes one). */
function importLoops(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const loops: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') loops.push([...stack.slice(stack.indexOf(next)), next].join(' → '));
      else if (!state.has(next) && graph.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return loops;
}

describe('imports flow one way', () => {
  it('the checker reads every kind of import and catches each direction that is not allowed', () => {
    const source = [
      "import a from './a.ts';",
      "import type { B } from '../b.ts';",
      "export { c } from './c.ts';",
      "const d = await import('./d.ts');",
      "import 'node:fs';",
    ].join('\n');
    assert.deepEqual(specifiers(source), ['./a.ts', '../b.ts', './c.ts', './d.ts', 'node:fs']);
    assert.ok(violation('agent/x.ts', '../crr/y.ts'));
    assert.ok(violation('crr/x.ts', '../agent/y.ts'));
    assert.ok(violation('rules/x.ts', '../crr/y.ts'));
    assert.ok(violation('rules/x.ts', '../agent/y.ts'));
    assert.ok(violation('api/x.ts', '../rules/y.ts'));
    assert.ok(violation('api/x.ts', '../crr/y.ts'));
    assert.ok(violation('common/x.ts', '../api/y.ts'));
    assert.ok(violation('common/kube/x.ts', '../../rules/y.ts'));
    assert.ok(violation('agent/runtime/x.ts', '../../test/support/y.ts'));
    assert.ok(violation('rules/x.ts', '../test/support/pods.ts'));
    assert.equal(violation('rules/x.test.ts', '../test/support/pods.ts'), undefined);
    assert.equal(violation('agent/fast-path/x.test.ts', '../../test/support/fake-api.ts'), undefined);
    assert.ok(violation('agent/x.test.ts', '../crr/y.ts'), 'a test follows its folder\'s direction otherwise');
    assert.equal(violation('agent/runtime/x.ts', '../../rules/y.ts'), undefined);
    assert.equal(violation('crr/x.ts', '../api/y.ts'), undefined);
    assert.equal(violation('rules/x.ts', '../common/queue.ts'), undefined);
    assert.equal(violation('common/kube/x.ts', '../log.ts'), undefined);
    assert.equal(violation('common/version.ts', '../package.json'), undefined);
    assert.equal(violation('e2e/x.ts', '../crr/y.ts'), undefined);
    assert.equal(violation('agent/x.ts', '@kubernetes/client-node'), undefined);
    const loop = new Map([['a.ts', ['b.ts']], ['b.ts', ['c.ts']], ['c.ts', ['a.ts', 'd.ts']], ['d.ts', []]]);
    assert.deepEqual(importLoops(loop), ['a.ts → b.ts → c.ts → a.ts']);
    assert.deepEqual(importLoops(new Map([['a.ts', ['b.ts', 'c.ts']], ['b.ts', ['c.ts']], ['c.ts', []]])), [], 'two ways to one file are no loop');
  });

  it('no file of agent/, crr/, rules/, api/ or common/ imports against the direction', () => {
    const problems: string[] = [];
    let files = 0;
    for (const dir of Object.keys(MAY_IMPORT)) {
      for (const file of tsFiles(dir)) {
        files++;
        for (const specifier of specifiers(readFileSync(path.join(ROOT, file), 'utf8'))) {
          const problem = violation(file, specifier);
          if (problem) problems.push(problem);
        }
      }
    }
    assert.ok(files > 50, `only ${files} files read`);
    assert.deepEqual(problems, []);
  });

  it('no module of agent/, crr/, rules/, api/ or common/ imports itself back through others (no import loop)', () => {
    const graph = new Map<string, string[]>();
    for (const dir of Object.keys(MAY_IMPORT)) {
      for (const file of tsFiles(dir)) {
        if (file.endsWith('.test.ts')) continue;
        graph.set(file, specifiers(readFileSync(path.join(ROOT, file), 'utf8'))
          .filter((s) => s.startsWith('.'))
          .map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s))));
      }
    }
    assert.deepEqual(importLoops(graph), []);
  });

  it('test support (test/support/: the Pod fixtures, the fake API server) is imported by tests only', () => {
    const importers: string[] = [];
    for (const dir of Object.keys(MAY_IMPORT)) {
      for (const file of tsFiles(dir)) {
        if (file.endsWith('.test.ts')) continue;
        for (const specifier of specifiers(readFileSync(path.join(ROOT, file), 'utf8'))) {
          if (path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)).startsWith(TEST_SUPPORT)) importers.push(file);
        }
      }
    }
    assert.deepEqual(importers, []);
  });
});

/**
 * The agent's fast path is one folder with one way in and one way out: only the agent's entry point
 * (agent/main.ts, which builds FastPath) and the Reconciler (which takes its Handoff) import it, and
 * it imports nothing of the agent's but the runtimes, the metrics and the timeline types, never the
 * Reconciler or the planner.
 */
const FAST_PATH = 'agent/fast-path';
const FAST_PATH_IMPORTERS: Record<string, string> = {
  'agent/main.ts': 'agent/fast-path/fast-path.ts',
  'agent/reconciler.ts': 'agent/fast-path/handoff.ts',
};
const FAST_PATH_MAY_USE = [/^agent\/runtime\//, /^agent\/runtime-registry\.ts$/, /^agent\/metrics\.ts$/, /^agent\/timeline\.ts$/];

function resolved(file: string, specifier: string): string {
  return path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
}

describe('the fast path (agent/fast-path/) has one way in', () => {
  it('only agent/main.ts (FastPath) and agent/reconciler.ts (Handoff) import it, outside its own tests', () => {
    const problems: string[] = [];
    for (const file of tsFiles('agent')) {
      if (file.startsWith(`${FAST_PATH}/`) || file.endsWith('.test.ts')) continue;
      for (const specifier of specifiers(readFileSync(path.join(ROOT, file), 'utf8'))) {
        const target = resolved(file, specifier);
        if (!target.startsWith(`${FAST_PATH}/`)) continue;
        if (FAST_PATH_IMPORTERS[file] !== target) problems.push(`${file} imports ${target}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('its files import of the agent only the runtimes, the metrics and the timeline (never the Reconciler or the planner)', () => {
    const problems: string[] = [];
    const files = tsFiles(FAST_PATH).filter((f) => !f.endsWith('.test.ts'));
    assert.ok(files.length >= 5, `only ${files.length} files read`);
    for (const file of files) {
      for (const specifier of specifiers(readFileSync(path.join(ROOT, file), 'utf8'))) {
        if (!specifier.startsWith('.')) continue;
        const target = resolved(file, specifier);
        if (!target.startsWith('agent/') || target.startsWith(`${FAST_PATH}/`)) continue;
        if (!FAST_PATH_MAY_USE.some((allowed) => allowed.test(target))) problems.push(`${file} imports ${target}`);
      }
    }
    assert.deepEqual(problems, []);
  });
});
