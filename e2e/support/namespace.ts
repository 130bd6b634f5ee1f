// One namespace per test: created with a random suffix, deleted (and awaited) afterwards.
import { randomBytes } from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import { apiStatus } from './cluster.ts';
import { waitFor } from './wait.ts';

export const E2E_LABEL = 'sidecar-terminator.e2e/test';

/**
 * Creates a namespace `<prefix>-<random>` and waits for its default ServiceAccount (Pods are
 * rejected until the ServiceAccount controller has made it).
 */
export async function createTestNamespace(core: CoreV1Api, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`.toLowerCase().slice(0, 63);
  await core.createNamespace({
    body: { metadata: { name, labels: { [E2E_LABEL]: prefix.slice(0, 63) } } },
  });
  await waitFor(
    async () => {
      await core.readNamespacedServiceAccount({ name: 'default', namespace: name });
      return true;
    },
    { description: `ServiceAccount default in ${name}`, timeoutMs: 30_000 },
  );
  return name;
}

/**
 * Deletes the namespace and, unless wait is false, waits until it is gone. Its Pods go first, at
 * once (grace period 0): a test is over when this is called, and a sidecar that ignores SIGTERM
 * would otherwise hold the namespace, and the next serial file, for its whole grace period.
 */
export async function deleteTestNamespace(
  core: CoreV1Api,
  name: string,
  { wait = true, timeoutMs = 90_000 }: { wait?: boolean; timeoutMs?: number } = {},
): Promise<void> {
  try {
    await core.deleteCollectionNamespacedPod({ namespace: name, gracePeriodSeconds: 0 });
    await core.deleteNamespace({ name });
  } catch (err) {
    if (apiStatus(err) === 404) return;
    // 409: already being deleted (a finalizer may hold it); wait for it all the same.
    if (apiStatus(err) !== 409) throw err;
  }
  if (!wait) return;
  await waitFor(
    async () => {
      try {
        await core.readNamespace({ name });
        return false;
      } catch (err) {
        if (apiStatus(err) === 404) return true;
        throw err;
      }
    },
    { description: `namespace ${name} to be deleted`, timeoutMs, intervalMs: 1000 },
  );
}
