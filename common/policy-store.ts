// The sidecar policies (R54) and the namespace labels their selectors read, from three watches.
// Plumbing only: what a policy object means is the caller's (`project`, `meaning`).
import { createHash } from 'node:crypto';
import type { KubeApi } from './kube/api.ts';
import type { Logger } from './log.ts';
import { Listeners } from './listeners.ts';
import { ProjectingInformer, splitKey } from './informer.ts';
import { resourcePath } from './kube/paths.ts';

export type PolicyScope = 'cluster' | 'namespaced';

/** How long changes are gathered before their scopes are told (onScopeChange): an edit loop is one re-evaluation per moment. */
const SCOPE_GATHER_MS = 250;

/** Whose Pods a change may concern: every namespace's (a cluster policy), or these namespaces'. */
export type ChangedScope = 'cluster' | ReadonlySet<string>;

/** The keys a cache keeps in the scope. */
export function keysInScope(scope: ChangedScope, cache: { keys(): Iterable<string>; keysIn(namespace: string): string[] }): string[] {
  return scope === 'cluster' ? [...cache.keys()] : [...scope].flatMap((namespace) => cache.keysIn(namespace));
}

interface NamespaceObject {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
}

export interface PolicyStoreDeps<W> {
  client: Pick<KubeApi, 'get' | 'watch'>;
  clusterPath: string;
  /** The namespaced policies' collection: of every namespace, or of one. */
  namespacedPath: (namespace?: string) => string;
  /** One policy object as kept: read and bounded once, as it arrives. */
  project: (object: unknown, scope: PolicyScope) => W;
  /** What one kept policy says, as text that changes only when its meaning does (not on a status write); '' for nothing in effect. */
  meaning: (policy: W) => string;
  /** Namespace labels kept at most; a namespace with more has none kept (its selectors match nothing). */
  maxLabels: number;
  onRestart: (resource: string) => void;
  /** Told of each object left out because it could not be read. */
  onUnreadable: (resource: string) => void;
  /**
   * Namespaces whose namespaced policies are kept in full (the agent: those with Pods on its node);
   * of the others only their names. Absent: every namespace's. Tell the store when the answer
   * changes (namespaceNeeded, namespaceNotNeeded).
   */
  keepsNamespace?: (namespace: string) => boolean;
  log: Logger;
}

/** A namespaced policy of a namespace not kept: nothing of it is in effect here. */
interface NotKept { notKept: true }
const NOT_KEPT: NotKept = { notKept: true };
const isNotKept = (kept: unknown): kept is NotKept => kept === NOT_KEPT;

export class PolicyStore<W> {
  private readonly clusterPolicies: ProjectingInformer<{ metadata?: { name?: string } }, W>;
  private readonly namespacedPolicies: ProjectingInformer<{ metadata?: { name?: string; namespace?: string } }, W | NotKept>;
  private readonly namespaces: ProjectingInformer<NamespaceObject, { labels?: Record<string, string> }>;
  private readonly meaning: (policy: W) => string;
  /** A digest of what each kept policy says, by scope and key: an event that changes none of it is no change. */
  private readonly said = new Map<string, string>();
  /** Each namespace's kept labels as last seen (JSON): a change is a change of its scope. */
  private readonly labelsSeen = new Map<string, string>();
  /** Scopes changed and not told yet: 'cluster' takes in every namespace. */
  private gathered: 'cluster' | Set<string> | undefined;
  private gatherTimer: NodeJS.Timeout | undefined;
  /** What the policies say changed (told at once, before onScopeChange). */
  readonly onChange = new Listeners<[]>();
  /**
   * Whose Pods the policies may decide otherwise now, gathered for a moment: a policy changed what
   * it says, or a namespace got other labels (or was first seen) so that other cluster policies
   * may pick its Pods. A cache decides those Pods again from what it keeps, listing nothing.
   */
  readonly onScopeChange = new Listeners<[scope: ChangedScope]>();

  constructor(deps: PolicyStoreDeps<W>) {
    const { client, log, onRestart, onUnreadable, keepsNamespace } = deps;
    this.meaning = deps.meaning;
    const informerOptions = (scope: PolicyScope, path: string) => ({
      client, path, log,
      // A cluster without the policy CRDs runs without policies (an older install's CRDs).
      mayBeAbsent: true,
      onChange: (key: string, policy: W | NotKept | undefined) => this.changed(scope, key, isNotKept(policy) ? undefined : policy),
      onRestart: () => onRestart(path.slice(path.lastIndexOf('/') + 1)),
      onUnreadable: () => onUnreadable(path.slice(path.lastIndexOf('/') + 1)),
    });
    this.clusterPolicies = new ProjectingInformer<{ metadata?: { name?: string } }, W>({
      ...informerOptions('cluster', deps.clusterPath),
      project: (object) => deps.project(object, 'cluster'),
    });
    this.namespacedPolicies = new ProjectingInformer<{ metadata?: { name?: string; namespace?: string } }, W | NotKept>({
      ...informerOptions('namespaced', deps.namespacedPath()),
      project: (object) => (!keepsNamespace || keepsNamespace(object.metadata?.namespace ?? '') ? deps.project(object, 'namespaced') : NOT_KEPT),
      namespacePath: deps.namespacedPath,
      isPartial: isNotKept,
    });
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
        if (now !== undefined && before !== now) this.gather(name);
      },
      onRestart: () => onRestart('namespaces'),
      onUnreadable: () => onUnreadable('namespaces'),
    });
  }

  /** Every policy kept, valid or not. */
  all(): W[] {
    return [...this.clusterPolicies.list(), ...this.namespacedPolicies.list().filter((p): p is W => !isNotKept(p))];
  }

  /**
   * keepsNamespace now says yes to the namespace: its policies, of which only the names were kept,
   * are read again (one list of the namespace); the watch brings every later change.
   */
  async namespaceNeeded(namespace: string): Promise<void> {
    await this.namespacedPolicies.refreshNamespace(namespace);
  }

  /** keepsNamespace now says no to the namespace: of its policies only the names are kept. */
  namespaceNotNeeded(namespace: string): void {
    this.namespacedPolicies.narrowNamespace(namespace, () => NOT_KEPT);
  }

  /** The namespace's labels; undefined when not known (or too many to read). */
  namespaceLabels(namespace: string): Readonly<Record<string, string>> | undefined {
    return this.namespaces.get(namespace)?.labels;
  }

  isSynced(): boolean {
    return this.clusterPolicies.isSynced() && this.namespacedPolicies.isSynced() && this.namespaces.isSynced();
  }

  /** Every watch is synced and none has failed since it last delivered something (ProjectingInformer.isCurrent). */
  isCurrent(): boolean {
    return this.clusterPolicies.isCurrent() && this.namespacedPolicies.isCurrent() && this.namespaces.isCurrent();
  }

  start(): void {
    this.namespaces.start();
    this.clusterPolicies.start();
    this.namespacedPolicies.start();
  }

  stop(): void {
    clearTimeout(this.gatherTimer);
    this.namespaces.stop();
    this.clusterPolicies.stop();
    this.namespacedPolicies.stop();
  }

  private changed(scope: PolicyScope, key: string, policy: W | undefined): void {
    const meaning = policy === undefined ? '' : this.meaning(policy);
    // Kept as a digest, not a second copy of what it says (up to the size budget, for every policy kept).
    const said = meaning === '' ? '' : createHash('sha256').update(meaning).digest('base64');
    const saidKey = `${scope}/${key}`;
    if (said === (this.said.get(saidKey) ?? '')) return;
    if (said === '') this.said.delete(saidKey);
    else this.said.set(saidKey, said);
    this.onChange.tell();
    this.gather(scope === 'cluster' ? 'cluster' : splitKey(key)[0]);
  }

  private gather(scope: 'cluster' | string): void {
    if (scope === 'cluster') this.gathered = 'cluster';
    else if (this.gathered === undefined) this.gathered = new Set([scope]);
    else if (this.gathered !== 'cluster') this.gathered.add(scope);
    this.gatherTimer ??= setTimeout(() => {
      this.gatherTimer = undefined;
      const told = this.gathered;
      this.gathered = undefined;
      if (told) this.onScopeChange.tell(told);
    }, SCOPE_GATHER_MS);
  }
}
