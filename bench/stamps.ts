// Which commit, on which stack, measured each part of results.json: a run measures some parts and
// keeps the others from the previous results, whose own stamps travel with them.

/**
 * latencyNodes, burstNodes and burstLargeNodes: parts 1 and 2 on a cluster of several nodes (a run of their own);
 * kruise: the agent beside kruise-daemon (results.json `kruiseDaemon`).
 */
export const PARTS = ['latency', 'burst', 'scale', 'soak', 'latencyNodes', 'burstNodes', 'burstLargeNodes', 'policies', 'kruise'] as const;
export type Part = (typeof PARTS)[number];

export interface PartStamp {
  commit: string;
  /** When the run that measured the part began (ISO 8601). */
  at: string;
  kubernetes: string;
  runtime: string;
  /** The cluster's nodes, when more than one. */
  nodes?: number;
}

/** What is read of a results.json. */
export interface PreviousStamps {
  measured?: Partial<Record<Part, PartStamp>>;
  partsRun?: string[];
  generatedAt?: string;
  environment?: Record<string, unknown>;
}

/**
 * Who measured each part, as a results.json says: its `measured`; in results from before per-part
 * stamps, the run's own for the parts it ran. A part whose measuring run is unknown gets none rather
 * than a wrong one.
 */
export function keptStamps(results: PreviousStamps): Partial<Record<Part, PartStamp>> {
  const stamps: Partial<Record<Part, PartStamp>> = {};
  for (const part of PARTS) {
    const stamp = results.measured?.[part]
      ?? (!results.measured && results.partsRun?.includes(part) ? runStamp(results) : undefined);
    if (stamp) stamps[part] = stamp;
  }
  return stamps;
}

/** The stamp of the run that wrote results from before per-part stamps. */
const runStamp = (results: PreviousStamps): PartStamp => ({
  commit: String(results.environment?.commit),
  at: results.generatedAt ?? '?',
  kubernetes: String(results.environment?.kubernetes),
  runtime: String(results.environment?.runtime),
});

/** Each part's stamp: `now` for the parts this run measured; for the others, what the previous results say (keptStamps). */
export function partStamps(partsRun: ReadonlySet<string>, now: PartStamp, previous: PreviousStamps | undefined): Partial<Record<Part, PartStamp>> {
  const kept = previous ? keptStamps(previous) : {};
  const stamps: Partial<Record<Part, PartStamp>> = {};
  for (const part of PARTS) {
    const stamp = partsRun.has(part) ? now : kept[part];
    if (stamp) stamps[part] = stamp;
  }
  return stamps;
}

/** "latency ab6d3b6 (v1.37.2, containerd v2.4.2), scale, soak 51b0bff (...), latencyNodes c0ffee1 (..., 3 nodes)": parts measured alike share one stamp. */
export function stampsText(stamps: Partial<Record<Part, PartStamp>>): string {
  const groups = new Map<string, Part[]>();
  for (const part of PARTS) {
    const s = stamps[part];
    if (!s) continue;
    const key = `${s.commit} (${s.kubernetes}, ${s.runtime}${s.nodes ? `, ${s.nodes} nodes` : ''})`;
    groups.set(key, [...(groups.get(key) ?? []), part]);
  }
  return [...groups].map(([key, parts]) => `${parts.join(', ')} ${key}`).join('; ');
}
