// The optional NetworkPolicies (manifests/optional/network-policy) fit the workloads they are for:
// each selects the Pods of its manifests/base workload, lets in only that workload's metrics port,
// and lets out only the API server (443, 6443), DNS and, for the agent alone, the Pod network its
// httpGet preStop hooks leave for (the agent runs on the Pod network, not the node's).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadAll as parseYamlAll, load as parseYaml } from 'js-yaml';

const read = (path: string) => readFileSync(new URL(`../manifests/${path}`, import.meta.url), 'utf8');

interface PolicyPort { protocol?: string; port?: number | string }
interface PolicyPeer { ipBlock?: { cidr: string }; namespaceSelector?: object; podSelector?: object }
interface PolicyRule { ports?: PolicyPort[]; to?: PolicyPeer[]; from?: PolicyPeer[] }
interface NetworkPolicy {
  kind: string;
  metadata: { name: string; namespace: string };
  spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: PolicyRule[]; egress: PolicyRule[] };
}
interface Workload {
  kind: string;
  spec: { template: { metadata: { labels: Record<string, string> }; spec: { hostNetwork?: boolean; containers: Array<{ ports?: Array<{ containerPort: number }> }> } } };
}

const policies = parseYamlAll(read('optional/network-policy/network-policy.yaml')) as NetworkPolicy[];
const policy = (name: string) => policies.find((p) => p.metadata.name === name)!;
const workload = (file: string) => parseYaml(read(`base/${file}`)) as Workload;
/** Where manifests/base puts its workloads. */
const BASE_NAMESPACE = (parseYaml(read('base/kustomization.yaml')) as { namespace: string }).namespace;
const portsOf = (rule: PolicyRule) => (rule.ports ?? []).map((p) => `${p.protocol ?? 'TCP'}/${p.port}`).sort();

const PARTS = [
  { name: 'sidecar-terminator-agent', workload: workload('agent-daemonset.yaml'), kind: 'DaemonSet' },
  { name: 'sidecar-terminator-controller', workload: workload('controller-deployment.yaml'), kind: 'Deployment' },
];

describe('manifests/optional/network-policy (R38: HTTP hooks leave from the agent\'s Pod)', () => {
  it('a kustomize Component of the one file, two NetworkPolicies', () => {
    const kustomization = parseYaml(read('optional/network-policy/kustomization.yaml')) as { kind: string; resources: string[] };
    assert.equal(kustomization.kind, 'Component');
    assert.deepEqual(kustomization.resources, ['network-policy.yaml']);
    assert.deepEqual(policies.map((p) => `${p.kind} ${p.metadata.name}`), PARTS.map((p) => `NetworkPolicy ${p.name}`));
  });

  for (const part of PARTS) {
    describe(part.name, () => {
      const p = policy(part.name);
      const template = part.workload.spec.template;

      it(`selects the ${part.kind}'s Pods, in its namespace, on the Pod network`, () => {
        assert.equal(part.workload.kind, part.kind);
        assert.equal(p.metadata.namespace, BASE_NAMESPACE);
        for (const [label, value] of Object.entries(p.spec.podSelector.matchLabels)) assert.equal(template.metadata.labels[label], value, label);
        // On the node's network a NetworkPolicy would not apply to it at all.
        assert.notEqual(template.spec.hostNetwork, true);
      });

      it('lets in only the metrics port, and denies all else both ways', () => {
        assert.deepEqual(p.spec.policyTypes, ['Ingress', 'Egress']);
        const metricsPorts = template.spec.containers.flatMap((c) => c.ports ?? []).map((port) => `TCP/${port.containerPort}`);
        assert.deepEqual(p.spec.ingress.map(portsOf), [metricsPorts]);
      });

      it('lets out the API server (the Service\'s 443 and the endpoints\' 6443) and DNS, on those ports only', () => {
        const api = p.spec.egress.find((r) => r.to?.some((peer) => peer.ipBlock));
        assert.ok(api, 'an API server rule');
        assert.deepEqual(portsOf(api), ['TCP/443', 'TCP/6443']);
        const dns = p.spec.egress.find((r) => r.to === undefined);
        assert.deepEqual(dns && portsOf(dns), ['TCP/53', 'UDP/53']);
      });

      const hookRules = p.spec.egress.filter((r) => r.ports === undefined);
      if (part.name === 'sidecar-terminator-agent') {
        it('lets the httpGet preStop hooks out to Pods in any namespace, on any port, and to nothing else', () => {
          assert.deepEqual(hookRules, [{ to: [{ namespaceSelector: {} }] }]);
        });
      } else {
        it('runs no hooks: no rule without ports', () => assert.deepEqual(hookRules, []));
      }
    });
  }
});
