// The fast path (R43): the agent follows its runtimes' exit events, and when a Pod's mains are done
// creates the Pod's first request itself and hands it to the Reconciler, seconds before kubelet
// and the controller would. Only while the API server confines the agent's creates to its node.
import type { RuntimeContainerID } from '../../api/container-id.ts';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { requestPath } from '../../api/container-recreate-request.ts';
import type { KubeApi } from '../../common/kube/api.ts';
import { createIfAbsent } from '../../common/kube/errors.ts';
import { namespacedKey } from '../../common/informer.ts';
import type { UrgentWrites } from '../../common/urgent-writes.ts';
import type { PodProjection } from '../../rules/projection.ts';
import type { ContainerRuntime } from '../runtime/types.ts';
import type { FastPathState } from './confinement.ts';
import { ConfinementCheck, FAST_PATH_STATES } from './confinement.ts';
import type { ExitHandlerDeps } from './exits.ts';
import { ExitHandler } from './exits.ts';
import { SidecarOwners } from './sidecar-owners.ts';

/** The exit handler's, but for the request calls and the labels read ahead, which FastPath makes itself. */
export interface FastPathDeps extends Omit<ExitHandlerDeps, 'api' | 'ownerOf'> {
  client: Pick<KubeApi, 'create' | 'get'>;
  /** Where creates go first, ahead of other writes. */
  creates: UrgentWrites;
  /** The agent's own namespace (where the confinement check's dry runs are addressed). */
  namespace: string;
}

export class FastPath {
  private readonly confinement: ConfinementCheck;
  private readonly owners: SidecarOwners;
  private readonly exits: ExitHandler;

  constructor(deps: FastPathDeps) {
    const { client, metrics, log } = deps;
    this.confinement = new ConfinementCheck({
      client,
      nodeName: deps.nodeName,
      namespace: deps.namespace,
      log,
      onState: (state) => { for (const s of FAST_PATH_STATES) metrics.fastPath.set({ state: s }, s === state ? 1 : 0); },
    });
    this.owners = new SidecarOwners(deps.runtimes, log);
    this.exits = new ExitHandler({
      ...deps,
      api: {
        create: (body) => deps.creates.run(() => createIfAbsent(client, requestPath(body.metadata.namespace), body)),
        // By a list with the name as field selector: the agent may list requests, not get one.
        read: async (namespace, name) => {
          const list = await client.get<{ items: ContainerRecreateRequest[] }>(requestPath(namespace), { fieldSelector: `metadata.name=${name}`, limit: 1 });
          return list.items.find((r) => r.metadata.name === name);
        },
      },
      ownerOf: (containerID) => this.owners.ownerOf(containerID),
    });
  }

  /** A container exited in a runtime: acted on only while the fast path is enabled. */
  containerExited(runtime: ContainerRuntime, containerId: RuntimeContainerID, exitCode: number, exitedAtMs?: number): void {
    if (this.confinement.enabled()) this.exits.containerExited(runtime, containerId, exitCode, exitedAtMs);
  }

  /** A Pod of the node changed; `pod` is its projection when the sidecar rules may concern it. */
  podChanged(namespace: string, name: string, pod: PodProjection | undefined): void {
    this.exits.podChanged(namespace, name);
    if (this.confinement.enabled()) this.owners.podChanged(namespacedKey(namespace, name), pod);
  }

  /** A Pod left the node's cache. */
  podGone(namespace: string, name: string): void {
    this.exits.forgetPod(namespace, name);
    this.owners.podChanged(namespacedKey(namespace, name), undefined);
  }

  /** Why the agent is not ready on account of the fast path, or undefined. */
  notReadyReason(): string | undefined {
    return this.confinement.notReadyReason();
  }

  /** Checks the confinement now (and again on its own schedule); resolves to what it found. */
  start(): Promise<FastPathState> {
    return this.confinement.start();
  }

  /** Resolves once the exits received so far have been acted on (for tests). */
  idle(): Promise<void> {
    return this.exits.idle();
  }

  /** Takes no new exits (a request being created may still be handed over). */
  stop(): void {
    this.confinement.stop();
    this.exits.stop();
  }
}
