// What the cluster offers, read at start-up for the log and the metrics: the version, and whether
// the API server serves ValidatingAdmissionPolicy v1 (1.30+), on which the policies of
// manifests/policies depend (README, "Supported Kubernetes versions").
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../log.ts';
import { errorMessage } from '../log.ts';
import type { KubeApi } from './api.ts';
import { isNotFound } from './errors.ts';

export interface ClusterInfo {
  version: string;
  admissionPolicies: boolean;
}

export async function readClusterInfo(client: Pick<KubeApi, 'get'>): Promise<ClusterInfo> {
  const [version, policies] = await Promise.all([
    client.get<{ gitVersion?: string }>('/version'),
    client.get<{ resources?: { name?: string }[] }>('/apis/admissionregistration.k8s.io/v1').catch((err: unknown) => {
      if (isNotFound(err)) return { resources: [] };
      throw err;
    }),
  ]);
  return {
    version: version.gitVersion ?? 'unknown',
    admissionPolicies: (policies.resources ?? []).some((r) => r.name === 'validatingadmissionpolicies'),
  };
}

/** Logs what the cluster offers and exports it as sidecar_terminator_kubernetes_info; never fails. */
export async function reportClusterInfo(client: Pick<KubeApi, 'get'>, registry: Registry, log: Logger): Promise<ClusterInfo | undefined> {
  try {
    const info = await readClusterInfo(client);
    new Gauge({
      name: 'sidecar_terminator_kubernetes_info',
      help: 'The cluster as read at start-up: its version, and whether it serves ValidatingAdmissionPolicy v1 (1.30+; without it, request labels are not immutable and the agent does not create requests).',
      labelNames: ['version', 'admission_policies'] as const,
      registers: [registry],
    }).set({ version: info.version, admission_policies: String(info.admissionPolicies) }, 1);
    log.info('cluster', {
      kubernetes: info.version,
      admissionPolicies: info.admissionPolicies ? 'served' : 'not served (before 1.30): the policies of manifests/policies cannot be installed; requests are still checked against their Pods',
    });
    return info;
  } catch (err) {
    log.warn('could not read the cluster version', { error: errorMessage(err) });
    return undefined;
  }
}
