// e2e group: serial — it replaces the deployment with a renamed one.
// The agent policy confines whoever holds the agent's create permission, whatever the install calls
// it (issue 24, item 5): the kubectl deployment of e2e/support/deploy.ts is replaced by the same
// overlay built again with a kustomize namePrefix, on which
// - the agent is confined to its node: its fast path is `enabled`, and the policy names the
//   prefixed ServiceAccount;
// - with the agent policy's binding removed (an install that leaves the permission unconfined) the
//   agent says so where operators look: not ready, /readyz giving the reason, and
//   sidecar_terminator_agent_fast_path{state="not-confined"} 1.
// The policy API and the node name in ServiceAccount tokens exist from 1.30: on older releases
// there is no policy to match and the agent gets no create permission (e2e/agent-exits.test.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { NAMESPACE, agentPod, deployProject, podMetric, writeOverlay } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import { waitFor } from './support/wait.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const PREFIX = 'acme-';
const AGENT = `${PREFIX}sidecar-terminator-agent`;
const AGENT_POLICY_BINDING = `${PREFIX}agent-requests.sidecar-terminator.dev`;
const METRICS_PORT = 9440;
const features = versionFeatures();

type Obj = { kind: string; metadata: { name: string } };

/** Every object an overlay builds, but the CRD and the Namespace (which the other install keeps using). */
function removeInstall(overlay: string): void {
  const objs = (loadAll(kubectl('kustomize', overlay)) as (Obj | null)[])
    .filter((o): o is Obj => o !== null && o.kind !== 'CustomResourceDefinition' && o.kind !== 'Namespace');
  const file = join(clusterEnv().clusterDir, 'security-policy-removed.json');
  // One List object: kubectl before 1.28 cannot read JSON documents separated by `---`.
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }));
  // Foreground: returns once the Pods are gone too, so no node ever has two agents.
  kubectl('delete', '--ignore-not-found', '--cascade=foreground', '--wait=true', '--timeout=180s', '-f', file);
}

/** e2e/support/deploy.ts's overlay, with a namePrefix on top. */
function writePrefixedOverlay(): string {
  const inner = writeOverlay();
  const dir = join(clusterEnv().clusterDir, 'overlay-prefixed');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: ${PREFIX}
resources:
  - ${relative(dir, inner)}
`);
  return dir;
}

async function newAgentPod(before: string | undefined): Promise<V1Pod> {
  return waitFor(async () => {
    const pod = await agentPod().catch(() => undefined);
    return pod && pod.metadata?.name !== before && pod.status?.phase === 'Running' && pod.status.podIP ? pod : undefined;
  }, { description: 'a new agent Pod running', timeoutMs: 120_000 });
}

async function readyz(pod: V1Pod): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://${pod.status!.podIP}:${METRICS_PORT}/readyz`);
  return { status: res.status, text: await res.text() };
}

const fastPath = (pod: V1Pod, state: string) => podMetric(pod, METRICS_PORT, `sidecar_terminator_agent_fast_path{state="${state}"}`);

describe('the agent policy follows the agent\'s ServiceAccount, as kustomize builds it', () => {
  it('an overlay with namePrefix and nameSuffix: the policy names exactly the account the create binding names', () => {
    const dir = join(clusterEnv().clusterDir, 'overlay-renamed');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: team-
nameSuffix: -x
resources:
  - ${relative(dir, join(ROOT, 'manifests/default'))}
`);
    const objs = (loadAll(kubectl('kustomize', dir)) as (Obj | null)[]).filter((o): o is Obj => o !== null);
    const account = objs.find((o) => o.kind === 'ServiceAccount' && o.metadata.name.includes('agent'))!;
    assert.equal(account.metadata.name, 'team-sidecar-terminator-agent-x');
    const binding = objs.find((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'team-sidecar-terminator-agent-requests-x') as unknown as { subjects: { name: string; namespace: string }[] };
    assert.deepEqual(binding.subjects.map((s) => `${s.namespace}:${s.name}`), [`${NAMESPACE}:team-sidecar-terminator-agent-x`]);
    const policy = objs.find((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name === 'team-agent-requests.sidecar-terminator.dev-x') as unknown as { spec: { matchConditions: { expression: string }[] } };
    assert.equal(policy.spec.matchConditions[0]!.expression, `request.userInfo.username == 'system:serviceaccount:${NAMESPACE}:team-sidecar-terminator-agent-x'`);
    // Each binding names its renamed policy, whatever this release's kubectl kustomize knows (1.31's
    // left both naming the unprefixed policies: neither policy in force).
    const policies = objs.filter((o) => o.kind === 'ValidatingAdmissionPolicy').map((o) => o.metadata.name).sort();
    const bound = objs.filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding').map((o) => (o as unknown as { spec: { policyName: string } }).spec.policyName).sort();
    assert.deepEqual(bound, policies);
    assert.deepEqual(policies, ['team-agent-requests.sidecar-terminator.dev-x', 'team-containerrecreaterequests.sidecar-terminator.dev-x', 'team-request-metadata.sidecar-terminator.dev-x', 'team-sidecar-policy-size.sidecar-terminator.dev-x']);
  });
});

describe('the agent policy follows the agent\'s ServiceAccount: a namePrefix install', {
  skip: !features.admissionPolicies && `no ValidatingAdmissionPolicy v1 nor node names in tokens before 1.30 (${clusterEnv().k8sVersion}): the agent has no create permission to confine`,
}, () => {
  let prefixed = '';
  before(async () => {
    await deployProject();
    removeInstall(writeOverlay());
    prefixed = writePrefixedOverlay();
    kubectl('apply', '-k', prefixed);
    kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=180s');
  });
  after(async () => {
    if (prefixed) removeInstall(prefixed);
    await deployProject();
  });

  it('R50: installed with a namePrefix, the agent is confined: the policy names the prefixed account, fast path enabled, ready', async () => {
    const match = kubectl('get', 'validatingadmissionpolicy', `${PREFIX}agent-requests.sidecar-terminator.dev`, '-o', 'jsonpath={.spec.matchConditions[0].expression}');
    assert.equal(match, `request.userInfo.username == 'system:serviceaccount:${NAMESPACE}:${AGENT}'`);
    const pod = await agentPod();
    await waitFor(async () => (await fastPath(pod, 'enabled')) === 1, { description: 'fast_path{state="enabled"} 1 on the prefixed agent', timeoutMs: 60_000 });
    assert.equal((await readyz(pod)).status, 200);
  });

  it('R50: deliberately unconfined (the agent policy\'s binding removed): not ready, /readyz says why, fast_path{state="not-confined"} 1', async () => {
    const { core } = clients();
    try {
      kubectl('delete', 'validatingadmissionpolicybinding', AGENT_POLICY_BINDING);
      const old = (await agentPod()).metadata?.name;
      kubectl('-n', NAMESPACE, 'rollout', 'restart', `daemonset/${AGENT}`);
      const pod = await newAgentPod(old);
      await waitFor(async () => (await fastPath(pod, 'not-confined')) === 1, { description: 'fast_path{state="not-confined"} 1', timeoutMs: 60_000 });
      const { status, text } = await readyz(pod);
      assert.equal(status, 503);
      assert.match(text, /not confined to its node: the API server would let this agent create requests for any node/);
      await waitFor(async () => {
        const now = await core.readNamespacedPod({ namespace: NAMESPACE, name: pod.metadata!.name! });
        return now.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'False' ? now : undefined;
      }, { description: 'the agent Pod reported not Ready', timeoutMs: 60_000 });
    } finally {
      kubectl('apply', '-k', prefixed);
      kubectl('-n', NAMESPACE, 'rollout', 'restart', `daemonset/${AGENT}`);
      kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=180s');
    }
  });
});
