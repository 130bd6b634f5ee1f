// The runtime's kubelet labels on the sidecars of Pods the fast path may act on, read once while the
// Pod runs. A container ID's labels never change, so when the mains exit, the stop is checked
// against them without a runtime call, which containerd, busy with the exits, answers slowly
// (measured: up to 68 ms with ten Pods finishing together).
import type { Logger } from '../../common/log.ts';
import { errorMessage } from '../../common/log.ts';
import { classify } from '../../rules/classify.ts';
import type { PodProjection } from '../../rules/projection.ts';
import type { ContainerID } from '../../api/container-id.ts';
import { parseContainerID } from '../../api/container-id.ts';
import type { RuntimeRegistry } from '../runtime-registry.ts';
import type { ContainerOwner } from '../runtime/types.ts';

export class SidecarOwners {
  private readonly owners = new Map<ContainerID, ContainerOwner>();
  /** By Pod key: the sidecar container IDs its status reports (asked about, or being asked). */
  private readonly idsByPod = new Map<string, Set<ContainerID>>();
  private readonly runtimes: Pick<RuntimeRegistry, 'forContainer'>;
  private readonly log: Logger;

  constructor(runtimes: Pick<RuntimeRegistry, 'forContainer'>, log: Logger) {
    this.runtimes = runtimes;
    this.log = log;
  }

  /** The labels of a container, if read. */
  ownerOf(containerID: ContainerID): ContainerOwner | undefined {
    return this.owners.get(containerID);
  }

  /** The Pod changed (undefined: gone, or no longer one the rules may concern). */
  podChanged(podKey: string, pod: PodProjection | undefined): void {
    const wanted = new Set(pod ? sidecarContainerIDs(pod) : []);
    const known = this.idsByPod.get(podKey) ?? new Set<ContainerID>();
    for (const id of known) {
      if (!wanted.has(id)) this.owners.delete(id);
    }
    if (wanted.size === 0) this.idsByPod.delete(podKey);
    else this.idsByPod.set(podKey, wanted);
    for (const id of wanted) if (!known.has(id)) this.read(podKey, id);
  }

  private read(podKey: string, containerID: ContainerID): void {
    const target = this.runtimes.forContainer(containerID);
    if (!('runtime' in target)) return;
    const { runtime, container: parsed } = target;
    runtime.status(parsed.id).then(
      (container) => {
        // Kept only while the Pod still reports that container, and only what the runtime says.
        if (container?.owner && container.id === parsed.id && this.idsByPod.get(podKey)?.has(containerID)) this.owners.set(containerID, container.owner);
      },
      // Not fatal: the stop then asks the runtime itself.
      (err: unknown) => this.log.debug('could not read a sidecar\'s labels ahead', { containerID, error: errorMessage(err) }),
    );
  }
}

/** The well-formed container IDs the Pod status reports for the sidecars a request would stop. */
function sidecarContainerIDs(pod: PodProjection): ContainerID[] {
  const sidecars = new Set(classify(pod).sidecars.filter((s) => s.viaRequest).map((s) => s.name));
  return pod.statuses.flatMap((s) => {
    const parsed = sidecars.has(s.name) && s.containerID ? parseContainerID(s.containerID) : undefined;
    return parsed ? [parsed.full] : [];
  });
}
