// kubectl against the e2e cluster, with the cluster's own binary and kubeconfig.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { clusterEnv } from './cluster.ts';

export function kubectl(...args: string[]): string {
  const env = clusterEnv();
  return execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}
