// docs/threat-model.md lists every input a tenant writes and we read, with its budget and the tests
// that prove it. This keeps the list true: a test it names must exist (the file, and the words of its
// title in it), a row without a test must say it is open, and every field of our CRDs that their
// writers set (everything under spec) must be among some row's inputs, so a new field cannot arrive
// without a budget.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { load } from 'js-yaml';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DOC = readFileSync(`${ROOT}docs/threat-model.md`, 'utf8');
const CRDS = ['manifests/base/crd.yaml', 'manifests/base/crd-sidecarpolicies.yaml', 'manifests/base/crd-clustersidecarpolicies.yaml'];

interface Row { inputs: string; proof: string }

/** The table's rows: the first cell (inputs) and the last (proved by). */
function rows(): Row[] {
  const lines = DOC.split('\n').filter((l) => l.startsWith('|') && !/^\|\s*-/.test(l)).slice(1);
  return lines.map((line) => {
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    return { inputs: cells[0]!, proof: cells.at(-1)! };
  });
}

interface Schema { type?: string; properties?: Record<string, Schema>; items?: Schema }

/** The leaf fields under `spec` of a schema, as `spec.containers[].name`. */
function specFields(schema: Schema, at: string): string[] {
  if (schema.properties) return Object.entries(schema.properties).flatMap(([name, sub]) => specFields(sub, `${at}.${name}`));
  if (schema.type === 'array' && schema.items) return specFields(schema.items, `${at}[]`);
  return [at];
}

describe('docs/threat-model.md: every tenant input has a budget and a test', () => {
  it('every test a row names exists, and a row without one says it is open', () => {
    const problems: string[] = [];
    const all = rows();
    assert.ok(all.length >= 10, `${all.length} rows read`);
    for (const { inputs, proof } of all) {
      const named = [...proof.matchAll(/`([^`]+\.ts)` "([^"]+)"/g)];
      if (named.length === 0 && !/\bopen\b/.test(proof)) problems.push(`${inputs}: names no test and is not marked open`);
      for (const [, file, title] of named) {
        if (!existsSync(`${ROOT}${file}`)) problems.push(`${inputs}: no file ${file}`);
        else if (!readFileSync(`${ROOT}${file}`, 'utf8').includes(title!)) problems.push(`${inputs}: ${file} has no test "${title}"`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('every field under spec of our CRDs is among some row\'s inputs', () => {
    const covered = rows().flatMap(({ inputs }) => [...inputs.matchAll(/`([A-Za-z]+) (spec[^`]*)`/g)].map((m) => `${m[1]} ${m[2]}`));
    const missing: string[] = [];
    for (const file of CRDS) {
      const crd = load(readFileSync(`${ROOT}${file}`, 'utf8')) as { spec: { names: { kind: string }; versions: { schema: { openAPIV3Schema: Schema } }[] } };
      for (const version of crd.spec.versions) {
        const spec = version.schema.openAPIV3Schema.properties?.spec;
        assert.ok(spec, `${file}: a spec`);
        for (const field of specFields(spec, 'spec')) {
          const name = `${crd.spec.names.kind} ${field}`;
          const inRow = covered.some((c) => name === c || name.startsWith(`${c}.`) || name.startsWith(`${c}[`));
          if (!inRow) missing.push(name);
        }
      }
    }
    assert.deepEqual(missing, []);
  });
});
