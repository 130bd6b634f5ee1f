// The one definition of "this main container is done" (R7): its current state is terminated and
// kubelet will not start it again. Kubelet's own choice after an exit is followed: the container's
// first matching restart rule, else its own restartPolicy, else the Pod's; a rule restarting every
// container, or a Pod already doing so, restarts the mains too. Used by the controller's decision,
// the phase guard and the agent's fast path alike.
import type { ContainerProjection, ContainerStatusProjection, PodProjection } from './projection.ts';
import { matchingRule } from './restart-rules.ts';
import { sameImage } from './image-reference.ts';

/** The reason kubelet gives a container it ended (or found gone) while starting the whole Pod over. */
const RESTARTING_ALL_CONTAINERS = 'RestartingAllContainers';

/** What kubelet does after a container exits: nothing, start it again, or start the whole Pod over. */
export type RestartAfterExit = 'none' | 'container' | 'allContainers';

/**
 * Kubelet's choice for a container that exited with `exitCode`. Rules count only beside a
 * container-level restartPolicy (the API server requires one); the first rule whose exit codes match
 * decides; a rule with an action this release does not know falls through to the policies, as in
 * kubelet. An unknown policy falls through to the Pod's, and an unknown Pod policy means Always.
 */
export function restartAfterExit(container: Pick<ContainerProjection, 'restart'> | undefined, podRestartPolicy: string, exitCode: number): RestartAfterExit {
  const restart = container?.restart;
  if (restart?.policy !== undefined) {
    const rule = matchingRule(restart.rules, exitCode);
    if (rule?.action === 'Restart') return 'container';
    if (rule?.action === 'RestartAllContainers') return 'allContainers';
    const own = byPolicy(restart.policy, exitCode);
    if (own !== undefined) return own ? 'container' : 'none';
  }
  return (byPolicy(podRestartPolicy, exitCode) ?? true) ? 'container' : 'none';
}

function byPolicy(policy: string, exitCode: number): boolean | undefined {
  switch (policy) {
    case 'Always':
      return true;
    case 'OnFailure':
      return exitCode !== 0;
    case 'Never':
      return false;
    default:
      return undefined;
  }
}

/** Why a main is not done, for logs and the table tests. */
export type NotDoneReason =
  /** No status entry for it yet. */
  | 'noStatus'
  /** Running or waiting (a restart in backoff is reported waiting). */
  | 'notTerminated'
  /** Terminated, and its restart policy or one of its rules has kubelet start it again. */
  | 'restarted'
  /** The whole Pod starts over in place: the AllContainersRestarting condition, or an exit matching such a rule. */
  | 'podRestarting';

export type MainVerdict = { done: true } | { done: false; reason: NotDoneReason };

/** Whether kubelet starts every container of the Pod over, now or at its next sync. */
export function podRestartingAll(pod: PodProjection): boolean {
  if (pod.allContainersRestarting || pod.initContainerRestartsAll) return true;
  return pod.statuses.some((s) => s.state.kind === 'terminated' && restartAfterExit(containerOf(pod, s.name), pod.restartPolicy, s.state.exitCode) === 'allContainers');
}

/**
 * One main, from the Pod as reported (or as the agent's runtime view shows it). Every status entry
 * of that name counts, so a duplicated entry cannot hide a running main.
 */
export function mainVerdict(pod: PodProjection, name: string): MainVerdict {
  const statuses = pod.statuses.filter((s) => s.name === name);
  if (statuses.length === 0) return { done: false, reason: 'noStatus' };
  if (podRestartingAll(pod)) return { done: false, reason: 'podRestarting' };
  for (const status of statuses) {
    const reason = notDone(pod, status);
    if (reason) return { done: false, reason };
  }
  return { done: true };
}

function notDone(pod: PodProjection, status: ContainerStatusProjection): NotDoneReason | undefined {
  if (status.state.kind !== 'terminated') return 'notTerminated';
  // Kubelet's own mark on a container it ended to start the Pod over.
  if (status.state.reason === RESTARTING_ALL_CONTAINERS) return 'podRestarting';
  const after = restartAfterExit(containerOf(pod, status.name), pod.restartPolicy, status.state.exitCode);
  if (after === 'allContainers') return 'podRestarting';
  return after === 'container' ? 'restarted' : undefined;
}

/** Every spec container has a status entry: until then, kubelet has not reported the whole Pod. */
export function statusesComplete(pod: PodProjection): boolean {
  return pod.containers.every((c) => pod.statuses.some((s) => s.name === c.name));
}

/** Every main is done; a Pod without a main has none done (such a Pod is not ours). */
export function mainsDone(pod: PodProjection, mains: readonly string[]): boolean {
  return mains.length > 0 && mains.every((name) => mainVerdict(pod, name).done);
}

/** Every main is done and its every status entry exited 0: the only ground for `Succeeded`. */
export function mainsSucceeded(pod: PodProjection, mains: readonly string[]): boolean {
  return mainsDone(pod, mains) && mains.every((name) => pod.statuses.filter((s) => s.name === name).every((s) => s.state.kind === 'terminated' && s.state.exitCode === 0));
}

/**
 * Kubelet restarts this container after a failed liveness or startup probe has it killed, whatever
 * its exit code: its own restartPolicy unless Never, else the Pod's unless Never. (Rules are not
 * read for a probe kill: the container was running when kubelet decided.)
 */
export function probeKillRestarts(container: ContainerProjection, podRestartPolicy: string): boolean {
  if (!container.probeKills) return false;
  const own = container.restart?.policy;
  return own !== undefined ? own !== 'Never' : podRestartPolicy !== 'Never';
}

/**
 * Whether kubelet may be about to kill this running container to start it again, whatever its
 * restart policy, because its spec changed (computePodActions: "definition changed, will be
 * restarted"). Of a running Pod's container spec only the image may change, and resources through a
 * resize (restartsOnResize covers that). So: its spec image is not the one kubelet reports it runs,
 * or kubelet has not yet observed the Pod's latest spec (generation ahead of observedGeneration,
 * where both are kept). An image pair whose text cannot be matched counts as changed: kubelet's report
 * is waited for, a second later, never a wrong stop.
 */
export function specChangePending(pod: PodProjection, name: string): boolean {
  if (pod.generation !== undefined && pod.observedGeneration !== undefined && pod.generation > pod.observedGeneration) return true;
  const spec = containerOf(pod, name)?.image;
  const reported = pod.statuses.find((s) => s.name === name)?.image;
  return spec !== undefined && reported !== undefined && !sameImage(spec, reported);
}

/**
 * Whether an exit the runtime announced says, with its code alone, whether kubelet starts this
 * container again. Not when a probe kill would be restarted whatever the code (the runtime cannot
 * tell a probe kill from an exit), nor in a Pod that may start all its containers over (kubelet
 * decides that from every container, and says so in a Pod condition), nor when kubelet may be
 * killing it to start it again for a changed spec or a resize (it restarts it then whatever its
 * policy). Then kubelet's report is waited for.
 */
export function exitSettlesRestart(pod: PodProjection, name: string): boolean {
  const container = containerOf(pod, name);
  if (!container) return false;
  if (container.restartsOnResize || specChangePending(pod, name)) return false;
  return !probeKillRestarts(container, pod.restartPolicy) && !pod.mayRestartAll && !pod.allContainersRestarting;
}

/** The Pod's spec container of that name. */
export function containerOf(pod: PodProjection, name: string): ContainerProjection | undefined {
  return pod.containers.find((c) => c.name === name);
}
