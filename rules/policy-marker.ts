// What a sidecar policy (R54) says of one container of a Pod, as the projection carries it.

/** Enforce stops what it matches; Audit only says, once per Pod, what it would have stopped. */
export type PolicyMode = 'Enforce' | 'Audit';

/** The policy that made a container a sidecar, and what it says of it (the Pod's own markers leave it unset). */
export interface PolicyMarker {
  /** `ClusterSidecarPolicy/<name>` or `SidecarPolicy/<namespace>/<name>`. */
  policy: string;
  mode: PolicyMode;
  ignoreExitCode: boolean;
  /** The image swapped in on virtual and agentless nodes. */
  swapImage?: string;
  stopTier: number;
  /** Cluster policies only: run inside the container before kubelet's stop (its preStop hook, then its signal). */
  stopCommand?: string[];
}

/** A command a cluster policy runs inside a container before its stop, and the policy naming it (for events). */
export interface StopCommand {
  command: readonly string[];
  policy: string;
}
