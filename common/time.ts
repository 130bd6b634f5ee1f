// Timestamps as the API server and the client library give them: RFC 3339 strings, or Dates.

/** Milliseconds since the epoch; undefined when there is no time, or none that can be read. */
export function toMs(value: string | Date | null | undefined): number | undefined {
  if (value === undefined || value === null) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}
