// A container's ID as kubelet reports it in a Pod status, `<runtime>://<id>`: the one form the agent
// keys, compares and logs containers by. It is split into the runtime and its bare ID once, where a
// runtime is about to be called (agent/runtime-registry.ts `forContainer`).

declare const containerIDBrand: unique symbol;
/** `<runtime>://<id>`, checked well-formed. */
export type ContainerID = string & { readonly [containerIDBrand]: true };

export interface ParsedContainerID {
  full: ContainerID;
  /** The runtime's prefix: containerd, cri-o, docker. */
  runtime: string;
  /** The runtime's own ID of the container. */
  id: string;
}

/** Splits a Pod status container ID, `<runtime>://<id>`; undefined when malformed. */
export function parseContainerID(full: string): ParsedContainerID | undefined {
  const match = /^([a-z0-9][a-z0-9.+-]*):\/\/(.+)$/.exec(full);
  return match ? { full: full as ContainerID, runtime: match[1]!, id: match[2]! } : undefined;
}

/** The full ID of a container a runtime names by its bare ID (an exit event, a listing). */
export function containerIDOf(runtime: string, id: string): ContainerID {
  return `${runtime}://${id}` as ContainerID;
}
