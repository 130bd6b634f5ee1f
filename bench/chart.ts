// The latency distributions as empirical CDFs, the per-step breakdowns as bars, and memory over time
// as lines, in one SVG, turned into a PNG with rsvg-convert (librsvg2-bin, installed by scripts/setup.sh).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { bootstrapInterval, percentile } from './stats.ts';

export interface Series {
  label: string;
  color: string;
  values: number[];
  /** The sample count to show when `values` are quantiles of a larger sample. */
  n?: number;
}

export interface Target {
  at: number;
  label: string;
}

/** Empirical CDFs of the series, with vertical target lines. */
export interface CdfPanel {
  title: string;
  xLabel: string;
  series: Series[];
  logX?: boolean;
  targets?: Target[];
}

/** Horizontal bars of p50 (solid) and p99 (light), one group per row, one bar per series. */
export interface BarPanel {
  title: string;
  xLabel: string;
  legend: { label: string; color: string }[];
  /** What the solid and the light bars show, when not p50 and p99 (e.g. a median and a max). */
  measures?: { solid: string; light: string };
  /** `part`: a part of the row above (drawn in grey). */
  rows: { label: string; part?: boolean; bars: { color: string; p50: number; p99: number }[]; targets?: Target[] }[];
  logX?: boolean;
  /** Shown instead of the bars when no row has a figure. */
  empty: string;
}

/** Values over time as lines (a null leaves a gap), with vertical marks for what happened when. */
export interface LinePanel {
  title: string;
  xLabel: string;
  yLabel: string;
  lines: { label: string; color: string; dashed?: boolean; points: [number, number | null][] }[];
  marks?: Target[];
  /** A shaded stretch of x, e.g. the measured window. */
  band?: { from: number; to: number; label: string };
}

export type Panel = CdfPanel | BarPanel | LinePanel;

const W = 1400;
const PANEL_W = 640;
const PANEL_H = 420;
const ROW_H = 450;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function niceTicks(lo: number, hi: number, count = 6): number[] {
  const span = hi - lo || 1;
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => span / s <= count) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Math.round(v * 1e6) / 1e6);
  return out;
}

function logTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= lo && v <= hi) out.push(v);
    }
  }
  return out;
}

const fmt = (v: number) => (v >= 1000 ? `${v / 1000}k`.replace('.0k', 'k') : `${v}`);

/** A panel's plot area (its left margin and top band given; 20 right, 50 below) and its title. */
function plotArea(x0: number, y0: number, left: number, top: number, title: string) {
  return {
    px: x0 + left,
    py: y0 + top,
    plotW: PANEL_W - left - 20,
    plotH: PANEL_H - 50 - top,
    title: `<text x="${x0 + 10}" y="${y0 + 22}" font-size="17" font-weight="bold">${esc(title)}</text>`,
  };
}

function cdfPanel(x0: number, y0: number, p: CdfPanel): string {
  const { px, py, plotW, plotH, title } = plotArea(x0, y0, 70, 40, p.title);
  const all = p.series.flatMap((s) => s.values).filter((v) => Number.isFinite(v));
  const parts: string[] = [title];
  if (all.length === 0) {
    parts.push(`<text x="${px + 20}" y="${py + 40}" font-size="14">no data</text>`);
    return parts.join('\n');
  }
  const targetsAt = (p.targets ?? []).map((t) => t.at);
  let lo = Math.min(...all, ...targetsAt);
  let hi = Math.max(...all, ...targetsAt);
  if (p.logX) {
    lo = Math.max(0.1, lo * 0.8);
    hi = hi * 1.2;
  } else {
    const pad = (hi - lo) * 0.05 || 1;
    lo = Math.max(0, lo - pad);
    hi += pad;
  }
  const sx = (v: number) => p.logX
    ? px + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW
    : px + ((v - lo) / (hi - lo)) * plotW;
  const sy = (q: number) => py + plotH - q * plotH;
  parts.push(`<rect x="${px}" y="${py}" width="${plotW}" height="${plotH}" fill="#fafafa" stroke="#999"/>`);
  for (const t of p.logX ? logTicks(lo, hi) : niceTicks(lo, hi)) {
    const x = sx(t);
    parts.push(`<line x1="${x}" y1="${py}" x2="${x}" y2="${py + plotH}" stroke="#e3e3e3"/>`);
    parts.push(`<text x="${x}" y="${py + plotH + 18}" font-size="12" text-anchor="middle">${fmt(t)}</text>`);
  }
  for (const q of [0, 0.25, 0.5, 0.75, 0.9, 0.99]) {
    const y = sy(q);
    parts.push(`<line x1="${px}" y1="${y}" x2="${px + plotW}" y2="${y}" stroke="#e3e3e3"/>`);
    parts.push(`<text x="${px - 6}" y="${y + 4}" font-size="12" text-anchor="end">${q === 0.99 ? 'p99' : q === 0.9 ? 'p90' : q === 0.5 ? 'p50' : q.toFixed(2)}</text>`);
  }
  parts.push(`<text x="${px + plotW / 2}" y="${py + plotH + 40}" font-size="13" text-anchor="middle">${esc(p.xLabel)}</text>`);
  (p.targets ?? []).forEach((t, i) => {
    const x = sx(t.at);
    parts.push(`<line x1="${x}" y1="${py}" x2="${x}" y2="${py + plotH}" stroke="#c00" stroke-dasharray="6,4"/>`);
    parts.push(`<text x="${x + 4}" y="${py + 14 + i * 15}" font-size="12" fill="#c00">${esc(t.label)}</text>`);
  });
  const legend: string[] = [];
  for (const s of p.series) {
    const v = s.values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
    if (v.length === 0) continue;
    // The ECDF as a step path; large samples are drawn from 500 quantiles.
    const pts: [number, number][] = [];
    if (v.length <= 1000) {
      pts.push([v[0]!, 0]);
      v.forEach((x, i) => { pts.push([x, i / v.length]); pts.push([x, (i + 1) / v.length]); });
    } else {
      for (let i = 0; i <= 500; i++) pts.push([percentile(v, (i / 500) * 100), i / 500]);
    }
    const d = pts.map(([x, q], i) => `${i ? 'L' : 'M'}${sx(x).toFixed(1)},${sy(q).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2.2"/>`);
    const ly = py + plotH - 16 - (legend.length / 2) * 20;
    // With the p50's 95 % bootstrap interval when the samples are all there (not the quantiles of a large run).
    const [lo, hi] = s.n === undefined ? bootstrapInterval(v, 50) : [NaN, NaN];
    const interval = Number.isFinite(lo) ? ` [${lo.toFixed(0)}–${hi.toFixed(0)}]` : '';
    const label = `${s.label}: n=${s.n ?? v.length}, p50 ${percentile(v, 50).toFixed(0)}${interval}, p99 ${percentile(v, 99).toFixed(0)}`;
    legend.push(`<rect x="${px + plotW - 410}" y="${ly - 11}" width="14" height="4" fill="${s.color}"/>`);
    legend.push(`<text x="${px + plotW - 390}" y="${ly - 5}" font-size="12">${esc(label)}</text>`);
  }
  // Over the curves, on a light backing that keeps it readable.
  if (legend.length > 0) parts.push(`<rect x="${px + plotW - 414}" y="${py + plotH - 12 - (legend.length / 2) * 20}" width="410" height="${(legend.length / 2) * 20}" fill="white" opacity="0.85"/>`, ...legend);
  return parts.join('\n');
}

function barPanel(x0: number, y0: number, p: BarPanel): string {
  const { px, py, plotW, plotH, title } = plotArea(x0, y0, 200, 70, p.title);
  const parts: string[] = [title];
  const finite = (v: number) => typeof v === 'number' && Number.isFinite(v);
  const rows = p.rows.filter((r) => r.bars.some((b) => finite(b.p50) || finite(b.p99)));
  if (rows.length === 0) {
    parts.push(`<text x="${x0 + 30}" y="${py + 40}" font-size="14">${esc(p.empty)}</text>`);
    return parts.join('\n');
  }
  p.legend.forEach((l, i) => {
    parts.push(`<rect x="${x0 + 10 + i * 190}" y="${y0 + 32}" width="14" height="10" fill="${l.color}"/>`);
    parts.push(`<text x="${x0 + 28 + i * 190}" y="${y0 + 42}" font-size="12">${esc(l.label)}</text>`);
  });
  const targetLabels = rows.flatMap((r) => (r.targets ?? []).map((t) => t.label));
  const measures = p.measures ?? { solid: 'p50', light: 'p99' };
  const key = `solid ${measures.solid}, light ${measures.light}${targetLabels.length > 0 ? `; red: target ${targetLabels.join(', ')}` : ''}`;
  parts.push(`<text x="${x0 + 10}" y="${y0 + 60}" font-size="12" fill="#444">${esc(key)}</text>`);
  const values = rows.flatMap((r) => [...r.bars.flatMap((b) => [b.p50, b.p99]), ...(r.targets ?? []).map((t) => t.at)]).filter(finite);
  // Room on the right for the figures written after the longest bar.
  const lo = p.logX ? Math.max(0.1, Math.min(...values.filter((v) => v > 0), 1) * 0.5) : 0;
  const hi = (p.logX ? 4 : 1.3) * Math.max(...values, 1);
  const sx = (v: number) => p.logX
    ? px + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW
    : px + ((v - lo) / (hi - lo)) * plotW;
  parts.push(`<rect x="${px}" y="${py}" width="${plotW}" height="${plotH}" fill="#fafafa" stroke="#999"/>`);
  for (const t of p.logX ? logTicks(lo, hi) : niceTicks(lo, hi)) {
    const x = sx(t);
    parts.push(`<line x1="${x}" y1="${py}" x2="${x}" y2="${py + plotH}" stroke="#e3e3e3"/>`);
    parts.push(`<text x="${x}" y="${py + plotH + 18}" font-size="12" text-anchor="middle">${fmt(t)}</text>`);
  }
  parts.push(`<text x="${px + plotW / 2}" y="${py + plotH + 40}" font-size="13" text-anchor="middle">${esc(p.xLabel)}</text>`);
  const groupH = plotH / rows.length;
  rows.forEach((row, ri) => {
    const gy = py + ri * groupH;
    parts.push(`<text x="${px - 6}" y="${gy + groupH / 2 + 4}" font-size="12" text-anchor="end"${row.part ? ' fill="#666" font-style="italic"' : ''}>${esc(row.label)}</text>`);
    const barH = Math.min(14, (groupH * 0.8) / row.bars.length);
    const top = gy + (groupH - barH * row.bars.length) / 2;
    row.bars.forEach((b, bi) => {
      const y = top + bi * barH;
      if (finite(b.p99)) parts.push(`<rect x="${px}" y="${y.toFixed(1)}" width="${(sx(b.p99) - px).toFixed(1)}" height="${(barH - 1).toFixed(1)}" fill="${b.color}" opacity="0.35"/>`);
      if (finite(b.p50)) parts.push(`<rect x="${px}" y="${y.toFixed(1)}" width="${(sx(b.p50) - px).toFixed(1)}" height="${(barH - 1).toFixed(1)}" fill="${b.color}"/>`);
      const end = Math.max(finite(b.p99) ? sx(b.p99) : px, finite(b.p50) ? sx(b.p50) : px);
      const figure = `${finite(b.p50) ? b.p50 : '-'} / ${finite(b.p99) ? b.p99 : '-'}`;
      parts.push(`<text x="${(end + 4).toFixed(1)}" y="${(y + barH - 3).toFixed(1)}" font-size="10">${figure}</text>`);
    });
    for (const t of row.targets ?? []) {
      const x = sx(t.at);
      parts.push(`<line x1="${x}" y1="${gy + 2}" x2="${x}" y2="${gy + groupH - 2}" stroke="#c00" stroke-width="1.5" stroke-dasharray="4,3"/>`);
    }
  });
  return parts.join('\n');
}

function linePanel(x0: number, y0: number, p: LinePanel): string {
  const { px, py, plotW, plotH, title } = plotArea(x0, y0, 70, 40, p.title);
  const parts: string[] = [title];
  const xs = p.lines.flatMap((l) => l.points.map(([x]) => x));
  const ys = p.lines.flatMap((l) => l.points.flatMap(([, y]) => (y === null ? [] : [y])));
  if (ys.length === 0) {
    parts.push(`<text x="${px + 20}" y="${py + 40}" font-size="14">no data</text>`);
    return parts.join('\n');
  }
  const [xlo, xhi] = [Math.min(...xs), Math.max(...xs) || 1];
  const [ylo, yhi] = [0, Math.max(...ys) * 1.15];
  const sx = (v: number) => px + ((v - xlo) / (xhi - xlo || 1)) * plotW;
  const sy = (v: number) => py + plotH - ((v - ylo) / (yhi - ylo)) * plotH;
  parts.push(`<rect x="${px}" y="${py}" width="${plotW}" height="${plotH}" fill="#fafafa" stroke="#999"/>`);
  if (p.band) {
    parts.push(`<rect x="${sx(p.band.from)}" y="${py}" width="${sx(p.band.to) - sx(p.band.from)}" height="${plotH}" fill="#e8f0e0"/>`);
    parts.push(`<text x="${sx(p.band.from) + 4}" y="${py + plotH - 6}" font-size="11" fill="#486">${esc(p.band.label)}</text>`);
  }
  for (const t of niceTicks(xlo, xhi)) {
    parts.push(`<line x1="${sx(t)}" y1="${py}" x2="${sx(t)}" y2="${py + plotH}" stroke="#e3e3e3"/>`);
    parts.push(`<text x="${sx(t)}" y="${py + plotH + 18}" font-size="12" text-anchor="middle">${fmt(t)}</text>`);
  }
  for (const t of niceTicks(ylo, yhi, 5)) {
    parts.push(`<line x1="${px}" y1="${sy(t)}" x2="${px + plotW}" y2="${sy(t)}" stroke="#e3e3e3"/>`);
    parts.push(`<text x="${px - 6}" y="${sy(t) + 4}" font-size="12" text-anchor="end">${fmt(t)}</text>`);
  }
  parts.push(`<text x="${px + plotW / 2}" y="${py + plotH + 40}" font-size="13" text-anchor="middle">${esc(p.xLabel)}</text>`);
  parts.push(`<text x="${x0 + 16}" y="${py + plotH / 2}" font-size="13" text-anchor="middle" transform="rotate(-90 ${x0 + 16} ${py + plotH / 2})">${esc(p.yLabel)}</text>`);
  (p.marks ?? []).forEach((m, i) => {
    parts.push(`<line x1="${sx(m.at)}" y1="${py}" x2="${sx(m.at)}" y2="${py + plotH}" stroke="#c00" stroke-dasharray="6,4"/>`);
    parts.push(`<text x="${sx(m.at) + 4}" y="${py + 14 + i * 15}" font-size="11" fill="#c00">${esc(m.label)}</text>`);
  });
  const legend: string[] = [];
  p.lines.forEach((l, i) => {
    // A new subpath after each gap.
    let pen = 'M';
    const d = l.points.map(([x, y]) => {
      if (y === null) { pen = 'M'; return ''; }
      const step = `${pen}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
      pen = 'L';
      return step;
    }).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${l.color}" stroke-width="1.8"${l.dashed ? ' stroke-dasharray="5,3"' : ''}/>`);
    const ly = py + 16 + i * 16;
    legend.push(`<rect x="${px + plotW - 220}" y="${ly - 8}" width="14" height="4" fill="${l.color}"/>`);
    legend.push(`<text x="${px + plotW - 200}" y="${ly - 2}" font-size="12">${esc(l.label)}${l.dashed ? ' (dashed)' : ''}</text>`);
  });
  // Over the lines, on a light backing that keeps it readable.
  parts.push(`<rect x="${px + plotW - 224}" y="${py + 2}" width="222" height="${p.lines.length * 16 + 6}" fill="white" opacity="0.85"/>`, ...legend);
  return parts.join('\n');
}

/** Text cut into lines of at most `max` characters at its "; " (a longer piece keeps a line of its own). */
export function wrapAt(text: string, max: number): string[] {
  const lines: string[] = [];
  for (const piece of text.split('; ')) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 2 + piece.length <= max) lines[lines.length - 1] = `${last}; ${piece}`;
    else lines.push(piece);
  }
  return lines;
}

/** Characters of the 13 px subtitle that fit the chart's width. */
const SUBTITLE_CHARS = 175;

export function renderChart(title: string, panels: Panel[], subtitle: string): string {
  const subtitleLines = wrapAt(subtitle, SUBTITLE_CHARS);
  // Two lines fit above the panels; each one more moves them down.
  const below = Math.max(0, subtitleLines.length - 2) * 15;
  const height = 90 + below + Math.ceil(panels.length / 2) * ROW_H;
  const drawn = panels.map((p, i) => {
    const x = i % 2 === 0 ? 30 : 730;
    const y = 70 + below + Math.floor(i / 2) * ROW_H;
    if ('rows' in p) return barPanel(x, y, p);
    return 'lines' in p ? linePanel(x, y, p) : cdfPanel(x, y, p);
  });
  return `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="DejaVu Sans, sans-serif">
<rect width="${W}" height="${height}" fill="white"/>
<text x="30" y="32" font-size="22" font-weight="bold">${esc(title)}</text>
${subtitleLines.map((line, i) => `<text x="30" y="${56 + i * 15}" font-size="13" fill="#444">${esc(line)}</text>`).join('\n')}
${drawn.join('\n')}
</svg>
`;
}

/** Writes the SVG and converts it to PNG; returns whether the PNG was made. */
export function writeChart(svgPath: string, pngPath: string, svg: string): boolean {
  writeFileSync(svgPath, svg);
  try {
    execFileSync('rsvg-convert', ['-f', 'png', '-o', pngPath, svgPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    return true;
  } catch (err) {
    console.error(`bench: rsvg-convert failed (apt-get install librsvg2-bin; scripts/setup.sh installs it): ${String(err)}`);
    return false;
  }
}
