// Percentiles and Prometheus text-format reading for the benchmark.

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

/**
 * The 95 % bootstrap interval of a percentile: the samples resampled with replacement `resamples`
 * times, the percentile of each, and the 2.5th and 97.5th percentiles of those. Seeded, so the same
 * samples give the same interval. [NaN, NaN] without samples.
 */
export function bootstrapInterval(values: readonly number[], p: number, resamples = 1000, seed = 1): [number, number] {
  if (values.length === 0) return [NaN, NaN];
  let state = seed >>> 0 || 1;
  // xorshift32: enough to pick indices evenly, and the same every time.
  const next = () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 2 ** 32;
  };
  const estimates: number[] = [];
  const resample = new Array<number>(values.length);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < values.length; i++) resample[i] = values[Math.floor(next() * values.length)]!;
    estimates.push(percentile(resample, p));
  }
  const round = (x: number) => Math.round(x * 10) / 10;
  return [round(percentile(estimates, 2.5)), round(percentile(estimates, 97.5))];
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
