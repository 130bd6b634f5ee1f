// Percentiles, rates and Prometheus text-format reading for the benchmark.

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

/** Linear interpolation between closest ranks (numpy's default), on a copy. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

export function summarize(values: readonly number[]): Summary {
  const round = (x: number) => Math.round(x * 10) / 10;
  if (values.length === 0) return { n: 0, p50: NaN, p90: NaN, p99: NaN, min: NaN, max: NaN, mean: NaN };
  return {
    n: values.length,
    p50: round(percentile(values, 50)),
    p90: round(percentile(values, 90)),
    p99: round(percentile(values, 99)),
    min: round(Math.min(...values)),
    max: round(Math.max(...values)),
    mean: round(values.reduce((a, b) => a + b, 0) / values.length),
  };
}

/** xorshift32 from `seed`: picks indices evenly, and the same every time. */
function seeded(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 2 ** 32;
  };
}

/** `values` drawn again with replacement, by `next`. */
function resampled(values: readonly number[], next: () => number): number[] {
  return Array.from(values, () => values[Math.floor(next() * values.length)]!);
}

/** The 2.5th and 97.5th percentiles of `estimates`, rounded to 0.1 (`digits` 1) or 0.01 (2). */
function interval95(estimates: readonly number[], digits: 1 | 2): [number, number] {
  const scale = 10 ** digits;
  const round = (x: number) => Math.round(x * scale) / scale;
  return [round(percentile(estimates, 2.5)), round(percentile(estimates, 97.5))];
}

/**
 * The 95 % bootstrap interval of a percentile: the samples resampled with replacement `resamples`
 * times, the percentile of each, and the 2.5th and 97.5th percentiles of those. Seeded, so the same
 * samples give the same interval. [NaN, NaN] without samples.
 */
export function bootstrapInterval(values: readonly number[], p: number, resamples = 1000, seed = 1): [number, number] {
  if (values.length === 0) return [NaN, NaN];
  const next = seeded(seed);
  const estimates = Array.from({ length: resamples }, () => percentile(resampled(values, next), p));
  return interval95(estimates, 1);
}

/**
 * The 95 % bootstrap interval of the ratio of two groups' percentiles (`ours` over `theirs`), each
 * group resampled on its own, as the headline ratio is made of two independent samples. Rounded
 * as the ratio is (0.01). [NaN, NaN] when a group has no samples.
 */
export function ratioInterval(ours: readonly number[], theirs: readonly number[], p: number, resamples = 1000, seed = 1): [number, number] {
  if (ours.length === 0 || theirs.length === 0) return [NaN, NaN];
  const next = seeded(seed);
  const estimates = Array.from({ length: resamples }, () => percentile(resampled(ours, next), p) / percentile(resampled(theirs, next), p));
  return interval95(estimates, 2);
}

/**
 * Percentiles of samples some of which are known only to exceed `aboveMs` (a sidecar still running,
 * or finished past the limit, when read): those rank last, and a percentile that falls among them
 * is null, "above the limit", rather than a figure made of the others alone.
 */
export interface CensoredSummary {
  /** Every sample, the censored ones included. */
  n: number;
  censored: number;
  aboveMs: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export function censoredSummary(values: readonly number[], censored: number, aboveMs: number): CensoredSummary {
  const known = values.filter((v) => v <= aboveMs).sort((a, b) => a - b);
  const over = censored + values.length - known.length;
  const n = known.length + over;
  const at = (p: number): number | null => {
    if (n === 0) return null;
    const rank = (p / 100) * (n - 1);
    const lo = Math.floor(rank);
    const hi = Math.ceil(rank);
    if (hi >= known.length) return null;
    return Math.round((known[lo]! + (known[hi]! - known[lo]!) * (rank - lo)) * 10) / 10;
  };
  return { n, censored: over, aboveMs, p50: at(50), p90: at(90), p99: at(99) };
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition (comments skipped). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    }
    out.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return out;
}

/** Sum of the samples of `name` whose labels include `match`. */
export function metricSum(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

export const MB = 1024 * 1024;

export interface HistogramBounds { count: number; p50UpperBoundMs: string; p99UpperBoundMs: string }

/** p50/p99 of a Prometheus histogram's observations between two scrapes, as the bucket bounds holding them. */
export function histogramBounds(before: readonly Sample[], after: readonly Sample[], name: string, match: Record<string, string> = {}): HistogramBounds {
  const bucket = `${name}_bucket`;
  const matches = (s: Sample) => s.name === bucket && Object.entries(match).every(([k, v]) => s.labels[k] === v);
  const bounds = [...new Set(after.filter(matches).map((s) => s.labels.le!))];
  const cum = bounds.map((le) => ({
    le: le === '+Inf' ? Infinity : Number(le),
    n: metricSum(after, bucket, { ...match, le }) - metricSum(before, bucket, { ...match, le }),
  })).sort((a, b) => a.le - b.le);
  const total = cum.at(-1)?.n ?? 0;
  const finite = cum.filter((c) => Number.isFinite(c.le));
  const q = (p: number) => {
    const le = cum.find((c) => c.n >= total * p)?.le;
    if (le === undefined || total === 0) return 'no data';
    return Number.isFinite(le) ? `<= ${le * 1000}` : `> ${(finite.at(-1)?.le ?? 0) * 1000}`;
  };
  return { count: total, p50UpperBoundMs: q(0.5), p99UpperBoundMs: q(0.99) };
}

/** Requests per second from the instants they were seen: within [waveStart, waveEnd], and from the first to the last seen. */
export function serviceRate(seenAt: readonly number[], waveStart: number, waveEnd: number): { duringWave: number; firstToLast: number } {
  const perSecond = (n: number, ms: number) => (ms > 0 ? Math.round((n * 1000) / ms) : NaN);
  const during = seenAt.filter((t) => t >= waveStart && t <= waveEnd).length;
  const first = Math.min(...seenAt);
  const last = Math.max(...seenAt);
  return { duringWave: perSecond(during, waveEnd - waveStart), firstToLast: seenAt.length > 1 ? perSecond(seenAt.length, last - first) : NaN };
}
