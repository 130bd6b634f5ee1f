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

/** What is read of the previous results.json. */
export interface PreviousStamps {
  measured?: Partial<Record<Part, PartStamp>>;
  partsRun?: string[];
  generatedAt?: string;
  environment?: Record<string, unknown>;
}

/**
 * Each part's stamp: `now` for the parts this run measured; for the others, the stamp they were
 * kept with, else (results from before per-part stamps) the previous run's own when it measured the
 * part. A part whose measuring run is unknown gets none rather than a wrong one.
 */
export function partStamps(partsRun: ReadonlySet<string>, now: PartStamp, previous: PreviousStamps | undefined): Partial<Record<Part, PartStamp>> {
  const stamps: Partial<Record<Part, PartStamp>> = {};
  for (const part of PARTS) {
    if (partsRun.has(part)) stamps[part] = now;
    else if (previous?.measured?.[part]) stamps[part] = previous.measured[part];
    else if (previous && !previous.measured && previous.partsRun?.includes(part)) {
      stamps[part] = {
        commit: String(previous.environment?.commit),
        at: previous.generatedAt ?? '?',
        kubernetes: String(previous.environment?.kubernetes),
        runtime: String(previous.environment?.runtime),
      };
    }
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
