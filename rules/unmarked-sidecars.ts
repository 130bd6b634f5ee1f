// Pods held open by a sidecar nobody marked (R52): the containers that injectors add to Pods whose
// authors never see them. Such a Pod is no business of ours to stop; saying that it is stuck, and
// how to release it, is what shows a platform team its Jobs piling up.
import { ANNOTATION_SIDECARS, ANNOTATION_STOP_LAST, ENV_TERMINATE_WHEN_JOB_EXIT, EVENT_REASONS } from '../api/names.ts';
import type { DecisionEvent } from './events.ts';
import { quoteList, warning } from './events.ts';
import { mainsDone, statusesComplete } from './main-done.ts';
import { repositoryOf } from './image-reference.ts';
import type { ContainerProjection, PodProjection } from './projection.ts';

/** A sidecar that injectors add, known by the container name they give it or by its image's repository. */
export interface WellKnownSidecar {
  /** A short, stable id: the `sidecar` label of the held-Pods gauge. */
  id: string;
  /** What it is, for the Warning. */
  title: string;
  names: readonly string[];
  /** Repository paths without the registry, matched at the end of the image's repository. */
  repositories: readonly string[];
  /** A network proxy the other sidecars may send through: best stopped last (R53). */
  proxy?: boolean;
}

export const WELL_KNOWN_SIDECARS: readonly WellKnownSidecar[] = [
  { id: 'istio', title: 'Istio\'s proxy', names: ['istio-proxy'], repositories: ['istio/proxyv2', 'istio-release/proxyv2'], proxy: true },
  { id: 'linkerd', title: 'Linkerd\'s proxy', names: ['linkerd-proxy'], repositories: ['linkerd/proxy'], proxy: true },
  { id: 'vault', title: 'the Vault agent', names: ['vault-agent'], repositories: [] },
  { id: 'dapr', title: 'the Dapr sidecar', names: ['daprd'], repositories: ['daprio/daprd'] },
  {
    id: 'cloud-sql-proxy', title: 'the Cloud SQL Auth Proxy', names: ['cloud-sql-proxy', 'cloudsql-proxy'],
    repositories: ['cloud-sql-connectors/cloud-sql-proxy', 'cloudsql-docker/gce-proxy'],
  },
  {
    id: 'opentelemetry', title: 'an OpenTelemetry collector', names: ['otc-container'],
    repositories: ['opentelemetry-collector', 'opentelemetry-collector-contrib', 'opentelemetry-collector-k8s'],
  },
  { id: 'fluent-bit', title: 'Fluent Bit', names: ['fluent-bit'], repositories: ['fluent/fluent-bit'] },
];

export function wellKnownSidecar(container: Pick<ContainerProjection, 'name' | 'image'>): WellKnownSidecar | undefined {
  const repository = repositoryOf(container.image);
  return WELL_KNOWN_SIDECARS.find((known) =>
    known.names.includes(container.name) || known.repositories.some((r) => repository === r || repository.endsWith(`/${r}`)));
}

/** A main by the markers (nothing marks it) that is a well-known sidecar still running. */
export interface UnmarkedHolder {
  container: string;
  sidecar: WellKnownSidecar;
}

/**
 * The well-known sidecars among the mains that keep the Pod open: not terminated while every other
 * main is done for good (R7). None when no other main is left, when one of them still runs, or
 * while a container has no status: then nothing shows that the Pod's work is over.
 */
export function unmarkedHolders(pod: PodProjection, mains: readonly string[]): UnmarkedHolder[] {
  if (!statusesComplete(pod)) return [];
  const holders: UnmarkedHolder[] = [];
  const others: string[] = [];
  for (const name of mains) {
    const container = pod.containers.find((c) => c.name === name);
    const sidecar = container && wellKnownSidecar(container);
    const terminated = pod.statuses.some((s) => s.name === name && s.state.kind === 'terminated');
    if (sidecar && !terminated) holders.push({ container: name, sidecar });
    else others.push(name);
  }
  return holders.length > 0 && mainsDone(pod, others) ? holders : [];
}

/** Whether the controller keeps the Pod to tell whether it is held (R52): it may hold a well-known sidecar. */
export function mayBeHeldByUnmarkedSidecar(pod: PodProjection): boolean {
  if (pod.restartPolicy !== 'Never' && pod.restartPolicy !== 'OnFailure') return false;
  return pod.containers.some((c) => wellKnownSidecar(c) !== undefined);
}

export function unmarkedHoldersWarning(holders: readonly UnmarkedHolder[]): DecisionEvent {
  const names = holders.map((h) => h.container);
  const what = [...new Set(holders.map((h) => h.sidecar.title))].join(', ');
  const proxies = holders.filter((h) => h.sidecar.proxy).map((h) => h.container);
  const message = `${quoteList(names)} (${what}) still running after every other container finished, and nothing marks ` +
    `${names.length === 1 ? 'it' : 'them'} as a sidecar: the Pod stays Running and its Job does not complete. Mark ` +
    `${names.length === 1 ? 'it' : 'them'}: ${ENV_TERMINATE_WHEN_JOB_EXIT}=true in the env, the Pod annotation ${ANNOTATION_SIDECARS}, ` +
    `or for every Pod at once a ClusterSidecarPolicy (or SidecarPolicy) with the entry ${holders.map((h) => `name: ${h.container}`).join(', ')}.` +
    (proxies.length > 0 ? ` To stop ${quoteList(proxies)} after the other sidecars (which may send through ${proxies.length === 1 ? 'it' : 'them'}), name ${proxies.length === 1 ? 'it' : 'them'} in ${ANNOTATION_STOP_LAST} too.` : '');
  return warning(EVENT_REASONS.unmarkedSidecarHoldsPod, `${EVENT_REASONS.unmarkedSidecarHoldsPod}/${names.join(',')}`, message);
}
