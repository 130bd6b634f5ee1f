// The compact view of a Pod kept for every watched Pod: only what the rules read, bounded in size.
import type { V1Container, V1ContainerStatus, V1EnvVar, V1Pod, V1ResourceRequirements } from '@kubernetes/client-node';
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_MIRROR_POD,
  ANNOTATION_SIDECARS,
  ANNOTATION_STOP_LAST,
  ANNOTATION_MAINS,
  CONDITION_ALL_CONTAINERS_RESTARTING,
  CONDITION_SIDECAR_TERMINATED,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  ENV_TERMINATE_WITH_IMAGE,
} from '../api/names.ts';
import { toMs } from '../common/time.ts';
import type { PolicyMarker } from './policy-marker.ts';
import type { RestartRuleProjection } from './restart-rules.ts';
import { matchingRule } from './restart-rules.ts';

/** Markers read from a container's env (literal `value` only). */
export interface EnvMarkers {
  /** ENV_TERMINATE_WHEN_JOB_EXIT is `true` in any letter case. */
  whenJobExit: boolean;
  /** ENV_TERMINATE_WITH_IMAGE, trimmed; absent when empty or longer than any image reference. */
  withImage?: string;
  /** ENV_IGNORE_EXIT_CODE is `true`; whether it counts is classify's business. */
  ignoreExitCode: boolean;
  /** ENV_TERMINATE_WHEN_JOB_EXIT is `false` in any letter case: the Pod's author says it is a main, which no policy overrides. */
  keepsMain?: true;
}

export interface ContainerProjection {
  name: string;
  /** The spec's image; empty when longer than any image reference (imageTooLong). */
  image: string;
  /** Its image is longer than any reference (MAX_IMAGE_REFERENCE_LENGTH): not kept, and matched by no image pattern (R54). */
  imageTooLong?: true;
  markers: EnvMarkers;
  /** Its own restartPolicy and rules, when it sets a restartPolicy (rules count only then). */
  restart?: ContainerRestartProjection;
  /** It has a liveness or startup probe: kubelet may kill it, and then restart it whatever its exit code. */
  probeKills: boolean;
  /** A resize of one of its resources restarts it (resizePolicy RestartContainer): kubelet kills it and starts it again. */
  restartsOnResize: boolean;
  /** The Enforce policy that makes it a sidecar (R54), set by applyPolicies, never by the projection. */
  policy?: PolicyMarker;
  /** The Audit policy that would (R54): reported, never acted on. */
  auditPolicy?: PolicyMarker;
  /** Set by applyPolicies: the first policy applying to the Pod whose image pattern could not be tried on it (imageTooLong), when none marks it. */
  imagePatternUntried?: string;
}

/** `containers[].restartPolicy` and `restartPolicyRules`, as kubelet reads them after an exit (R7). */
export interface ContainerRestartProjection {
  policy: string;
  rules: RestartRuleProjection[];
}

/** The API server allows 20 rules a container and 255 codes a rule. */
const MAX_RESTART_RULES = 20;
const MAX_RULE_EXIT_CODES = 255;
const RESTART_ALL = 'RestartAllContainers';

/**
 * The current state only: the rules never read lastState. The one timestamp kept, finishedAt, only
 * bounds how long a sidecar that never started is waited for.
 */
export type ContainerStateProjection =
  | { kind: 'running' }
  | { kind: 'waiting'; reason?: string }
  | { kind: 'terminated'; exitCode: number; reason?: string; finishedAtMs?: number };

export interface ContainerStatusProjection {
  name: string;
  /** `<runtime>://<id>`, absent until the container was created. */
  containerID?: string;
  restartCount: number;
  state: ContainerStateProjection;
  /** The image kubelet reports the current container runs (absent when longer than any reference). */
  image?: string;
}

export interface PodProjection {
  namespace: string;
  name: string;
  uid: string;
  nodeName?: string;
  resourceVersion?: string;
  /** metadata.generation and status.observedGeneration, where the API server and kubelet keep them (1.34+ by default). */
  generation?: number;
  observedGeneration?: number;
  phase?: string;
  /** Defaults to `Always`, as the API server does. */
  restartPolicy: string;
  deleting: boolean;
  terminationGracePeriodSeconds?: number;
  /** status.startTime, else the creation time: where a wait starts when a main's finish time is unknown. */
  startTimeMs?: number;
  /** The Pod's labels, for policy selectors (R54); none kept when there are more than MAX_POD_LABELS. */
  labels: Record<string, string>;
  labelsTruncated: boolean;
  /** Our annotations, parsed here once and bounded whatever their size (never the raw strings). */
  annotations: { sidecars: NameListAnnotation; ignoreExitCode: NameListAnnotation; stopLast: NameListAnnotation; mains: NameListAnnotation };
  containers: ContainerProjection[];
  statuses: ContainerStatusProjection[];
  /** Kubelet's AllContainersRestarting condition is True: the whole Pod is starting over in place. */
  allContainersRestarting: boolean;
  /** Some container or init container has a rule restarting every container on some exit. */
  mayRestartAll: boolean;
  /** An init container's current exit matches such a rule: kubelet starts the Pod over. */
  initContainerRestartsAll: boolean;
  /**
   * Every init container's current state is terminated with exit code 0, restartable ones (native
   * sidecars) too: kubelet's phase leaves a stopped native sidecar's code out since 1.29, but not
   * every release that has them does.
   */
  initContainersDone: boolean;
  /** spec.activeDeadlineSeconds is set: kubelet fails the Pod at that deadline. */
  activeDeadline: boolean;
  /** A static Pod's mirror: kubelet gives those no terminal phase. */
  mirror: boolean;
  /**
   * It holds what kubelet's own managers hand out and take back only as they tear the Pod down:
   * it is Guaranteed (exclusive CPUs and memory where those managers are static), asks for a
   * resource other than cpu, memory and ephemeral-storage (devices, hugepages), or has a resource
   * claim. Until then kubelet still counts them taken, whatever the API says.
   */
  exclusiveResources: boolean;
  /** Our SidecarTerminated condition, if present. */
  sidecarTerminated?: { status: string; reason?: string; message?: string };
}

/** An annotation listing container names, as far as it was read. */
export interface NameListAnnotation {
  /** Names of the Pod's containers, deduplicated, in annotation order. */
  containers: string[];
  /** Names of the Pod's init containers: never classified, but named in a precise Warning. */
  initContainers: string[];
  /** The first few of the other names (each cut to a container name's length), for the Warning. */
  unknownSample: string[];
  /** How many other names were read in all. */
  unknownCount: number;
  /** The annotation was longer than what is read (MAX_ANNOTATION_CHARS, MAX_ANNOTATION_NAMES). */
  truncated: boolean;
}

/** Characters of an annotation read at most: Pod annotations may hold 256 KiB, container names do not need it. */
export const MAX_ANNOTATION_CHARS = 32_768;
/** Names of an annotation read at most. */
export const MAX_ANNOTATION_NAMES = 1_000;
/** Unknown names kept for the Warning. */
export const MAX_UNKNOWN_SAMPLE = 5;
/** Labels of a Pod kept for policy selectors; a Pod with more is matched by no selector that reads labels. */
export const MAX_POD_LABELS = 64;
/** A container name is a DNS label: at most 63 characters. */
export const MAX_CONTAINER_NAME_CHARS = 63;

export function projectPod(pod: V1Pod): PodProjection {
  const meta = pod.metadata ?? {};
  const spec = pod.spec;
  const status = pod.status;
  const condition = status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED);
  const containerNames = new Set((spec?.containers ?? []).map((c) => c.name));
  const initNames = new Set((spec?.initContainers ?? []).map((c) => c.name));
  const annotation = (key: string) => parseNameListAnnotation(meta.annotations?.[key], containerNames, initNames);
  const startTimeMs = toMs(status?.startTime) ?? toMs(meta.creationTimestamp);
  return {
    namespace: meta.namespace ?? '',
    name: meta.name ?? '',
    uid: meta.uid ?? '',
    nodeName: spec?.nodeName || undefined,
    resourceVersion: meta.resourceVersion,
    ...(meta.generation !== undefined ? { generation: meta.generation } : {}),
    ...(status?.observedGeneration !== undefined ? { observedGeneration: status.observedGeneration } : {}),
    phase: status?.phase,
    restartPolicy: spec?.restartPolicy ?? 'Always',
    deleting: meta.deletionTimestamp != null,
    terminationGracePeriodSeconds: spec?.terminationGracePeriodSeconds ?? undefined,
    ...(startTimeMs !== undefined ? { startTimeMs } : {}),
    ...boundedLabels(meta.labels),
    annotations: {
      sidecars: annotation(ANNOTATION_SIDECARS),
      ignoreExitCode: annotation(ANNOTATION_IGNORE_EXIT_CODE),
      stopLast: annotation(ANNOTATION_STOP_LAST),
      mains: annotation(ANNOTATION_MAINS),
    },
    containers: (spec?.containers ?? []).map(projectContainer),
    statuses: (status?.containerStatuses ?? []).map(projectStatus),
    allContainersRestarting: status?.conditions?.some((c) => c.type === CONDITION_ALL_CONTAINERS_RESTARTING && c.status === 'True') ?? false,
    mayRestartAll: [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].some((c) => restartRulesOf(c).some((r) => r.action === RESTART_ALL)),
    initContainerRestartsAll: initContainerRestartsAll(spec?.initContainers ?? [], status?.initContainerStatuses ?? []),
    initContainersDone: initContainersDone(spec?.initContainers ?? [], status?.initContainerStatuses ?? []),
    activeDeadline: spec?.activeDeadlineSeconds != null,
    mirror: meta.annotations?.[ANNOTATION_MIRROR_POD] !== undefined,
    exclusiveResources: exclusiveResources(pod),
    sidecarTerminated: condition && {
      status: condition.status,
      reason: condition.reason,
      message: condition.message,
    },
  };
}

/**
 * Comma-separated names: spaces trimmed, empty entries and duplicates dropped. Reads at most
 * MAX_ANNOTATION_CHARS characters and MAX_ANNOTATION_NAMES names, so a huge annotation costs no
 * more than a large one; an entry cut by the limit is dropped, not read in part.
 */
export function parseNameList(value: string | undefined): { names: string[]; truncated: boolean } {
  if (!value) return { names: [], truncated: false };
  let text = value;
  let truncated = false;
  if (text.length > MAX_ANNOTATION_CHARS) {
    truncated = true;
    text = text.slice(0, MAX_ANNOTATION_CHARS);
    // The character past the limit may continue the last entry: keep whole entries only.
    if (value[MAX_ANNOTATION_CHARS] !== ',') text = text.slice(0, Math.max(0, text.lastIndexOf(',')));
  }
  const names = new Set<string>();
  for (const entry of text.split(',')) {
    const name = entry.trim();
    if (name === '') continue;
    if (names.size >= MAX_ANNOTATION_NAMES) {
      truncated = true;
      break;
    }
    names.add(name);
  }
  return { names: [...names], truncated };
}

function parseNameListAnnotation(value: string | undefined, containers: ReadonlySet<string>, inits: ReadonlySet<string>): NameListAnnotation {
  const { names, truncated } = parseNameList(value);
  const result: NameListAnnotation = { containers: [], initContainers: [], unknownSample: [], unknownCount: 0, truncated };
  for (const name of names) {
    // No container can have a longer name; do not even look it up.
    const fits = name.length <= MAX_CONTAINER_NAME_CHARS;
    if (fits && containers.has(name)) result.containers.push(name);
    else if (fits && inits.has(name)) result.initContainers.push(name);
    else {
      result.unknownCount++;
      if (result.unknownSample.length < MAX_UNKNOWN_SAMPLE) result.unknownSample.push(fits ? name : `${name.slice(0, MAX_CONTAINER_NAME_CHARS)}…`);
    }
  }
  return result;
}

/** Whether the annotation names anything at all (known or not). */
export function namesAnything(annotation: NameListAnnotation): boolean {
  return annotation.containers.length > 0 || annotation.initContainers.length > 0 || annotation.unknownCount > 0;
}

/** A Pod's labels for selectors, or none and a flag when there are more than policies read. */
function boundedLabels(labels: Record<string, string> | undefined): { labels: Record<string, string>; labelsTruncated: boolean } {
  const entries = Object.entries(labels ?? {});
  if (entries.length > MAX_POD_LABELS) return { labels: {}, labelsTruncated: true };
  return { labels: Object.fromEntries(entries), labelsTruncated: false };
}

function projectContainer(container: V1Container): ContainerProjection {
  const image = container.image ?? '';
  return {
    name: container.name,
    ...(image.length > MAX_IMAGE_REFERENCE_LENGTH ? { image: '', imageTooLong: true } : { image }),
    markers: readMarkers(container.env ?? []),
    ...restartOf(container),
    probeKills: container.livenessProbe != null || container.startupProbe != null,
    restartsOnResize: (container.resizePolicy ?? []).some((p) => p.restartPolicy === 'RestartContainer'),
  };
}

/** Its own restartPolicy and rules, when it sets a restartPolicy (rules count only then): for restartAfterExit. */
export function restartOf(container: V1Container): { restart?: ContainerRestartProjection } {
  return container.restartPolicy ? { restart: { policy: container.restartPolicy, rules: restartRulesOf(container) } } : {};
}

function restartRulesOf(container: V1Container): RestartRuleProjection[] {
  return (container.restartPolicyRules ?? []).slice(0, MAX_RESTART_RULES).map((r) => ({
    action: r.action,
    ...(r.exitCodes ? { operator: r.exitCodes.operator } : {}),
    values: (r.exitCodes?.values ?? []).slice(0, MAX_RULE_EXIT_CODES),
  }));
}

/** As kubelet reads it: an init container whose current exit matches its first matching rule, RestartAllContainers. */
function initContainerRestartsAll(inits: readonly V1Container[], statuses: readonly V1ContainerStatus[]): boolean {
  return inits.some((c) => {
    const exitCode = statuses.find((s) => s.name === c.name)?.state?.terminated?.exitCode;
    if (exitCode === undefined || !c.restartPolicy) return false;
    return matchingRule(restartRulesOf(c), exitCode)?.action === RESTART_ALL;
  });
}

/** Resources every Pod shares on a node: kubelet's managers give none of them out exclusively but to Guaranteed Pods. */
const SHARED_RESOURCES: ReadonlySet<string> = new Set(['cpu', 'memory', 'ephemeral-storage']);

function exclusiveResources(pod: V1Pod): boolean {
  const spec = pod.spec;
  if (pod.status?.qosClass === 'Guaranteed' || (spec?.resourceClaims?.length ?? 0) > 0) return true;
  const named = (r: V1ResourceRequirements | undefined) => [...Object.keys(r?.requests ?? {}), ...Object.keys(r?.limits ?? {})];
  const containers = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
  return [...named(spec?.resources), ...containers.flatMap((c) => named(c.resources))].some((r) => !SHARED_RESOURCES.has(r));
}

/** Each init container's first status entry (the one kubelet reads) is terminated with exit code 0. */
function initContainersDone(inits: readonly V1Container[], statuses: readonly V1ContainerStatus[]): boolean {
  return inits.every((c) => statuses.find((s) => s.name === c.name)?.state?.terminated?.exitCode === 0);
}

/** Longer than any image reference (name ≤ 255, tag ≤ 128, digest): not kept, not swapped in. */
export const MAX_IMAGE_REFERENCE_LENGTH = 1024;

export function readMarkers(env: readonly V1EnvVar[]): EnvMarkers {
  const whenJobExit = literalEnv(env, ENV_TERMINATE_WHEN_JOB_EXIT);
  const image = literalEnv(env, ENV_TERMINATE_WITH_IMAGE)?.trim();
  const withImage = image && image.length <= MAX_IMAGE_REFERENCE_LENGTH ? image : undefined;
  const ignoreExitCode = literalEnv(env, ENV_IGNORE_EXIT_CODE);
  return {
    whenJobExit: isTrue(whenJobExit),
    ...(withImage ? { withImage } : {}),
    ignoreExitCode: isTrue(ignoreExitCode),
    ...(whenJobExit?.toLowerCase() === 'false' ? { keepsMain: true as const } : {}),
  };
}

/**
 * The literal value the container would see. The last entry of a name wins (as in kubelet), and an
 * entry with `valueFrom` yields no literal value at all: we never resolve references.
 */
function literalEnv(env: readonly V1EnvVar[], name: string): string | undefined {
  let value: string | undefined;
  for (const entry of env) {
    if (entry.name !== name) continue;
    value = entry.valueFrom ? undefined : entry.value;
  }
  return value;
}

function isTrue(value: string | undefined): boolean {
  return value?.toLowerCase() === 'true';
}

function projectStatus(status: V1ContainerStatus): ContainerStatusProjection {
  return {
    name: status.name,
    ...(status.containerID ? { containerID: status.containerID } : {}),
    restartCount: status.restartCount ?? 0,
    state: projectState(status),
    ...(status.image && status.image.length <= MAX_IMAGE_REFERENCE_LENGTH ? { image: status.image } : {}),
  };
}

function projectState(status: V1ContainerStatus): ContainerStateProjection {
  const state = status.state;
  if (state?.terminated) {
    const finishedAtMs = toMs(state.terminated.finishedAt);
    return {
      kind: 'terminated',
      exitCode: state.terminated.exitCode,
      reason: state.terminated.reason,
      ...(finishedAtMs !== undefined ? { finishedAtMs } : {}),
    };
  }
  if (state?.running) return { kind: 'running' };
  // No state at all is what kubelet reports before the container exists: waiting.
  return { kind: 'waiting', reason: state?.waiting?.reason };
}
