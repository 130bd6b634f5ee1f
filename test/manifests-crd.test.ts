// The CRDs explain themselves (`kubectl explain containerrecreaterequests.spec...` has a description at
// every field, as the sidecar policies' do), the request CRD does not take another project's short name and states the bounds
// api/container-recreate-request.ts declares: the code's timers and the API server's validation have one source.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load as parseYaml } from 'js-yaml';
import {
  MAX_ACTIVE_DEADLINE_SECONDS,
  MAX_REQUEST_CONTAINERS,
  MAX_STRATEGY_SECONDS,
  MAX_TTL_SECONDS_AFTER_FINISHED,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
} from '../api/container-recreate-request.ts';
import { isValidName } from '../common/kube/paths.ts';

interface Schema {
  type?: string;
  description?: string;
  maximum?: number;
  minimum?: number;
  maxItems?: number;
  pattern?: string;
  maxLength?: number;
  properties?: Record<string, Schema>;
  items?: Schema;
}

interface Crd {
  spec: {
    group: string;
    names: { kind: string; plural: string; shortNames?: string[]; categories?: string[] };
    versions: { name: string; schema: { openAPIV3Schema: Schema } }[];
  };
}

const crd = parseYaml(readFileSync(new URL('../manifests/base/crd.yaml', import.meta.url), 'utf8')) as Crd;
const version = crd.spec.versions.find((v) => v.name === VERSION);
const root = version?.schema.openAPIV3Schema;

/** Every property below `schema` (through array items), as [dotted path, schema]. */
function properties(schema: Schema, path: string): [string, Schema][] {
  const out: [string, Schema][] = [];
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    const childPath = path ? `${path}.${name}` : name;
    out.push([childPath, child]);
    out.push(...properties(child, childPath));
  }
  if (schema.items) out.push(...properties(schema.items, `${path}[]`));
  return out;
}

function at(path: string): Schema {
  let schema = root!;
  for (const part of path.split('.')) {
    const name = part.replace(/\[\]$/, '');
    const next = schema.properties?.[name];
    assert.ok(next, `no property ${path}`);
    schema = part.endsWith('[]') ? next.items! : next;
  }
  return schema;
}

describe('manifests/base/crd.yaml', () => {
  it('is the ContainerRecreateRequest API of api/container-recreate-request.ts', () => {
    assert.equal(crd.spec.group, GROUP);
    assert.equal(crd.spec.names.kind, KIND);
    assert.equal(crd.spec.names.plural, PLURAL);
    assert.ok(root, `no version ${VERSION}`);
  });

  it('has a description on the schema and on every property at every level', () => {
    assert.ok(root!.description?.trim(), 'the schema itself has no description');
    const all = properties(root!, '').filter(([path]) => !['apiVersion', 'kind', 'metadata'].includes(path));
    // Guards the walk itself: it reaches the leaves of arrays of objects.
    for (const leaf of ['spec.containers[].statusContext.containerID', 'spec.strategy.minStartedSeconds', 'status.containerRecreateStates[].isKilled']) {
      assert.ok(all.some(([path]) => path === leaf), `walk missed ${leaf}`);
    }
    const missing = all.filter(([, schema]) => typeof schema.description !== 'string' || !schema.description.trim()).map(([path]) => path);
    assert.deepEqual(missing, [], `properties without a description: ${missing.join(', ')}`);
  });

  it('R27: says that hooks, ports and container IDs are never taken from the request', () => {
    const spec = at('spec').description!;
    assert.match(spec, /never takes a hook, a port or a container ID from the request/);
    assert.match(at('spec.containers[].statusContext').description!, /controller fills it/);
  });

  it('does not use OpenKruise\'s short name, and is in its own category', () => {
    const shortNames = crd.spec.names.shortNames ?? [];
    assert.ok(!shortNames.includes('crr'), `shortNames ${shortNames.join(', ')} include crr (OpenKruise's)`);
    assert.deepEqual(shortNames, ['stcrr']);
    assert.deepEqual(crd.spec.names.categories, ['sidecar-terminator']);
  });

  it('R27: names are names: podName a DNS subdomain (never `.` or `..`: the path would be the Pod list), containers DNS labels', () => {
    const podName = new RegExp(at('spec.podName').pattern!);
    const container = new RegExp(at('spec.containers[].name').pattern!);
    assert.equal(at('spec.podName').maxLength, 253);
    assert.equal(at('spec.containers[].name').maxLength, 63);
    for (const bad of ['.', '..', 'a/b', '-a', 'a-', 'A', 'a..b', '.a', 'a.', 'a b', '%2e']) {
      assert.equal(podName.test(bad), false, `podName ${bad}`);
      assert.equal(isValidName(bad), false, `the client accepts ${bad}`);
    }
    for (const good of ['a', 'job-x7k2p', 'web-0.example', '0']) {
      assert.equal(podName.test(good), true, `podName ${good}`);
      assert.equal(isValidName(good), true, `the client refuses ${good}`);
    }
    assert.equal(container.test('a.b'), false);
    assert.equal(container.test('proxy-1'), true);
  });

  it('R27: states the bounds api/container-recreate-request.ts exports', () => {
    assert.equal(at('spec.containers').maxItems, MAX_REQUEST_CONTAINERS);
    assert.equal(at('status.containerRecreateStates').maxItems, MAX_REQUEST_CONTAINERS);
    assert.equal(at('spec.activeDeadlineSeconds').maximum, MAX_ACTIVE_DEADLINE_SECONDS);
    assert.equal(at('spec.ttlSecondsAfterFinished').maximum, MAX_TTL_SECONDS_AFTER_FINISHED);
    const strategy = at('spec.strategy');
    const durations = Object.keys(strategy.properties ?? {}).filter((name) => name.endsWith('Seconds'));
    assert.deepEqual(durations.sort(), ['minStartedSeconds', 'terminationGracePeriodSeconds', 'unreadyGracePeriodSeconds']);
    for (const name of durations) {
      assert.equal(strategy.properties![name]!.maximum, MAX_STRATEGY_SECONDS, `spec.strategy.${name}`);
      assert.equal(strategy.properties![name]!.minimum, 0, `spec.strategy.${name}`);
    }
  });
});

describe('the sidecar policy CRDs', () => {
  for (const file of ['crd-sidecarpolicies.yaml', 'crd-clustersidecarpolicies.yaml']) {
    const policyCrd = parseYaml(readFileSync(new URL(`../manifests/base/${file}`, import.meta.url), 'utf8')) as Crd & {
      spec: { versions: { additionalPrinterColumns?: { name: string; jsonPath: string; priority?: number }[] }[] };
    };
    const policyRoot = policyCrd.spec.versions[0]!.schema.openAPIV3Schema;

    it(`${file}: a description on the schema and on every property at every level (kubectl explain)`, () => {
      assert.ok(policyRoot.description?.trim(), 'the schema itself has no description');
      const all = properties(policyRoot, '').filter(([path]) => !['apiVersion', 'kind', 'metadata'].includes(path));
      assert.ok(all.some(([path]) => path === 'status.conditions[].observedGeneration'), 'walk missed a leaf');
      const missing = all.filter(([, schema]) => typeof schema.description !== 'string' || !schema.description.trim()).map(([path]) => path);
      assert.deepEqual(missing, [], `properties without a description: ${missing.join(', ')}`);
    });

    it(`${file}: kubectl get shows whether it is Ready, and why not, and how many Pods it audited and acted on`, () => {
      const columns = policyCrd.spec.versions[0]!.additionalPrinterColumns ?? [];
      assert.deepEqual(columns.map((c) => c.name), ['Mode', 'Valid', 'Ready', 'Matched', 'Audited', 'Enforced', 'Age', 'Message']);
      assert.deepEqual(columns.filter((c) => c.name === 'Audited' || c.name === 'Enforced').map((c) => c.jsonPath), ['.status.audit.pods', '.status.enforce.pods']);
      assert.equal(columns.find((c) => c.name === 'Message')!.jsonPath, '.status.conditions[?(@.type=="Ready")].message');
    });
  }
});

