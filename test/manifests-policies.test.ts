// manifests/policies/policies.yaml, as kustomize reads it: one object a document, every policy
// bound, and the request-metadata bounds (R48) the README states.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadAll } from 'js-yaml';
import { MAX_POLICY_SPEC_CHARS } from '../rules/policies.ts';

interface Doc { kind: string; metadata: { name: string }; spec: { policyName?: string; validations?: { expression: string }[] } }
const docs = loadAll(readFileSync(new URL('../manifests/policies/policies.yaml', import.meta.url), 'utf8')) as Doc[];

describe('the admission policies (R32, R48)', () => {
  it('one object a document: every policy has its binding, and nothing else is there', () => {
    const policies = docs.filter((d) => d.kind === 'ValidatingAdmissionPolicy').map((d) => d.metadata.name).sort();
    const bound = docs.filter((d) => d.kind === 'ValidatingAdmissionPolicyBinding').map((d) => d.spec.policyName).sort();
    assert.deepEqual(policies, ['agent-requests.sidecar-terminator.dev', 'containerrecreaterequests.sidecar-terminator.dev', 'request-metadata.sidecar-terminator.dev', 'sidecar-policy-size.sidecar-terminator.dev']);
    assert.deepEqual(bound, policies);
    assert.equal(docs.length, policies.length * 2);
  });

  it('R48: a request is kept to 32 labels and 16 KiB of annotations', () => {
    const expressions = docs.find((d) => d.metadata.name === 'request-metadata.sidecar-terminator.dev' && d.kind === 'ValidatingAdmissionPolicy')!.spec.validations!.map((v) => v.expression).join('\n');
    assert.match(expressions, /size\(variables\.labels\) <= 32/);
    assert.match(expressions, /variables\.annotationBytes <= 16384/);
  });

  it('R54: a sidecar policy holds 8192 characters in all, as the parser counts them', () => {
    const policy = docs.find((d) => d.metadata.name === 'sidecar-policy-size.sidecar-terminator.dev' && d.kind === 'ValidatingAdmissionPolicy')!;
    assert.match(policy.spec.validations!.map((v) => v.expression).join('\n'), new RegExp(`variables\\.chars <= ${MAX_POLICY_SPEC_CHARS}$`));
  });
});
