// A namespace user, as the hostile-namespace tests play one: user e2e-tenant with the built-in
// `edit` role in its own namespace only, beside a namespace of Jobs it must not disturb.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { apiAs, type Caller } from './api-as.ts';
import { clients } from './cluster.ts';
import { deployProject } from './deploy.ts';
import { createTestNamespace, deleteTestNamespace } from './namespace.ts';

export const TENANT: Caller = { user: 'e2e-tenant' };

/** One API call as the tenant, which must be allowed. */
export async function asTenant(method: string, path: string, body?: unknown): Promise<void> {
  const answer = await apiAs(TENANT, method, path, body);
  assert.ok(answer.status < 300, `${method} ${path} as the tenant: ${answer.status} ${answer.body.message ?? ''}`);
}

/**
 * For the suite it is called in: the project deployed, the tenant's namespace (`edit` granted) and
 * a namespace of Jobs, both `<name>...`, deleted after the suite.
 */
export function tenantNamespaces(name: string): { tenant: () => string; jobs: () => string } {
  const { core, rbac } = clients();
  let tenant = '';
  let jobs = '';
  before(async () => {
    await deployProject();
    tenant = await createTestNamespace(core, name);
    jobs = await createTestNamespace(core, `${name}-jobs`);
    await rbac.createNamespacedRoleBinding({
      namespace: tenant,
      body: {
        metadata: { name: 'tenant-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: (TENANT as { user: string }).user }],
      },
    });
  });
  after(async () => {
    if (tenant) await deleteTestNamespace(core, tenant);
    if (jobs) await deleteTestNamespace(core, jobs);
  });
  return { tenant: () => tenant, jobs: () => jobs };
}
