/** Splits a Pod status container ID, `<runtime>://<id>`; undefined when malformed. */
export function parseContainerID(full: string): { runtime: string; id: string } | undefined {
  const match = /^([a-z0-9][a-z0-9.+-]*):\/\/(.+)$/.exec(full);
  return match ? { runtime: match[1]!, id: match[2]! } : undefined;
}
