// docs/upgrade.md names what the code and the manifests name: its recovery block (which
// e2e/upgrade.test.ts runs on the cluster as it stands) is valid shell and uses the API's condition
// and finalizer, the reasons the controller writes and the CRD's short name; its uninstall steps name
// the agent's DaemonSet and namespace as the manifests do.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { load as parseYaml } from 'js-yaml';
import { READINESS_CONDITION, READINESS_FINALIZER } from '../api/container-recreate-request.ts';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const doc = read('docs/upgrade.md');
const MARKER = '<!-- e2e/upgrade.test.ts runs the next block as it stands -->';

function recoveryBlock(): string {
  const at = doc.indexOf(MARKER);
  assert.ok(at >= 0, `docs/upgrade.md has the marker ${MARKER}`);
  const block = /```sh\n([\s\S]*?)```/.exec(doc.slice(at))?.[1];
  assert.ok(block, 'a sh block follows the marker');
  return block;
}

/** Every string literal of the non-test sources of these folders. */
function literals(...folders: string[]): Set<string> {
  const out = new Set<string>();
  for (const folder of folders) {
    for (const file of readdirSync(new URL(`../${folder}`, import.meta.url))) {
      if (!file.endsWith('.ts') || file.endsWith('.test.ts')) continue;
      for (const m of read(`${folder}/${file}`).matchAll(/'([^'\n]*)'/g)) out.add(m[1]!);
    }
  }
  return out;
}

describe('docs/upgrade.md', () => {
  it('has one recovery block, valid bash', () => {
    assert.equal(doc.split(MARKER).length, 2, 'the marker once');
    execFileSync('bash', ['-n', '-c', recoveryBlock()]);
  });

  it("the recovery uses the API's condition and finalizer, the controller's reasons and the CRD's short name", () => {
    const block = recoveryBlock();
    assert.ok(block.includes(`@.type=="${READINESS_CONDITION}"`), 'selects our condition');
    assert.ok(block.includes(`\\"type\\":\\"${READINESS_CONDITION}\\"`), 'writes our condition');
    assert.ok(block.includes(`"value":["${READINESS_FINALIZER}"]`), 'removes only our finalizer');
    // The reasons the controller gives our condition (crr/requests-controller.ts applyReadiness).
    const written = literals('crr', 'api', 'rules');
    for (const reason of ['ContainerRecreating', 'ContainerRecreateFinished']) {
      assert.ok(block.includes(reason), `the recovery names ${reason}`);
      assert.ok(written.has(reason), `the controller writes the reason ${reason}`);
    }
    const crd = parseYaml(read('manifests/base/crd.yaml')) as { spec: { names: { shortNames: string[] } } };
    const [shortName] = crd.spec.names.shortNames;
    assert.match(block, new RegExp(`kubectl get ${shortName} -A`));
    assert.match(block, new RegExp(`kubectl -n "\\$ns" patch ${shortName} `));
  });

  it("the uninstall steps name the agent's DaemonSet and the namespace of the manifests", () => {
    const daemonSet = parseYaml(read('manifests/base/agent-daemonset.yaml')) as { metadata: { name: string } };
    const kustomization = parseYaml(read('manifests/base/kustomization.yaml')) as { namespace: string };
    assert.ok(doc.includes(`kubectl -n ${kustomization.namespace} delete daemonset ${daemonSet.metadata.name}\n`));
    assert.ok(doc.includes('kubectl delete stcrr --all -A\n'));
  });
});
