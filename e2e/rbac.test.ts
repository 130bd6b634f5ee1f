// e2e group: shared
// The deployed ServiceAccounts have what they use and nothing more. That they have enough is what the
// other suites show by running against the deployed Pods; here, what they must not have.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { versionFeatures } from './support/cluster.ts';
import { NAMESPACE, deployProject } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';

function can(serviceAccount: string, ...args: string[]): boolean {
  try {
    return kubectl('auth', 'can-i', `--as=system:serviceaccount:${NAMESPACE}:${serviceAccount}`, ...args).trim() === 'yes';
  } catch {
    return false; // can-i exits 1 on "no"
  }
}

const CRR = 'containerrecreaterequests.sidecar-terminator.dev';

describe('least-privilege RBAC', () => {
  before(() => deployProject());

  const agent: [string[], boolean][] = [
    [['list', 'pods', '--all-namespaces'], true],
    [['watch', 'pods', '--all-namespaces'], true],
    [['watch', CRR, '--all-namespaces'], true],
    [['patch', CRR, '--subresource=status', '-n', 'default'], true],
    [['create', 'events', '-n', 'default'], true],
    // For its own node only, with the policies of 1.30+ (e2e/agent-exits.test.ts); never before.
    [['create', CRR, '-n', 'default'], versionFeatures().admissionPolicies],
    [['delete', CRR, '-n', 'default'], false],
    [['patch', CRR, '-n', 'default'], false],
    [['patch', 'pods', '-n', 'default'], false],
    [['patch', 'pods/status', '-n', 'default'], false],
    [['delete', 'pods', '-n', 'default'], false],
    [['get', 'secrets', '-n', 'default'], false],
    [['list', 'secrets', '--all-namespaces'], false],
    [['list', 'nodes'], false],
  ];
  for (const [args, expected] of agent) {
    it(`agent ${expected ? 'may' : 'may not'} ${args.join(' ')}`, () => assert.equal(can('sidecar-terminator-agent', ...args), expected));
  }

  const controller: [string[], boolean][] = [
    [['create', CRR, '-n', 'default'], true],
    [['patch', 'pods', '-n', 'default'], true],
    [['patch', 'pods/status', '-n', 'default'], true],
    [['watch', 'nodes'], true],
    [['update', 'leases.coordination.k8s.io/sidecar-terminator-controller', '-n', NAMESPACE], true],
    [['update', 'leases.coordination.k8s.io/someone-else', '-n', NAMESPACE], false],
    [['update', 'leases.coordination.k8s.io', '-n', 'kube-system'], false],
    [['get', 'secrets', '-n', 'default'], false],
    [['delete', 'pods', '-n', 'default'], false],
    [['create', 'pods', '-n', 'default'], false],
    [['patch', 'nodes'], false],
  ];
  for (const [args, expected] of controller) {
    it(`controller ${expected ? 'may' : 'may not'} ${args.join(' ')}`, () => assert.equal(can('sidecar-terminator-controller', ...args), expected));
  }
});
