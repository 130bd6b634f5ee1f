// The agent's per-step timing of each stop it made: the `timeline` of its "container stopped" log
// line, read back and summarized per step. Pure helpers (no cluster), unit-tested in timeline.test.ts.
import type { StopTimeline } from '../agent/timeline.ts';
import type { HistogramBounds, Sample, Summary } from './stats.ts';
import { histogramBounds, summarize } from './stats.ts';

/** The steps in the order they happen; the two durations nested in a step follow the step they are part of. */
export const TIMELINE_FIELDS = [
  'exitEvent', 'requestCreated', 'apiCreate', 'acting', 'prestopDone', 'stopSent', 'runtimeCheck', 'containerExited', 'exitToStopSent',
] as const satisfies readonly (keyof StopTimeline)[];

export type TimelineField = (typeof TIMELINE_FIELDS)[number];

/** Milliseconds per step; a field is absent when its step did not apply (e.g. no fast path, no preStop hook). */
export type Timeline = Partial<Record<TimelineField, number>>;

export interface StepBreakdown {
  /** Benchmark Pods this covers, and how many of them had a timeline in the agent's log. */
  samples: number;
  withTimeline: number;
  /** Timelines of stops on the fast path (the agent created the request on the main's exit). */
  fastPath: number;
  /** Per field, over the timelines that have it. */
  stepsMs: Record<TimelineField, Summary>;
  /** agentShare of each fast-path timeline: the agent's queues and event loop, not waiting on the API server or the runtime. */
  agentShareMs: Summary;
}

/**
 * The timelines of the "container stopped" lines of an agent's log (JSON, one object a line), by
 * Pod (namespace/name). Other lines, lines that are not JSON and lines without a timeline (an agent
 * older than the timing) are skipped; a Pod's first stop wins (the benchmark's Pods have one sidecar).
 */
export function parseStopTimelines(log: string): Map<string, Timeline> {
  const byPod = new Map<string, Timeline>();
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { message?: unknown; pod?: unknown; timeline?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.message !== 'container stopped' || typeof entry.pod !== 'string' || byPod.has(entry.pod)) continue;
    if (!entry.timeline || typeof entry.timeline !== 'object') continue;
    const timeline: Timeline = {};
    for (const field of TIMELINE_FIELDS) {
      const v = (entry.timeline as Record<string, unknown>)[field];
      if (typeof v === 'number' && Number.isFinite(v)) timeline[field] = v;
    }
    byPod.set(entry.pod, timeline);
  }
  return byPod;
}

/**
 * The agent's own share of main exit → SIGTERM sent, on the fast path only (elsewhere the exit's
 * time is unknown): main exit → SIGTERM sent less the exit event's wait, the runtime's status calls
 * and the preStop hook, and, where the request was created before the stop, less the create itself.
 * When the watch delivered the request before the create answered, the stop can go out before that
 * answer: then nothing after the create is the agent's (the runtime calls overlapped the create),
 * never less. Stop first (no create on the way) leaves the rest after the event all the agent's.
 */
export function agentShare(t: Timeline): number | undefined {
  if (t.exitToStopSent === undefined || t.exitEvent === undefined) return undefined;
  const afterEvent = t.exitToStopSent - t.exitEvent - (t.runtimeCheck ?? 0) - (t.prestopDone ?? 0);
  if (t.requestCreated === undefined || t.apiCreate === undefined) return round(Math.max(0, afterEvent));
  return round(t.requestCreated - t.apiCreate + Math.max(0, afterEvent - t.requestCreated));
}

/** Per-step percentiles over the benchmark Pods' timelines (undefined: no timeline for that Pod). */
export function summarizeSteps(timelines: readonly (Timeline | undefined)[]): StepBreakdown {
  const present = timelines.filter((t): t is Timeline => t !== undefined);
  const stepsMs = Object.fromEntries(TIMELINE_FIELDS.map((field) => [
    field, summarize(present.flatMap((t) => (t[field] === undefined ? [] : [t[field]]))),
  ])) as Record<TimelineField, Summary>;
  return {
    samples: timelines.length,
    withTimeline: present.length,
    fastPath: present.filter((t) => t.exitToStopSent !== undefined).length,
    stepsMs,
    agentShareMs: summarize(present.flatMap((t) => { const share = agentShare(t); return share === undefined ? [] : [share]; })),
  };
}

/** The agent's step histograms between two scrapes of its /metrics: a cross-check of the timelines (bucket bounds only). */
export function stepHistograms(before: readonly Sample[], after: readonly Sample[]): Record<string, HistogramBounds> {
  const step = (name: string) => histogramBounds(before, after, 'sidecar_terminator_agent_step_seconds', { step: name });
  return {
    exitEvent: histogramBounds(before, after, 'sidecar_terminator_agent_exit_event_delay_seconds'),
    exitToRequest: histogramBounds(before, after, 'sidecar_terminator_agent_exit_to_request_seconds'),
    acting: step('acting'),
    prestopDone: step('prestop_done'),
    stopSent: step('stop_sent'),
    containerExited: step('container_exited'),
    exitToStopSent: histogramBounds(before, after, 'sidecar_terminator_agent_exit_to_stop_sent_seconds'),
  };
}

const round = (x: number) => Math.round(x * 10) / 10;
