// Which containers are sidecars (spec section 1), and which of them can be acted on where the Pod runs.
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_SIDECARS,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  ENV_TERMINATE_WITH_IMAGE,
  EVENT_REASONS,
} from './constants.ts';
import type { PodEvent } from './events.ts';
import { warning } from './events.ts';
import type { ContainerProjection, PodProjection } from './projection.ts';

export type NodeKind = 'real' | 'virtual';

export interface Sidecar {
  name: string;
  /** Stopped through a ContainerRecreateRequest on real nodes (env or `sidecars` annotation). */
  viaRequest: boolean;
  /** The image swapped in on virtual nodes. */
  swapImage?: string;
  /** Its exit code must not decide the Pod's phase; only ever true together with viaRequest. */
  ignoreExitCode: boolean;
}

export interface Classification {
  sidecars: Sidecar[];
  /** Every spec container that is not a sidecar. */
  mains: string[];
  /** Annotations naming unknown containers, markers that have no effect. */
  warnings: PodEvent[];
}

export function classify(pod: PodProjection): Classification {
  const annotatedSidecars = new Set(parseNameList(pod.annotations.sidecars));
  const annotatedIgnore = new Set(parseNameList(pod.annotations.ignoreExitCode));
  const sidecars: Sidecar[] = [];
  const mains: string[] = [];
  for (const container of pod.containers) {
    const sidecar = toSidecar(container, annotatedSidecars, annotatedIgnore);
    if (sidecar) sidecars.push(sidecar);
    else mains.push(container.name);
  }
  const warnings = [
    ...unknownNameWarnings(pod, ANNOTATION_SIDECARS, annotatedSidecars),
    ...unknownNameWarnings(pod, ANNOTATION_IGNORE_EXIT_CODE, annotatedIgnore),
    ...ineffectiveIgnoreWarnings(pod, sidecars, annotatedIgnore),
  ];
  return { sidecars, mains, warnings };
}

function toSidecar(
  container: ContainerProjection,
  annotatedSidecars: ReadonlySet<string>,
  annotatedIgnore: ReadonlySet<string>,
): Sidecar | undefined {
  const viaRequest = container.markers.whenJobExit || annotatedSidecars.has(container.name);
  const swapImage = container.markers.withImage;
  if (!viaRequest && !swapImage) return undefined;
  const ignoreMarked = container.markers.ignoreExitCode || annotatedIgnore.has(container.name);
  return {
    name: container.name,
    viaRequest,
    ...(swapImage ? { swapImage } : {}),
    ignoreExitCode: viaRequest && ignoreMarked,
  };
}

/** Comma-separated names: spaces trimmed, empty entries and duplicates dropped. */
export function parseNameList(value: string | undefined): string[] {
  if (!value) return [];
  const names = value.split(',').map((n) => n.trim()).filter((n) => n !== '');
  return [...new Set(names)];
}

function unknownNameWarnings(pod: PodProjection, annotation: string, names: ReadonlySet<string>): PodEvent[] {
  const known = new Set(pod.containers.map((c) => c.name));
  const initNames = new Set(pod.initContainerNames);
  return [...names]
    .filter((name) => !known.has(name))
    .map((name) =>
      warning(
        EVENT_REASONS.unknownContainer,
        `${EVENT_REASONS.unknownContainer}/${annotation}/${name}`,
        initNames.has(name)
          ? `Annotation ${annotation} names "${name}", an init container: init containers are never ` +
              'stopped by the sidecar terminator (kubelet stops native sidecars itself). Entry ignored.'
          : `Annotation ${annotation} names "${name}", which is not a container of this Pod. Entry ignored.`,
      ),
    );
}

/** IGNORE_EXIT_CODE counts only on a sidecar stopped through a request; say so where it was set in vain. */
function ineffectiveIgnoreWarnings(
  pod: PodProjection,
  sidecars: readonly Sidecar[],
  annotatedIgnore: ReadonlySet<string>,
): PodEvent[] {
  const ignoring = new Set(sidecars.filter((s) => s.ignoreExitCode).map((s) => s.name));
  return pod.containers
    .filter((c) => !ignoring.has(c.name) && (c.markers.ignoreExitCode || annotatedIgnore.has(c.name)))
    .map((c) =>
      warning(
        EVENT_REASONS.markerIneffective,
        `${EVENT_REASONS.markerIneffective}/${c.name}`,
        `Container "${c.name}" is marked ignore-exit-code (${ENV_IGNORE_EXIT_CODE} or annotation ` +
          `${ANNOTATION_IGNORE_EXIT_CODE}), which only counts for a sidecar with ${ENV_TERMINATE_WHEN_JOB_EXIT}=true ` +
          `or listed in annotation ${ANNOTATION_SIDECARS}. The marker has no effect.`,
      ),
    );
}

/** Real nodes: only request sidecars; virtual nodes: only image sidecars. */
export function isStoppableOn(sidecar: Sidecar, node: NodeKind): boolean {
  return node === 'real' ? sidecar.viaRequest : sidecar.swapImage !== undefined;
}

/** The one Warning for a sidecar that nothing will stop where its Pod runs. */
export function notStoppableWarning(pod: PodProjection, sidecar: Sidecar, node: NodeKind): PodEvent {
  const where = `${node} node "${pod.nodeName ?? ''}"`;
  const message =
    node === 'real'
      ? `Sidecar "${sidecar.name}" has only ${ENV_TERMINATE_WITH_IMAGE}, which acts on virtual nodes only; ` +
        `on ${where} nothing will stop it and the Pod keeps running. Set ${ENV_TERMINATE_WHEN_JOB_EXIT}=true ` +
        `on it or list it in annotation ${ANNOTATION_SIDECARS}.`
      : `Sidecar "${sidecar.name}" is to be stopped through a ContainerRecreateRequest, which virtual nodes ` +
        `cannot carry out; on ${where} nothing will stop it and the Pod keeps running. Set ` +
        `${ENV_TERMINATE_WITH_IMAGE} on it to an image that exits 0 at once.`;
  return warning(EVENT_REASONS.notStoppable, `${EVENT_REASONS.notStoppable}/${node}/${sidecar.name}`, message);
}

/**
 * Cheap pre-filter for the watch cache: a Pod without any marker, or with restartPolicy Always, is
 * never handled, so the controller need not keep it (restartPolicy and env are immutable; the
 * annotations are not, so re-check them on every update).
 */
export function mayNeedSidecarTermination(pod: PodProjection): boolean {
  if (pod.restartPolicy !== 'Never' && pod.restartPolicy !== 'OnFailure') return false;
  const envMarked = pod.containers.some((c) => c.markers.whenJobExit || c.markers.withImage !== undefined);
  return envMarked || parseNameList(pod.annotations.sidecars).length > 0;
}
