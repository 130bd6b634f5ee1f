// The sidecar policies (R54) and the namespace labels their selectors read, from three watches.
// Plumbing only: what a policy object means is the caller's (`project`, `meaning`).
import { createHash } from 'node:crypto';
import type { KubeApi } from './kube/api.ts';
import type { Logger } from './log.ts';
import { Listeners } from './listeners.ts';
import { ProjectingInformer } from './informer.ts';
import { resourcePath } from './kube/paths.ts';

export type PolicyScope = 'cluster' | 'namespaced';

/** How long policy changes are gathered before a relist they call for. */
const POLICY_RELIST_DELAY_MS = 2_000;

interface NamespaceObject {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
}

export interface PolicyStoreDeps<W> {
  client: Pick<KubeApi, 'get' | 'watch'>;
  clusterPath: string;
  namespacedPath: string;
  /** One policy object as kept: read and bounded once, as it arrives. */
  project: (object: unknown, scope: PolicyScope) => W;
  /** What one kept policy says, as text that changes only when its meaning does (not on a status write); '' for nothing in effect. */
  meaning: (policy: W) => string;
  /** Namespace labels kept at most; a namespace with more has none kept (its selectors match nothing). */
  maxLabels: number;
  onRestart: (resource: string) => void;
  /** Told of each object left out because it could not be read. */
  onUnreadable: (resource: string) => void;
  log: Logger;
}

export class PolicyStore<W> {
  private readonly clusterPolicies: ProjectingInformer<{ metadata?: { name?: string } }, W>;
  private readonly namespacedPolicies: ProjectingInformer<{ metadata?: { name?: string } }, W>;
  private readonly namespaces: ProjectingInformer<NamespaceObject, { labels?: Record<string, string> }>;
  private readonly meaning: (policy: W) => string;
  /** A digest of what each kept policy says, by scope and key: an event that changes none of it is no change. */
  private readonly said = new Map<string, string>();
  private relistTimer: NodeJS.Timeout | undefined;
  /** Each namespace's kept labels as last seen (JSON): a change tells onNamespaceLabels. */
  private readonly labelsSeen = new Map<string, string>();
  /** What the policies say changed. */
  readonly onChange = new Listeners<[]>();
  /** A namespace already known has other labels now: its Pods may be picked by other cluster policies. */
  readonly onNamespaceLabels = new Listeners<[namespace: string]>();

  constructor(deps: PolicyStoreDeps<W>) {
    const { client, log, onRestart, onUnreadable } = deps;
    this.meaning = deps.meaning;
    const policyInformer = (scope: PolicyScope, path: string) =>
      new ProjectingInformer<{ metadata?: { name?: string } }, W>({
        client, path, log,
        // A cluster without the policy CRDs runs without policies (an older install's CRDs).
        mayBeAbsent: true,
        project: (object) => deps.project(object, scope),
        onChange: (key, policy) => this.changed(`${scope}/${key}`, policy),
        onRestart: () => onRestart(path.slice(path.lastIndexOf('/') + 1)),
        onUnreadable: () => onUnreadable(path.slice(path.lastIndexOf('/') + 1)),
      });
    this.clusterPolicies = policyInformer('cluster', deps.clusterPath);
    this.namespacedPolicies = policyInformer('namespaced', deps.namespacedPath);
    this.namespaces = new ProjectingInformer<NamespaceObject, { labels?: Record<string, string> }>({
      client, log,
      path: resourcePath('v1', 'namespaces'),
      // An RBAC from before the policies grants no namespaces: their selectors then match nothing.
      mayBeAbsent: true,
      project: (ns) => {
        const labels = ns.metadata?.labels ?? {};
        return Object.keys(labels).length > deps.maxLabels ? {} : { labels: { ...labels } };
      },
      onChange: (name, kept) => {
        const before = this.labelsSeen.get(name);
        const now = kept === undefined ? undefined : JSON.stringify(kept.labels ?? {});
        if (now === undefined) this.labelsSeen.delete(name);
        else this.labelsSeen.set(name, now);
        if (before !== undefined && now !== undefined && before !== now) this.onNamespaceLabels.tell(name);
      },
      onRestart: () => onRestart('namespaces'),
      onUnreadable: () => onUnreadable('namespaces'),
    });
  }

  /**
   * Has `informer` list again (from the watch cache) once the policies change: what it keeps may
   * depend on them. Changes are gathered for a moment, however many there are.
   */
  relistOnChange(informer: { requestRelist(): void }): void {
    this.onChange.add(() => {
      this.relistTimer ??= setTimeout(() => {
        this.relistTimer = undefined;
        informer.requestRelist();
      }, POLICY_RELIST_DELAY_MS);
    });
  }

  /** Every policy kept, valid or not. */
  all(): W[] {
    return [...this.clusterPolicies.list(), ...this.namespacedPolicies.list()];
  }

  /** The namespace's labels; undefined when not known (or too many to read). */
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
    clearTimeout(this.relistTimer);
    this.namespaces.stop();
    this.clusterPolicies.stop();
    this.namespacedPolicies.stop();
  }

  private changed(key: string, policy: W | undefined): void {
    const meaning = policy === undefined ? '' : this.meaning(policy);
    // Kept as a digest: a policy at its CRD's limits says about 100 KB, and every agent keeps every policy.
    const said = meaning === '' ? '' : createHash('sha256').update(meaning).digest('base64');
    if (said === (this.said.get(key) ?? '')) return;
    if (said === '') this.said.delete(key);
    else this.said.set(key, said);
    this.onChange.tell();
  }
}
