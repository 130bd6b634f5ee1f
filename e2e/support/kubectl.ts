// kubectl against the e2e cluster, with the cluster's own binary and kubeconfig.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { clusterEnv } from './cluster.ts';

export function kubectl(...args: string[]): string {
  const env = clusterEnv();
  return execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Takes a cluster-scoped object off for the duration of `body` (an admission policy's binding, for
 * an attack it would refuse), then puts it back as it was.
 */
export async function without(kind: string, name: string, body: () => Promise<void>): Promise<void> {
  const saved = JSON.parse(kubectl('get', kind, name, '-o', 'json')) as { metadata: Record<string, unknown> };
  for (const field of ['resourceVersion', 'uid', 'creationTimestamp', 'managedFields', 'generation']) delete saved.metadata[field];
  kubectl('delete', kind, name, '--wait=true');
  try {
    await body();
  } finally {
    const env = clusterEnv();
    execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, 'create', '-f', '-'], { input: JSON.stringify(saved), stdio: ['pipe', 'pipe', 'pipe'] });
  }
}
