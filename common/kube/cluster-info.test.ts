import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { createLogger } from '../log.ts';
import { KubeApiError } from './client.ts';
import { readClusterInfo, reportClusterInfo } from './cluster-info.ts';

/** The two discovery answers of a release: its version, and the admissionregistration/v1 resources. */
function cluster(version: string, policyResources: string[] | 'absent') {
  return {
    get: <T>(path: string): Promise<T> => {
      if (path === '/version') return Promise.resolve({ gitVersion: version } as T);
      if (policyResources === 'absent') return Promise.reject(new KubeApiError(404, 'GET', path, ''));
      return Promise.resolve({ resources: policyResources.map((name) => ({ name })) } as T);
    },
  };
}

describe('readClusterInfo (R51)', () => {
  const cases: [string, ReturnType<typeof cluster>, { version: string; admissionPolicies: boolean }][] = [
    ['1.33: policies served', cluster('v1.33.13', ['validatingadmissionpolicies', 'validatingwebhookconfigurations']), { version: 'v1.33.13', admissionPolicies: true }],
    ['1.27: admissionregistration/v1 without policies', cluster('v1.27.4', ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations']), { version: 'v1.27.4', admissionPolicies: false }],
    ['a group version not served at all', cluster('v1.27.4', 'absent'), { version: 'v1.27.4', admissionPolicies: false }],
  ];
  for (const [name, client, want] of cases) it(name, async () => assert.deepEqual(await readClusterInfo(client), want));
});

describe('reportClusterInfo (R51)', () => {
  it('exports the release as an info metric', async () => {
    const registry = new Registry();
    await reportClusterInfo(cluster('v1.27.4', []), registry, createLogger('test', 'error'));
    assert.match(await registry.metrics(), /sidecar_terminator_kubernetes_info\{version="v1.27.4",admission_policies="false"\} 1/);
  });
  it('never fails: an unreachable API server is logged', async () => {
    const client = { get: () => Promise.reject(new Error('connect ECONNREFUSED')) };
    assert.equal(await reportClusterInfo(client, new Registry(), createLogger('test', 'error')), undefined);
  });
});
