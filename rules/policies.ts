// Sidecar policies (R54): containers made sidecars by a cluster-wide or namespace-wide rule instead of
// a marker in every Pod, for the sidecars a webhook injects. Parsed and bounded here, matched here;
// the Pod's own markers always win over any policy.
import type { ActedOnPods, SidecarPolicyStatus } from '../api/sidecar-policy.ts';
import { CLUSTER_POLICY_KIND, clusterPolicyPath, MAX_RECENT_PODS, NAMESPACED_POLICY_KIND, namespacedPolicyPath, POLICY_CONDITION_READY, POLICY_CONDITION_VALID } from '../api/sidecar-policy.ts';
import type { PolicyScope } from '../common/policy-store.ts';
import { EVENT_REASONS } from '../api/names.ts';
import type { DecisionEvent } from './events.ts';
import { normal } from './events.ts';
import { normalizedImage } from './image-reference.ts';
import type { ContainerProjection, PodProjection } from './projection.ts';
import { MAX_IMAGE_REFERENCE_LENGTH, MAX_POD_LABELS } from './projection.ts';
import type { PolicyMarker, PolicyMode, StopCommand } from './policy-marker.ts';


export type { PolicyScope };

/** Bounds the CRDs set too: a policy over them is invalid, whatever reached us. */
export const MAX_POLICY_CONTAINERS = 16;
export const MAX_PATTERN_CHARS = 256;
export const MAX_SELECTOR_TERMS = 16;
export const MAX_SELECTOR_VALUES = 64;
export const MAX_STOP_TIER = 9;
export const MAX_STOP_COMMAND_ARGS = 32;
export const MAX_STOP_COMMAND_ARG_CHARS = 1024;
/**
 * Characters of a policy's names, patterns, images, labels and commands in all (its CRD's rule, by
 * CEL size(): code points): what every agent and the controller keep of one policy stays small.
 */
export const MAX_POLICY_SPEC_CHARS = 8192;

export interface SelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values: string[];
}

/** A Kubernetes label selector; empty selects everything. */
export interface LabelSelector {
  matchLabels: Record<string, string>;
  matchExpressions: SelectorRequirement[];
}

/** What a policy says of the containers one of its entries matches. */
export interface ContainerRule {
  /** Glob (`*`, `?`) on the container's name; absent matches any name. */
  name?: string;
  /** Glob on the image, as written in the Pod or spelled out in full; absent matches any image. */
  image?: string;
  ignoreExitCode: boolean;
  /** The image swapped in on virtual and agentless nodes. */
  swapImage?: string;
  /** R53: stopped only once every running sidecar of a lower tier has exited. */
  stopTier: number;
  /**
   * Run inside the container before kubelet's own stop. Cluster policies only: a namespace user
   * must not make the agent run a command that neither the Pod spec nor a cluster administrator named.
   */
  stopCommand?: string[];
}

export interface SidecarPolicy {
  scope: PolicyScope;
  /** The namespaced policy's own namespace; absent for a cluster policy. */
  namespace?: string;
  name: string;
  mode: PolicyMode;
  /** Cluster policies only; absent selects every namespace. */
  namespaceSelector: LabelSelector;
  podSelector: LabelSelector;
  containers: ContainerRule[];
}

/** A policy as read: usable, or refused with the reason its status gives. */
export type ParsedPolicy = { valid: true; policy: SidecarPolicy } | { valid: false; reason: string };

/** How a policy is named in events and metrics: `ClusterSidecarPolicy/x` or `SidecarPolicy/ns/x`. */
export function policyId(policy: Pick<SidecarPolicy, 'scope' | 'namespace' | 'name'>): string {
  return policy.scope === 'cluster' ? `${CLUSTER_POLICY_KIND}/${policy.name}` : `${NAMESPACED_POLICY_KIND}/${policy.namespace}/${policy.name}`;
}

/** One policy as kept from the watch: where it is, what it says (or why it cannot be read), its status as last written. */
export interface WatchedPolicy {
  scope: PolicyScope;
  namespace?: string;
  name: string;
  generation?: number;
  /** The object's version: a status write that adds to its counts is made against it (a conflict waits for the next round). */
  resourceVersion?: string;
  parsed: ParsedPolicy;
  status: SidecarPolicyStatus;
}

export function watchedPolicy(object: unknown, scope: PolicyScope): WatchedPolicy {
  const o = (typeof object === 'object' && object !== null ? object : {}) as { metadata?: Record<string, unknown>; status?: SidecarPolicyStatus };
  const meta = o.metadata ?? {};
  return {
    scope,
    ...(scope === 'namespaced' ? { namespace: String(meta.namespace ?? '') } : {}),
    name: String(meta.name ?? ''),
    ...(typeof meta.generation === 'number' ? { generation: meta.generation } : {}),
    ...(typeof meta.resourceVersion === 'string' ? { resourceVersion: meta.resourceVersion.slice(0, 64) } : {}),
    parsed: parsePolicy(object, scope),
    status: keptStatus(o.status),
  };
}

/** The status as we write it, for telling whether it needs writing again; anything else in it is not kept. */
function keptStatus(status: SidecarPolicyStatus | undefined): SidecarPolicyStatus {
  const ours = [POLICY_CONDITION_VALID, POLICY_CONDITION_READY].flatMap((type) => status?.conditions?.find((c) => c.type === type) ?? []);
  const audit = keptActedOn(status?.audit);
  const enforce = keptActedOn(status?.enforce);
  return {
    ...(typeof status?.observedGeneration === 'number' ? { observedGeneration: status.observedGeneration } : {}),
    ...(typeof status?.matchedPods === 'number' ? { matchedPods: status.matchedPods } : {}),
    ...(audit ? { audit } : {}),
    ...(enforce ? { enforce } : {}),
    ...(ours.length > 0 ? { conditions: ours.map((c) => ({ ...c, message: String(c.message).slice(0, 1024) })) } : {}),
  };
}

/** The count and the last few Pods, as written: bounded whatever the object holds. */
function keptActedOn(acted: ActedOnPods | undefined): ActedOnPods | undefined {
  if (typeof acted?.pods !== 'number') return undefined;
  const recent = (Array.isArray(acted.recent) ? acted.recent : []).slice(0, MAX_RECENT_PODS)
    .map((p) => ({ namespace: String(p?.namespace ?? '').slice(0, 63), name: String(p?.name ?? '').slice(0, 253), time: String(p?.time ?? '').slice(0, 64) }));
  return { pods: acted.pods, recent };
}

/** What a policy says, as text: a status write does not change it; an invalid one says nothing. */
export function policyMeaning(watched: WatchedPolicy): string {
  return watched.parsed.valid ? JSON.stringify(watched.parsed.policy) : '';
}

/** How both parts watch the policies (common/policy-store.ts): the paths, and what a policy object means. */
export const POLICY_WATCH = {
  clusterPath: clusterPolicyPath(),
  namespacedPath: (namespace?: string) => namespacedPolicyPath(namespace),
  project: watchedPolicy,
  meaning: policyMeaning,
  maxLabels: MAX_POD_LABELS,
};

/** Where the policies and namespace labels are read from: the watches, which say when the policies change. */
export interface PolicySource {
  all(): readonly WatchedPolicy[];
  namespaceLabels(namespace: string): Readonly<Record<string, string>> | undefined;
  onChange: { add(listener: () => void): void };
}

/** The valid policies by where they may apply, in precedence order; built again when the policies change (refresh). */
export class PoliciesInEffect {
  private readonly source: PolicySource;
  private cluster: SidecarPolicy[] = [];
  private namespaced = new Map<string, SidecarPolicy[]>();
  private perNamespace = new Map<string, readonly SidecarPolicy[]>();
  /** The policies changed since the lists were built: built again when next read, once for a whole burst of changes. */
  private stale = true;

  constructor(source: PolicySource) {
    this.source = source;
    source.onChange.add(() => {
      this.stale = true;
    });
  }

  private refresh(): void {
    this.stale = false;
    this.cluster = [];
    this.namespaced = new Map();
    this.perNamespace = new Map();
    for (const w of this.source.all()) {
      if (!w.parsed.valid) continue;
      const p = w.parsed.policy;
      if (p.scope === 'cluster') {
        this.cluster.push(p);
        continue;
      }
      const list = this.namespaced.get(p.namespace!) ?? [];
      list.push(p);
      this.namespaced.set(p.namespace!, list);
    }
  }

  /** The cluster's policies and the namespace's own, in precedence order. */
  forNamespace(namespace: string): readonly SidecarPolicy[] {
    if (this.stale) this.refresh();
    let policies = this.perNamespace.get(namespace);
    if (!policies) {
      policies = precedenceOrder([...(this.namespaced.get(namespace) ?? []), ...this.cluster]);
      this.perNamespace.set(namespace, policies);
    }
    return policies;
  }

  /** The Pod with the policies that apply to it laid over. */
  apply(pod: PodProjection): PodProjection {
    return applyPolicies(pod, this.source.namespaceLabels(pod.namespace), this.forNamespace(pod.namespace));
  }

  /** Whether some policy that applies to the Pod (its namespace, its selectors) could match one of its containers (the caches' pre-filter). */
  mayMatch(pod: PodProjection): boolean {
    return mayMatchPolicy(pod, this.source.namespaceLabels(pod.namespace), this.forNamespace(pod.namespace));
  }
}

// ---- parsing: every field checked and bounded, never trusted ----

class Invalid extends Error {}

/** Reads one policy object of either kind; anything out of shape or bounds makes it invalid, never a throw. */
export function parsePolicy(object: unknown, scope: PolicyScope): ParsedPolicy {
  try {
    const o = record(object, 'the object');
    const meta = record(o.metadata, 'metadata');
    const spec = record(o.spec, 'spec');
    const name = text(meta.name, 'metadata.name', 253);
    const namespace = scope === 'namespaced' ? text(meta.namespace, 'metadata.namespace', 63) : undefined;
    if (scope === 'namespaced' && spec.namespaceSelector !== undefined) {
      throw new Invalid('spec.namespaceSelector: a SidecarPolicy applies to its own namespace only');
    }
    // Audit unless it says Enforce: a new policy reports what it would do before it acts.
    const mode = spec.mode === undefined ? 'Audit' : spec.mode;
    if (mode !== 'Enforce' && mode !== 'Audit') throw new Invalid('spec.mode: must be Enforce or Audit');
    const entries = list(spec.containers, 'spec.containers', MAX_POLICY_CONTAINERS);
    if (entries.length === 0) throw new Invalid('spec.containers: at least one entry is needed');
    const policy: SidecarPolicy = {
      scope,
      ...(namespace !== undefined ? { namespace } : {}),
      name,
      mode,
      namespaceSelector: selector(spec.namespaceSelector, 'spec.namespaceSelector'),
      podSelector: selector(spec.podSelector, 'spec.podSelector'),
      containers: entries.map((e, i) => containerRule(e, `spec.containers[${i}]`, scope)),
    };
    const chars = specChars(policy);
    if (chars > MAX_POLICY_SPEC_CHARS) {
      throw new Invalid(`spec: ${chars} characters of names, patterns, images, labels and commands in all, more than ${MAX_POLICY_SPEC_CHARS}`);
    }
    return { valid: true, policy };
  } catch (err) {
    if (err instanceof Invalid) return { valid: false, reason: err.message };
    throw err;
  }
}

/** The characters MAX_POLICY_SPEC_CHARS bounds, counted as CEL's size() counts them (code points). */
export function specChars(policy: SidecarPolicy): number {
  const chars = (s: string | undefined) => (s === undefined ? 0 : [...s].length);
  const selectorChars = (sel: LabelSelector) =>
    Object.entries(sel.matchLabels).reduce((n, [k, v]) => n + chars(k) + chars(v), 0) +
    sel.matchExpressions.reduce((n, e) => n + chars(e.key) + e.values.reduce((m, v) => m + chars(v), 0), 0);
  const entryChars = (r: ContainerRule) => chars(r.name) + chars(r.image) + chars(r.swapImage) + (r.stopCommand ?? []).reduce((n, a) => n + chars(a), 0);
  return selectorChars(policy.namespaceSelector) + selectorChars(policy.podSelector) + policy.containers.reduce((n, r) => n + entryChars(r), 0);
}

function containerRule(value: unknown, at: string, scope: PolicyScope): ContainerRule {
  const o = record(value, at);
  const name = optionalText(o.name, `${at}.name`, MAX_PATTERN_CHARS);
  const image = optionalText(o.image, `${at}.image`, MAX_PATTERN_CHARS);
  if (name === undefined && image === undefined) throw new Invalid(`${at}: name or image is needed (an empty entry would match every container)`);
  if ((name === undefined || matchesEveryString(name)) && (image === undefined || matchesEveryString(image))) {
    throw new Invalid(`${at}: its patterns match every name and image, so every container, mains too`);
  }
  const swapImage = optionalText(o.swapImage, `${at}.swapImage`, MAX_PATTERN_CHARS);
  const stopTier = o.stopTier === undefined ? 0 : o.stopTier;
  if (typeof stopTier !== 'number' || !Number.isInteger(stopTier) || stopTier < 0 || stopTier > MAX_STOP_TIER) {
    throw new Invalid(`${at}.stopTier: must be a whole number from 0 to ${MAX_STOP_TIER}`);
  }
  if (o.ignoreExitCode !== undefined && typeof o.ignoreExitCode !== 'boolean') throw new Invalid(`${at}.ignoreExitCode: must be true or false`);
  const stopCommand = o.stopCommand === undefined ? undefined : command(o.stopCommand, `${at}.stopCommand`, scope);
  return {
    ...(name !== undefined ? { name } : {}),
    ...(image !== undefined ? { image } : {}),
    ignoreExitCode: o.ignoreExitCode === true,
    ...(swapImage ? { swapImage } : {}),
    stopTier,
    ...(stopCommand ? { stopCommand } : {}),
  };
}

/**
 * A pattern of stars and question marks only, with a star: it matches every name or image longer
 * than its question marks, so in practice every container. The CRDs' rule says the same.
 */
export function matchesEveryString(pattern: string): boolean {
  return pattern.includes('*') && [...pattern].every((ch) => ch === '*' || ch === '?');
}

function command(value: unknown, at: string, scope: PolicyScope): string[] {
  if (scope !== 'cluster') throw new Invalid(`${at}: only a ClusterSidecarPolicy may name a command to run in a container`);
  const args = list(value, at, MAX_STOP_COMMAND_ARGS).map((a, i) => text(a, `${at}[${i}]`, MAX_STOP_COMMAND_ARG_CHARS, i > 0));
  if (args.length === 0) throw new Invalid(`${at}: the command is empty`);
  return args;
}

function selector(value: unknown, at: string): LabelSelector {
  if (value === undefined || value === null) return { matchLabels: {}, matchExpressions: [] };
  const o = record(value, at);
  const labels = o.matchLabels === undefined ? {} : record(o.matchLabels, `${at}.matchLabels`);
  const labelEntries = Object.entries(labels);
  if (labelEntries.length > MAX_SELECTOR_TERMS) throw new Invalid(`${at}.matchLabels: at most ${MAX_SELECTOR_TERMS} labels`);
  const matchLabels: Record<string, string> = {};
  for (const [key, v] of labelEntries) matchLabels[text(key, `${at}.matchLabels key`, 317)] = text(v, `${at}.matchLabels.${key}`, 63, true);
  const expressions = list(o.matchExpressions ?? [], `${at}.matchExpressions`, MAX_SELECTOR_TERMS).map((e, i): SelectorRequirement => {
    const where = `${at}.matchExpressions[${i}]`;
    const r = record(e, where);
    const operator = r.operator;
    if (operator !== 'In' && operator !== 'NotIn' && operator !== 'Exists' && operator !== 'DoesNotExist') {
      throw new Invalid(`${where}.operator: must be In, NotIn, Exists or DoesNotExist`);
    }
    const values = list(r.values ?? [], `${where}.values`, MAX_SELECTOR_VALUES).map((v, j) => text(v, `${where}.values[${j}]`, 63, true));
    const needsValues = operator === 'In' || operator === 'NotIn';
    if (needsValues !== values.length > 0) throw new Invalid(`${where}.values: ${needsValues ? 'needed' : 'not allowed'} with ${operator}`);
    return { key: text(r.key, `${where}.key`, 317), operator, values };
  });
  return { matchLabels, matchExpressions: expressions };
}

function record(value: unknown, at: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Invalid(`${at}: must be an object`);
  return value as Record<string, unknown>;
}

function list(value: unknown, at: string, max: number): unknown[] {
  if (!Array.isArray(value)) throw new Invalid(`${at}: must be a list`);
  if (value.length > max) throw new Invalid(`${at}: at most ${max} entries`);
  return value;
}

function text(value: unknown, at: string, max: number, emptyAllowed = false): string {
  if (typeof value !== 'string' || (!emptyAllowed && value === '')) throw new Invalid(`${at}: must be a non-empty string`);
  if (value.length > max) throw new Invalid(`${at}: at most ${max} characters`);
  return value;
}

function optionalText(value: unknown, at: string, max: number): string | undefined {
  return value === undefined ? undefined : text(value, at, max);
}

// ---- matching ----

/** A value longer than any container name or image reference matches no pattern (MAX_IMAGE_REFERENCE_LENGTH). */
export const MAX_GLOB_VALUE_CHARS = MAX_IMAGE_REFERENCE_LENGTH;

/** A pattern cut at its stars: `a*b?c*` is ['a', 'b?c', '']. */
type Glob = readonly string[];

/** Patterns compiled at most, then the cache starts over: policies hold 16 entries each, two patterns an entry. */
const MAX_COMPILED_GLOBS = 4096;
const compiledGlobs = new Map<string, Glob>();

function compiledGlob(pattern: string): Glob {
  let glob = compiledGlobs.get(pattern);
  if (!glob) {
    if (compiledGlobs.size >= MAX_COMPILED_GLOBS) compiledGlobs.clear();
    glob = pattern.split('*');
    compiledGlobs.set(pattern, glob);
  }
  return glob;
}

/** Whether `segment` (with `?` for any one character) matches `value` at `at`. */
function segmentAt(segment: string, value: string, at: number): boolean {
  // A literal piece is compared natively: the agent runs interpreted, where a loop costs per character.
  if (!segment.includes('?')) return value.startsWith(segment, at);
  for (let i = 0; i < segment.length; i++) {
    if (segment[i] !== '?' && segment[i] !== value[at + i]) return false;
  }
  return true;
}

/** Where `segment` first matches `value`, from `from` up to `last` (its last possible start); -1 if nowhere. */
function findSegment(segment: string, value: string, from: number, last: number): number {
  if (!segment.includes('?')) {
    const at = value.indexOf(segment, from);
    return at >= 0 && at <= last ? at : -1;
  }
  for (let at = from; at <= last; at++) if (segmentAt(segment, value, at)) return at;
  return -1;
}

/**
 * `*` matches any run of characters, `?` any one; everything else itself. The pattern is cut at
 * its stars once (compiled, and kept); then the first piece must start the value, the last end it,
 * and each piece between is taken where it first fits (what is left after it can only help the
 * next ones), literal pieces found by indexOf. No regular expression is built from user input, and
 * a value longer than any name or image reference matches nothing.
 */
export function globMatches(pattern: string, value: string): boolean {
  if (value.length > MAX_GLOB_VALUE_CHARS) return false;
  const glob = compiledGlob(pattern);
  const first = glob[0]!;
  if (glob.length === 1) return first.length === value.length && segmentAt(first, value, 0);
  const lastPiece = glob.at(-1)!;
  const end = value.length - lastPiece.length;
  if (end < first.length || !segmentAt(first, value, 0) || !segmentAt(lastPiece, value, end)) return false;
  let at = first.length;
  for (let i = 1; i < glob.length - 1; i++) {
    const piece = glob[i]!;
    const found = findSegment(piece, value, at, end - piece.length);
    if (found < 0) return false;
    at = found + piece.length;
  }
  return true;
}

export function selectorMatches(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels)) if (labels[key] !== value) return false;
  return selector.matchExpressions.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.operator) {
      case 'In': return has && r.values.includes(labels[r.key]!);
      case 'NotIn': return !has || !r.values.includes(labels[r.key]!);
      case 'Exists': return has;
      case 'DoesNotExist': return !has;
    }
  });
}

function readsLabels(selector: LabelSelector): boolean {
  return Object.keys(selector.matchLabels).length > 0 || selector.matchExpressions.length > 0;
}

function ruleMatches(rule: ContainerRule, container: ContainerProjection): boolean {
  if (rule.name !== undefined && !globMatches(rule.name, container.name)) return false;
  if (rule.image === undefined) return true;
  if (container.imageTooLong) return false;
  return globMatches(rule.image, container.image) || globMatches(rule.image, spelledOut(container.image));
}

/** The last image spelled out in full, and what it was: a Pod's image is tried by every entry of every policy in a row. */
let lastSpelledOut = { image: '', full: normalizedImage('') };

function spelledOut(image: string): string {
  if (lastSpelledOut.image !== image) lastSpelledOut = { image, full: normalizedImage(image) };
  return lastSpelledOut.full;
}

/** An entry that would have matched the container, had its image pattern been tried (the image is too long to be). */
function imagePatternUntried(policy: SidecarPolicy, container: ContainerProjection): boolean {
  return container.imageTooLong === true && policy.containers.some((r) => r.image !== undefined && (r.name === undefined || globMatches(r.name, container.name)));
}

/**
 * Answers remembered at most, over all policies, then the memory starts over: at most this many
 * image strings (each within MAX_IMAGE_REFERENCE_LENGTH) are held for it.
 */
const MAX_REMEMBERED_ANSWERS = 4096;
/** The key of every image too long to keep: it matches no image pattern, whatever it says. */
const IMAGE_TOO_LONG = '\0';
/**
 * Per policy object (one per generation: a changed policy is parsed anew), the index of its first
 * entry matching a container, by name, then image: every event of a Pod asks again, and the answer
 * only changes with the policy. Keyed by the projection's own strings, whose hashes the engine
 * keeps: no key is built per question.
 */
let firstEntries = new WeakMap<SidecarPolicy, Map<string, Map<string, number>>>();
let rememberedAnswers = 0;

function firstEntry(policy: SidecarPolicy, container: ContainerProjection): ContainerRule | undefined {
  const image = container.imageTooLong ? IMAGE_TOO_LONG : container.image;
  let index = firstEntries.get(policy)?.get(container.name)?.get(image);
  if (index === undefined) {
    index = policy.containers.findIndex((r) => ruleMatches(r, container));
    if (rememberedAnswers >= MAX_REMEMBERED_ANSWERS) {
      firstEntries = new WeakMap();
      rememberedAnswers = 0;
    }
    let byName = firstEntries.get(policy);
    if (!byName) firstEntries.set(policy, (byName = new Map()));
    let byImage = byName.get(container.name);
    if (!byImage) byName.set(container.name, (byImage = new Map()));
    byImage.set(image, index);
    rememberedAnswers++;
  }
  return index < 0 ? undefined : policy.containers[index];
}

/**
 * Policies in the order they are tried: the Pod's namespace's own, then the cluster's, each by name.
 * The first policy with an entry matching a container decides for it; within a policy, the first entry.
 */
export function precedenceOrder(policies: readonly SidecarPolicy[]): SidecarPolicy[] {
  const rank = (p: SidecarPolicy) => (p.scope === 'namespaced' ? 0 : 1);
  return [...policies].sort((a, b) => rank(a) - rank(b) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Whether any own marker (env, an explicit `false` in it, or our annotations, the mains one too)
 * names the container: then no policy applies to it. The Pod's author decides first.
 */
function ownMarked(pod: PodProjection, container: ContainerProjection): boolean {
  const m = container.markers;
  if (m.whenJobExit || m.withImage !== undefined || m.ignoreExitCode || m.keepsMain) return true;
  const a = pod.annotations;
  return [a.sidecars, a.ignoreExitCode, a.stopLast, a.mains].some((list) => list.containers.includes(container.name));
}

/**
 * The Pod with each container's policy marker set: from the first policy (precedenceOrder) that
 * applies to the Pod and has an entry for the container, in that policy's mode (Enforce: `policy`,
 * Audit: `auditPolicy`; never both).
 * `namespaceLabels` is undefined when the namespace is not known yet: cluster policies with a
 * namespace selector then apply nowhere (never guessed).
 */
export function applyPolicies(
  pod: PodProjection,
  namespaceLabels: Readonly<Record<string, string>> | undefined,
  policies: readonly SidecarPolicy[],
): PodProjection {
  const applying = precedenceOrder(policies).filter((p) => appliesTo(p, pod, namespaceLabels));
  if (applying.length === 0) return pod;
  const containers = pod.containers.map((container): ContainerProjection => {
    if (ownMarked(pod, container)) return container;
    const marker = firstMarker(applying, container);
    if (!marker) {
      const untried = applying.find((p) => imagePatternUntried(p, container));
      return untried ? { ...container, imagePatternUntried: policyId(untried) } : container;
    }
    // The first matching policy decides, in its own mode: an Audit one shadows an Enforce one after it.
    return { ...container, ...(marker.mode === 'Enforce' ? { policy: marker } : { auditPolicy: marker }) };
  });
  return { ...pod, containers };
}

function appliesTo(policy: SidecarPolicy, pod: PodProjection, namespaceLabels: Readonly<Record<string, string>> | undefined): boolean {
  if (policy.scope === 'namespaced') {
    if (policy.namespace !== pod.namespace) return false;
  } else if (readsLabels(policy.namespaceSelector)) {
    if (!namespaceLabels || !selectorMatches(policy.namespaceSelector, namespaceLabels)) return false;
  }
  if (!readsLabels(policy.podSelector)) return true;
  return !pod.labelsTruncated && selectorMatches(policy.podSelector, pod.labels);
}

function firstMarker(policies: readonly SidecarPolicy[], container: ContainerProjection): PolicyMarker | undefined {
  for (const policy of policies) {
    const rule = firstEntry(policy, container);
    if (!rule) continue;
    return {
      policy: policyId(policy),
      mode: policy.mode,
      ignoreExitCode: rule.ignoreExitCode,
      ...(rule.swapImage ? { swapImage: rule.swapImage } : {}),
      stopTier: rule.stopTier,
      ...(rule.stopCommand ? { stopCommand: rule.stopCommand } : {}),
    };
  }
  return undefined;
}

/** The Pod as it would be were its Audit policies enforced: what audit mode reports on. */
export function auditedAsEnforced(pod: PodProjection): PodProjection {
  if (!pod.containers.some((c) => c.auditPolicy && !c.policy)) return pod;
  return {
    ...pod,
    containers: pod.containers.map((c) => (c.auditPolicy && !c.policy ? { ...c, policy: c.auditPolicy } : c)),
  };
}

/** By container name: the stop commands the Enforce policies applied to the Pod give (an Audit policy runs nothing). */
export function stopCommandsOf(pod: PodProjection): Map<string, StopCommand> {
  const commands = new Map<string, StopCommand>();
  for (const c of pod.containers) if (c.policy?.stopCommand) commands.set(c.name, { command: c.policy.stopCommand, policy: c.policy.policy });
  return commands;
}

/**
 * Cheap pre-filter for the caches: some policy that applies to the Pod (its namespace and selectors,
 * as applyPolicies reads them) has an entry that could match one of its containers.
 */
export function mayMatchPolicy(pod: PodProjection, namespaceLabels: Readonly<Record<string, string>> | undefined, policies: readonly SidecarPolicy[]): boolean {
  return policies.some((p) => appliesTo(p, pod, namespaceLabels) &&
    // A container whose image could not be tried is decided too: for its Warning.
    pod.containers.some((c) => firstEntry(p, c) !== undefined || imagePatternUntried(p, c)));
}

/**
 * A Pod a policy may yet concern, whatever the policies say now: a Job's Pod (restartPolicy Never or
 * OnFailure) not finished. The caches keep these, so that a change of the policies or of a
 * namespace's labels is decided again from what they keep, without listing Pods.
 */
export function policyMayYetMark(pod: PodProjection): boolean {
  return (pod.restartPolicy === 'Never' || pod.restartPolicy === 'OnFailure') && pod.phase !== 'Succeeded' && pod.phase !== 'Failed';
}

/** A sidecar an Audit policy would stop, where it comes in the stop order (R53, R23). */
export interface AuditedStop {
  container: string;
  policy: string;
  tier: number;
  ignoreExitCode: boolean;
  stopCommand: boolean;
}

/**
 * The one Event per Pod of audit mode: all that enforcing would do. On a real node every sidecar the
 * Audit policies mark, in stop order (`stops` comes sorted), with its tier and command, and the phase
 * it would set; elsewhere the images it would swap.
 */
export function policyAuditEvent(stops: readonly AuditedStop[], action: 'createRequest' | 'swapImages', phaseFromMains?: 'Succeeded' | 'Failed'): DecisionEvent {
  const request = action === 'createRequest';
  const what = stops.map((s) => {
    // A swap runs no command: there is no agent to run it.
    const how = [...(request ? [`tier ${s.tier}`] : []), ...(s.ignoreExitCode ? ['ignore-exit-code'] : []), ...(s.stopCommand && request ? ['its stop command first'] : [])];
    return `"${s.container}" (${s.policy}${how.length > 0 ? `, ${how.join(', ')}` : ''})`;
  }).join(', ');
  const ignoring = stops.filter((s) => s.ignoreExitCode).map((s) => `"${s.container}"`);
  const phase = phaseFromMains && ignoring.length > 0
    ? ` Then the Pod's phase would be set to ${phaseFromMains} from the main containers, before the exit code of ${ignoring.join(', ')} could count.`
    : '';
  return normal(
    EVENT_REASONS.policyAudit,
    EVENT_REASONS.policyAudit,
    `Audit: the main containers are done and the policies would now stop ${what} ` +
      `${request ? 'through ContainerRecreateRequests, in that order' : 'by swapping their images, all at once'}.${phase} ` +
      'Nothing was stopped: the policy is in mode Audit; set spec.mode to Enforce to act.',
  );
}
