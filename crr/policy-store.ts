// The controller's view of the sidecar policies (R54) and of the namespace labels their selectors
// read: three watches, the policies parsed and bounded once as they arrive.
import type { KubeApi } from '../common/kube/api.ts';
import type { Logger } from '../common/log.ts';
import { Listeners } from '../common/listeners.ts';
import { ProjectingInformer } from '../common/informer.ts';
import { resourcePath } from '../common/kube/paths.ts';
import type { SidecarPolicyStatus } from '../api/sidecar-policy.ts';
import { clusterPolicyPath, namespacedPolicyPath, POLICY_CONDITION_VALID } from '../api/sidecar-policy.ts';
import type { ParsedPolicy, PolicyScope, SidecarPolicy } from '../rules/policies.ts';
import { parsePolicy, precedenceOrder } from '../rules/policies.ts';
import { MAX_POD_LABELS } from '../rules/projection.ts';

interface PolicyObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; generation?: number };
  status?: SidecarPolicyStatus;
}

/** One policy as kept: where it is, what it says (or why it cannot be read), and its status as last written. */
export interface WatchedPolicy {
  scope: PolicyScope;
  namespace?: string;
  name: string;
  generation?: number;
  parsed: ParsedPolicy;
  status: SidecarPolicyStatus;
}

interface NamespaceObject {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
}

export interface PolicyStoreDeps {
  client: Pick<KubeApi, 'get' | 'watch'>;
  onRestart: (resource: string) => void;
  log: Logger;
}

export class PolicyStore {
  private readonly clusterPolicies: ProjectingInformer<PolicyObject, WatchedPolicy>;
  private readonly namespacedPolicies: ProjectingInformer<PolicyObject, WatchedPolicy>;
  /** Labels by namespace; undefined for one with more labels than selectors read. */
  private readonly namespaces: ProjectingInformer<NamespaceObject, { labels?: Record<string, string> }>;
  private cluster: SidecarPolicy[] = [];
  /** Namespaced policies by namespace. */
  private namespaced = new Map<string, SidecarPolicy[]>();
  /** forNamespace's answers, until the policies change. */
  private perNamespace = new Map<string, readonly SidecarPolicy[]>();
  /** What the valid policies say, as text: only a change in it is a change of policies (not a status write). */
  private fingerprint = '';
  /** The valid policies changed: what they match must be looked at again. */
  readonly onChange = new Listeners<[]>();

  constructor({ client, onRestart, log }: PolicyStoreDeps) {
    const policyInformer = (scope: PolicyScope, path: string, resource: string) =>
      new ProjectingInformer<PolicyObject, WatchedPolicy>({
        client, path, log,
        project: (object) => watchedPolicy(object, scope),
        onChange: () => this.refresh(),
        onRestart: () => onRestart(resource),
      });
    this.clusterPolicies = policyInformer('cluster', clusterPolicyPath(), 'clustersidecarpolicies');
    this.namespacedPolicies = policyInformer('namespaced', namespacedPolicyPath(), 'sidecarpolicies');
    this.namespaces = new ProjectingInformer<NamespaceObject, { labels?: Record<string, string> }>({
      client, log,
      path: resourcePath('v1', 'namespaces'),
      project: (ns) => {
        const labels = ns.metadata?.labels ?? {};
        return Object.keys(labels).length > MAX_POD_LABELS ? {} : { labels: { ...labels } };
      },
      onChange: () => {},
      onRestart: () => onRestart('namespaces'),
    });
  }

  /** The valid policies that may apply in a namespace (the cluster's and its own), in precedence order. */
  forNamespace(namespace: string): readonly SidecarPolicy[] {
    let policies = this.perNamespace.get(namespace);
    if (!policies) {
      policies = precedenceOrder([...(this.namespaced.get(namespace) ?? []), ...this.cluster]);
      this.perNamespace.set(namespace, policies);
    }
    return policies;
  }

  /** Every policy kept, valid or not: whose status to write. */
  all(): WatchedPolicy[] {
    return [...this.clusterPolicies.list(), ...this.namespacedPolicies.list()];
  }

  /** The namespace's labels; undefined when not known (or too many to read): namespace selectors then match nothing. */
  namespaceLabels(namespace: string): Readonly<Record<string, string>> | undefined {
    return this.namespaces.get(namespace)?.labels;
  }

  isSynced(): boolean {
    return this.clusterPolicies.isSynced() && this.namespacedPolicies.isSynced() && this.namespaces.isSynced();
  }

  start(): void {
    this.namespaces.start();
    this.clusterPolicies.start();
    this.namespacedPolicies.start();
  }

  stop(): void {
    this.namespaces.stop();
    this.clusterPolicies.stop();
    this.namespacedPolicies.stop();
  }

  private refresh(): void {
    const valid = this.all().flatMap((p) => (p.parsed.valid ? [p.parsed.policy] : []));
    const fingerprint = valid.map((p) => JSON.stringify(p)).sort().join('\n');
    if (fingerprint === this.fingerprint) return;
    this.cluster = valid.filter((p) => p.scope === 'cluster');
    this.namespaced = new Map();
    for (const p of valid) {
      if (p.scope !== 'namespaced') continue;
      const list = this.namespaced.get(p.namespace!) ?? [];
      list.push(p);
      this.namespaced.set(p.namespace!, list);
    }
    this.perNamespace = new Map();
    this.fingerprint = fingerprint;
    this.onChange.tell();
  }
}

function watchedPolicy(object: PolicyObject, scope: PolicyScope): WatchedPolicy {
  const meta = object.metadata ?? {};
  return {
    scope,
    ...(scope === 'namespaced' ? { namespace: meta.namespace ?? '' } : {}),
    name: meta.name ?? '',
    ...(meta.generation !== undefined ? { generation: meta.generation } : {}),
    parsed: parsePolicy(object, scope),
    status: keptStatus(object.status),
  };
}

/** The status as we write it, for telling whether it needs writing again; anything else in it is not kept. */
function keptStatus(status: SidecarPolicyStatus | undefined): SidecarPolicyStatus {
  const valid = status?.conditions?.find((c) => c.type === POLICY_CONDITION_VALID);
  return {
    ...(typeof status?.observedGeneration === 'number' ? { observedGeneration: status.observedGeneration } : {}),
    ...(typeof status?.matchedPods === 'number' ? { matchedPods: status.matchedPods } : {}),
    ...(valid ? { conditions: [{ ...valid, message: String(valid.message).slice(0, 1024) }] } : {}),
  };
}
