// A container's ID has two forms. The Pod status reports `<runtime>://<id>` (ContainerID): the one
// form the agent keys, compares and logs containers by. A runtime knows the container by the bare
// `<id>` alone (RuntimeContainerID). parseContainerID is the one place a full ID is split, right
// where a runtime is about to be called (agent/runtime-registry.ts `forContainer`); a runtime's own
// answers (an exit event, a listing) are joined back by containerIDOf.

declare const containerIDBrand: unique symbol;
/** `<runtime>://<id>`, as kubelet reports it in a Pod status, checked well-formed. */
export type ContainerID = string & { readonly [containerIDBrand]: true };

declare const runtimeContainerIDBrand: unique symbol;
/** The runtime's own ID of a container, without the `<runtime>://` prefix: what a runtime is called with. */
export type RuntimeContainerID = string & { readonly [runtimeContainerIDBrand]: true };

export interface ParsedContainerID {
  full: ContainerID;
  /** The runtime's prefix: containerd, cri-o, docker. */
  runtime: string;
  id: RuntimeContainerID;
}

/** Splits a Pod status container ID, `<runtime>://<id>`; undefined when malformed. */
export function parseContainerID(full: string): ParsedContainerID | undefined {
  const match = /^([a-z0-9][a-z0-9.+-]*):\/\/(.+)$/.exec(full);
  return match ? { full: full as ContainerID, runtime: match[1]!, id: match[2]! as RuntimeContainerID } : undefined;
}

/** The full ID of a container a runtime names by its bare ID (an exit event, a listing). */
export function containerIDOf(runtime: string, id: RuntimeContainerID): ContainerID {
  return `${runtime}://${id}` as ContainerID;
}

/** An ID a runtime itself reported (its answers name containers bare): the only other way to a RuntimeContainerID. */
export function runtimeContainerID(reported: string): RuntimeContainerID {
  return reported as RuntimeContainerID;
}
