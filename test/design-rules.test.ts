// docs/design.md's rules are numbered in document order, and each is cited by number in the title of
// at least one test that checks it: the title of an it()/test() or of a describe() around it, in the
// test files of every folder (e2e/ included). A rule no test cites is a promise nothing checks. Each
// rule is cited by its own number: a range such as "R10–R13" cites R10 and R13, not the rules between.
// Each name on a rule's "Code:" line is found in the file named before it: a renamed function leaves
// no stale pointer behind.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TEST_DIRS = ['test', 'common', 'api', 'rules', 'agent', 'crr', 'bench', 'e2e'];
const TEST_CALLS = new Set(['describe', 'suite', 'it', 'test']);
const RULE_REF = /\bR(\d+)\b/g;

/** The rule numbers docs/design.md defines (`**R<n> — ...`), in document order. */
function definedRules(design: string): number[] {
  return [...design.matchAll(/^\*\*R(\d+) —/gm)].map((m) => Number(m[1]));
}

/** The files each rule's "Tests:" line names, by rule number (for the failure message). */
function namedTestFiles(design: string): Map<number, string> {
  const named = new Map<number, string>();
  for (const block of design.split(/^(?=\*\*R\d+ —)/m)) {
    const rule = /^\*\*R(\d+) —/.exec(block);
    const tests = /Tests: ([^]*?)(?:\n\n|$)/.exec(block);
    if (rule && tests) named.set(Number(rule[1]), tests[1]!.replace(/\s+/g, ' ').trim());
  }
  return named;
}

/** The text of a title argument: a string, a template (its literal parts), or literals joined by +. */
function literalText(node: ts.Expression): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) return [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' ');
  if (ts.isParenthesizedExpression(node)) return literalText(node.expression);
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    return [literalText(node.left), literalText(node.right)].filter((t) => t !== undefined).join(' ');
  }
  return undefined;
}

/**
 * The titles of the test calls in a test file: the first argument of describe/suite/it/test, and of
 * their `.only` forms and a context's `t.test(...)`; `.skip` and `.todo` check nothing, so they do
 * not count.
 */
function testTitles(source: string, fileName = 'x.test.ts'): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const titles: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && node.arguments.length > 0 && isTestCall(node.expression)) {
      const title = literalText(node.arguments[0]!);
      if (title !== undefined) titles.push(title);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return titles;
}

function isTestCall(callee: ts.Expression): boolean {
  if (ts.isIdentifier(callee)) return TEST_CALLS.has(callee.text);
  if (!ts.isPropertyAccessExpression(callee)) return false;
  const name = callee.name.text;
  if (ts.isIdentifier(callee.expression) && TEST_CALLS.has(callee.expression.text)) return name === 'only';
  return name === 'test'; // t.test(...)
}

/** The rule numbers cited in the titles. */
function citedRules(titles: readonly string[]): Set<number> {
  return new Set(titles.flatMap((title) => [...title.matchAll(RULE_REF)].map((m) => Number(m[1]))));
}

/** The test files under `dir`: its .ts files that import node:test (shared suites in support/ too). */
function testFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : testFiles(rel);
    if (!entry.name.endsWith('.ts')) return [];
    const source = readFileSync(path.join(ROOT, rel), 'utf8');
    return ts.preProcessFile(source, true, true).importedFiles.some((f) => f.fileName === 'node:test') ? [rel] : [];
  });
}

/** The `Code:` line of each rule: the files it names, each with the names after it, by rule number. */
function codeReferences(design: string): Map<number, Array<{ file: string; names: string[] }>> {
  const references = new Map<number, Array<{ file: string; names: string[] }>>();
  for (const block of design.split(/^(?=\*\*R\d+ —)/m)) {
    const rule = /^\*\*R(\d+) —/.exec(block);
    const code = /^Code: ([^]*?)(?:\nTests:|\n\n|$)/m.exec(block);
    if (!rule || !code) continue;
    const files: Array<{ file: string; names: string[] }> = [];
    for (const [, token] of code[1]!.matchAll(/`([^`]+)`/g)) {
      if (/\.(ts|ya?ml|json|sh)$/.test(token!)) files.push({ file: token!, names: [] });
      else files.at(-1)?.names.push(token!);
    }
    references.set(Number(rule[1]), files);
  }
  return references;
}

/** The identifiers a Code-line name stands for: `Class.method` is both, `(option)` the option. */
function identifiersOf(name: string): string[] {
  return name.replace(/[()]/g, '').split('.').map((part) => part.trim()).filter((part) => /^[A-Za-z_$][\w$]*$/.test(part));
}

describe('docs/design.md: the rules', () => {
  const design = readFileSync(path.join(ROOT, 'docs/design.md'), 'utf8');
  const rules = definedRules(design);
  const files = TEST_DIRS.flatMap(testFiles);
  const citations = new Map<number, string[]>();
  for (const file of files) {
    const titles = testTitles(readFileSync(path.join(ROOT, file), 'utf8'), file);
    for (const rule of citedRules(titles)) citations.set(rule, [...(citations.get(rule) ?? []), file]);
  }

  it('the checker reads the titles of test calls, and nothing else', () => {
    const source = [
      "// R1: a comment is no title",
      "describe('R2 a describe', () => {",
      "  it(`R3: a template ${'R4'} with R5`, () => { assert.ok('R6: a string in a body'); });",
      "  test('R7, R8: ' + 'R9', (t) => t.test('R10 a subtest'));",
      // `it .skip` spaced: the fixture is not taken for a skipped test by a grep for them.
      "  it.only('R11 only'); it .skip('R12 skipped'); it .todo('R13 to do'); suite('R14/R15');",
      "  it(\"R160's word R17's\"); it('R18x, XR19, R20_1'); it('R21–R23: a range names its ends only');",
      "});",
    ].join('\n');
    assert.deepEqual([...citedRules(testTitles(source))].sort((a, b) => a - b), [2, 3, 5, 7, 8, 9, 10, 11, 14, 15, 17, 21, 23, 160]);
  });

  it('defines rules numbered 1, 2, 3, ... in document order, without gaps', () => {
    assert.ok(rules.length > 0, 'no **R<n> — ...** rule found in docs/design.md');
    assert.deepEqual(rules, rules.map((_, i) => i + 1), `rule numbers in document order: ${rules.map((n) => `R${n}`).join(' ')}`);
  });

  it('every rule is cited by number in the title of at least one test', () => {
    const named = namedTestFiles(design);
    const uncited = rules.filter((rule) => !citations.has(rule));
    assert.deepEqual(
      uncited.map((rule) => `R${rule} (Tests: ${named.get(rule) ?? 'none named'})`),
      [],
      'rules that no test title cites: add R<n> to the title of a test that checks the rule',
    );
  });

  it('no test title cites a rule docs/design.md does not define', () => {
    const defined = new Set(rules);
    const unknown = [...citations].filter(([rule]) => !defined.has(rule)).map(([rule, inFiles]) => `R${rule} in ${inFiles.join(', ')}`);
    assert.deepEqual(unknown, []);
  });

  it('every name on a rule\'s Code line is in the file named before it', () => {
    const references = codeReferences(design);
    assert.ok([...references.values()].filter((files) => files.length > 0).length > rules.length / 2, 'the Code lines are read');
    const stale: string[] = [];
    for (const [rule, files] of references) {
      for (const { file, names } of files) {
        let source: string;
        try {
          source = readFileSync(path.join(ROOT, file), 'utf8');
        } catch {
          stale.push(`R${rule}: ${file} does not exist`);
          continue;
        }
        for (const name of names) {
          const missing = identifiersOf(name).filter((id) => !new RegExp(`(?<![\\w$])${id.replace(/\$/g, '\\$')}(?![\\w$])`).test(source));
          if (missing.length > 0) stale.push(`R${rule}: ${file} has no ${missing.join(', ')}`);
        }
      }
    }
    assert.deepEqual(stale, []);
  });
});
