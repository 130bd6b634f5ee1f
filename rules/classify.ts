// Which containers are sidecars, and which of them can be acted on where the Pod runs.
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_MAINS,
  ANNOTATION_SIDECARS,
  ANNOTATION_STOP_LAST,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  ENV_TERMINATE_WITH_IMAGE,
  EVENT_REASONS,
} from '../api/names.ts';
import type { DecisionEvent } from './events.ts';
import { quoteList, warning } from './events.ts';
import type { PolicyMarker } from './policy-marker.ts';
import type { ContainerProjection, NameListAnnotation, PodProjection } from './projection.ts';
import { MAX_ANNOTATION_CHARS, MAX_ANNOTATION_NAMES, MAX_IMAGE_REFERENCE_LENGTH, namesAnything } from './projection.ts';

/**
 * Where a Pod runs (R5, R22): a real node with an agent, a virtual node (`type=virtual-kubelet`), or
 * a real node where no agent runs (GKE Autopilot, EKS Fargate and the like), which is treated as a
 * virtual one: only image swaps reach its sidecars.
 */
export type NodeKind = 'real' | 'virtual' | 'agentless';

export interface Sidecar {
  name: string;
  /** Stopped through a ContainerRecreateRequest on real nodes (env or `sidecars` annotation). */
  viaRequest: boolean;
  /** The image swapped in on virtual nodes. */
  swapImage?: string;
  /** Its exit code must not decide the Pod's phase; only ever true together with viaRequest. */
  ignoreExitCode: boolean;
  /**
   * Its stop tier on real nodes (R53): a sidecar is asked to stop only once every sidecar of a lower
   * tier has exited. 1 when the stop-last annotation names it, else 0; a policy's stopTier (R54).
   */
  tier: number;
  /** What made it a sidecar, for the events that act on it: `env`, `annotation`, or a policy (R54). */
  markedBy: string;
}

export interface Classification {
  sidecars: Sidecar[];
  /** Every spec container that is not a sidecar. */
  mains: string[];
  /** Annotations naming unknown containers, markers that have no effect: one Warning per Pod and reason. */
  warnings: DecisionEvent[];
}

export function classify(pod: PodProjection): Classification {
  const annotatedSidecars = new Set(pod.annotations.sidecars.containers);
  const annotatedIgnore = new Set(pod.annotations.ignoreExitCode.containers);
  const stopLast = new Set(pod.annotations.stopLast.containers);
  const keptMains = new Set(pod.annotations.mains.containers);
  const sidecars: Sidecar[] = [];
  const mains: string[] = [];
  for (const container of pod.containers) {
    // The Pod's author names its work: a main whatever else marks it.
    const sidecar = keptMains.has(container.name) ? undefined : toSidecar(container, annotatedSidecars, annotatedIgnore, stopLast);
    if (sidecar) sidecars.push(sidecar);
    else mains.push(container.name);
  }
  const warnings = [
    ...unknownNamesWarning(pod),
    ...keptMainWarning(pod, keptMains, annotatedSidecars),
    ...ineffectiveIgnoreWarning(pod, sidecars, annotatedIgnore),
    ...ineffectiveStopLastWarning(sidecars, stopLast),
    ...imageTooLongWarning(pod),
  ];
  return { sidecars, mains, warnings };
}

function toSidecar(
  container: ContainerProjection,
  annotatedSidecars: ReadonlySet<string>,
  annotatedIgnore: ReadonlySet<string>,
  stopLast: ReadonlySet<string>,
): Sidecar | undefined {
  const viaRequest = container.markers.whenJobExit || annotatedSidecars.has(container.name);
  const swapImage = container.markers.withImage;
  if (!viaRequest && !swapImage) return container.policy && fromPolicy(container.name, container.policy);
  const ignoreMarked = container.markers.ignoreExitCode || annotatedIgnore.has(container.name);
  return {
    name: container.name,
    viaRequest,
    ...(swapImage ? { swapImage } : {}),
    ignoreExitCode: viaRequest && ignoreMarked,
    tier: viaRequest && stopLast.has(container.name) ? 1 : 0,
    markedBy: container.markers.whenJobExit || swapImage ? 'env' : 'annotation',
  };
}

/** A sidecar by an Enforce policy alone (applyPolicies leaves Pod-marked containers unset): stopped through requests. */
function fromPolicy(name: string, policy: PolicyMarker): Sidecar {
  return {
    name,
    viaRequest: true,
    ...(policy.swapImage ? { swapImage: policy.swapImage } : {}),
    ignoreExitCode: policy.ignoreExitCode,
    tier: policy.stopTier,
    markedBy: policy.policy,
  };
}

/** The events acting on sidecars say what made each one a sidecar, when a policy did (R54). */
export function policyNote(sidecars: readonly Sidecar[]): string {
  const byPolicy = sidecars.filter((s) => s.markedBy !== 'env' && s.markedBy !== 'annotation');
  if (byPolicy.length === 0) return '';
  return ` Made sidecar${byPolicy.length > 1 ? 's' : ''} by policy: ${byPolicy.map((s) => `"${s.name}" (${s.markedBy})`).join(', ')}.`;
}

/** One Warning per Pod for the containers a policy's image pattern could not be tried on (R54). */
function imageTooLongWarning(pod: PodProjection): DecisionEvent[] {
  const untried = pod.containers.filter((c) => c.imagePatternUntried !== undefined);
  if (untried.length === 0) return [];
  const what = untried.map((c) => `"${c.name}" (${c.imagePatternUntried})`).join(', ');
  return [warning(EVENT_REASONS.policyImageTooLong, EVENT_REASONS.policyImageTooLong,
    `The image of ${untried.length === 1 ? 'container' : 'containers'} ${what} is longer than any image reference ` +
      `(${MAX_IMAGE_REFERENCE_LENGTH} characters): no image pattern of a policy is tried on it, so no policy makes it a sidecar. ` +
      'Kubelet cannot run such an image either (InvalidImageName). Fix the image, or match the container by name.')];
}

/**
 * One Warning per Pod for every entry of both annotations that does nothing: however many there
 * are, it quotes a few and counts the rest (an annotation of junk must not become a flood of events).
 */
function unknownNamesWarning(pod: PodProjection): DecisionEvent[] {
  const parts = [
    ...describeUnknown(ANNOTATION_SIDECARS, pod.annotations.sidecars),
    ...describeUnknown(ANNOTATION_IGNORE_EXIT_CODE, pod.annotations.ignoreExitCode),
    ...describeUnknown(ANNOTATION_STOP_LAST, pod.annotations.stopLast),
    ...describeUnknown(ANNOTATION_MAINS, pod.annotations.mains),
  ];
  if (parts.length === 0) return [];
  return [warning(EVENT_REASONS.unknownContainer, EVENT_REASONS.unknownContainer, `${parts.join(' ')} Those entries are ignored.`)];
}

function describeUnknown(annotation: string, parsed: NameListAnnotation): string[] {
  const parts: string[] = [];
  if (parsed.unknownCount > 0) {
    const several = parsed.unknownCount > 1;
    parts.push(
      `Annotation ${annotation} names ${quoteList(parsed.unknownSample, parsed.unknownCount)}, which ` +
        `${several ? 'are not containers' : 'is not a container'} of this Pod.`,
    );
  }
  if (parsed.initContainers.length > 0) {
    const several = parsed.initContainers.length > 1;
    parts.push(
      `Annotation ${annotation} names ${quoteList(parsed.initContainers)}, ${several ? 'init containers' : 'an init container'}: ` +
        'init containers are never stopped by the sidecar terminator (kubelet stops native sidecars itself).',
    );
  }
  if (parsed.truncated) {
    parts.push(
      `Annotation ${annotation} is longer than the ${MAX_ANNOTATION_CHARS} characters or ${MAX_ANNOTATION_NAMES} names ` +
        'read; the rest was not read.',
    );
  }
  return parts;
}

/** The mains annotation names a container the Pod also marks a sidecar: it stays a main, and one Warning says so. */
function keptMainWarning(pod: PodProjection, keptMains: ReadonlySet<string>, annotatedSidecars: ReadonlySet<string>): DecisionEvent[] {
  const contradicted = pod.containers
    .filter((c) => keptMains.has(c.name) && (c.markers.whenJobExit || c.markers.withImage !== undefined || annotatedSidecars.has(c.name)))
    .map((c) => c.name);
  if (contradicted.length === 0) return [];
  const several = contradicted.length > 1;
  return [
    warning(
      EVENT_REASONS.markerIneffective,
      `${EVENT_REASONS.markerIneffective}/${ANNOTATION_MAINS}`,
      `Annotation ${ANNOTATION_MAINS} names ${quoteList(contradicted)}, which the Pod also marks as ${several ? 'sidecars' : 'a sidecar'} ` +
        `(${ENV_TERMINATE_WHEN_JOB_EXIT}, ${ENV_TERMINATE_WITH_IMAGE} or annotation ${ANNOTATION_SIDECARS}). ${several ? 'They stay' : 'It stays'} ` +
        'main containers: nothing stops them. Remove one of the two markers.',
    ),
  ];
}

/** IGNORE_EXIT_CODE counts only on a sidecar stopped through a request; one Warning names where it was set in vain. */
function ineffectiveIgnoreWarning(
  pod: PodProjection,
  sidecars: readonly Sidecar[],
  annotatedIgnore: ReadonlySet<string>,
): DecisionEvent[] {
  const ignoring = new Set(sidecars.filter((s) => s.ignoreExitCode).map((s) => s.name));
  const vain = pod.containers
    .filter((c) => !ignoring.has(c.name) && (c.markers.ignoreExitCode || annotatedIgnore.has(c.name)))
    .map((c) => c.name);
  if (vain.length === 0) return [];
  const several = vain.length > 1;
  return [
    warning(
      EVENT_REASONS.markerIneffective,
      EVENT_REASONS.markerIneffective,
      `Container${several ? 's' : ''} ${quoteList(vain)} ${several ? 'are' : 'is'} marked ignore-exit-code (${ENV_IGNORE_EXIT_CODE} ` +
        `or annotation ${ANNOTATION_IGNORE_EXIT_CODE}), which only counts for a sidecar with ${ENV_TERMINATE_WHEN_JOB_EXIT}=true ` +
        `or listed in annotation ${ANNOTATION_SIDECARS}. The marker has no effect.`,
    ),
  ];
}

/** The stop-last annotation counts only for sidecars stopped through a request; one Warning names where it does not. */
function ineffectiveStopLastWarning(sidecars: readonly Sidecar[], stopLast: ReadonlySet<string>): DecisionEvent[] {
  const tiered = new Set(sidecars.filter((s) => s.tier > 0).map((s) => s.name));
  const vain = [...stopLast].filter((name) => !tiered.has(name));
  if (vain.length === 0) return [];
  const several = vain.length > 1;
  return [
    warning(
      EVENT_REASONS.markerIneffective,
      `${EVENT_REASONS.markerIneffective}/${ANNOTATION_STOP_LAST}`,
      `Annotation ${ANNOTATION_STOP_LAST} names ${quoteList(vain)}, which ${several ? 'are not sidecars' : 'is not a sidecar'} stopped ` +
        `through a request (${ENV_TERMINATE_WHEN_JOB_EXIT}=true or annotation ${ANNOTATION_SIDECARS}). The entry has no effect.`,
    ),
  ];
}

/** Real nodes: only request sidecars; virtual and agentless nodes: only image sidecars. */
export function isStoppableOn(sidecar: Sidecar, node: NodeKind): boolean {
  return node === 'real' ? sidecar.viaRequest : sidecar.swapImage !== undefined;
}

/** The one Warning per Pod for the sidecars that nothing will stop where the Pod runs. */
export function notStoppableWarning(pod: PodProjection, sidecars: readonly Sidecar[], node: NodeKind): DecisionEvent {
  const where = `${node} node "${pod.nodeName ?? ''}"`;
  const several = sidecars.length > 1;
  const names = `Sidecar${several ? 's' : ''} ${quoteList(sidecars.map((s) => s.name))}`;
  const them = several ? 'them' : 'it';
  const addImage = `Set ${ENV_TERMINATE_WITH_IMAGE} on ${them} to an image that exits 0 at once.`;
  const messages: Record<NodeKind, string> = {
    real:
      `${names} ${several ? 'have' : 'has'} only ${ENV_TERMINATE_WITH_IMAGE}, which acts on virtual nodes and nodes without ` +
      `an agent only; on ${where} nothing will stop ${them} and the Pod keeps running. Set ${ENV_TERMINATE_WHEN_JOB_EXIT}=true ` +
      `on ${them} or list ${them} in annotation ${ANNOTATION_SIDECARS}.`,
    virtual:
      `${names} ${several ? 'are' : 'is'} to be stopped through a ContainerRecreateRequest, which virtual nodes ` +
      `cannot carry out; on ${where} nothing will stop ${them} and the Pod keeps running. ${addImage}`,
    agentless:
      `${names} ${several ? 'are' : 'is'} to be stopped through a ContainerRecreateRequest, but node "${pod.nodeName ?? ''}" ` +
      'has no sidecar-terminator agent to carry it out (the node matches --agentless-node-selector, or no agent has run ' +
      `on it for --agentless-after-seconds); nothing will stop ${them} and the Pod keeps running. ${addImage} ` +
      'Where no agent runs, that image is swapped in.',
  };
  return warning(EVENT_REASONS.notStoppable, `${EVENT_REASONS.notStoppable}/${node}`, messages[node]);
}

/**
 * Cheap pre-filter for the watch cache: a Pod without any marker, or with restartPolicy Always, is
 * never handled, so the controller need not keep it (restartPolicy and env are immutable; the
 * annotations are not, so re-check them on every update).
 */
export function mayNeedSidecarTermination(pod: PodProjection): boolean {
  if (pod.restartPolicy !== 'Never' && pod.restartPolicy !== 'OnFailure') return false;
  const envMarked = pod.containers.some((c) => c.markers.whenJobExit || c.markers.withImage !== undefined);
  return envMarked || namesAnything(pod.annotations.sidecars);
}
