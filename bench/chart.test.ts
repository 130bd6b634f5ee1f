// The chart from figures as results.json holds them: missing figures (null after JSON, NaN before) draw nothing, never NaN.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { BarPanel } from './chart.ts';
import { renderChart, wrapAt } from './chart.ts';

const bars = (p50: number, p99: number): BarPanel => ({
  title: 'steps',
  xLabel: 'ms',
  legend: [{ label: 'alone', color: '#111' }, { label: 'mixed', color: '#222' }],
  rows: [
    { label: 'main exit → SIGTERM sent', bars: [{ color: '#111', p50, p99 }, { color: '#222', p50: NaN, p99: NaN }], targets: [{ at: 30, label: 'p50 ≤ 30' }] },
    { label: 'acting → preStop done', bars: [{ color: '#111', p50: NaN, p99: NaN }] },
  ],
  logX: true,
  empty: 'not measured',
});

describe('the chart', () => {
  it('draws the bars that have figures, with the row targets, and leaves out rows without any', () => {
    const svg = renderChart('t', [bars(12.5, 80)], 's');
    assert.ok(svg.includes('12.5 / 80'));
    assert.ok(svg.includes('p50 ≤ 30'));
    assert.ok(svg.includes('main exit → SIGTERM sent'));
    assert.ok(!svg.includes('preStop'));
    assert.ok(!svg.includes('NaN'));
  });

  it('says "not measured" when no row has a figure (null from results.json alike)', () => {
    const svg = renderChart('t', [bars(null as unknown as number, NaN)], 's');
    assert.ok(svg.includes('not measured'));
    assert.ok(!svg.includes('NaN'));
  });

  it('draws every target line of a CDF panel, and makes room for as many rows of panels as given', () => {
    const cdf = { title: 'cdf', xLabel: 'ms', series: [{ label: 'a', color: '#111', values: [10, 20, 40] }], targets: [{ at: 30, label: 'p50 ≤ 30' }, { at: 100, label: 'p99 ≤ 100' }] };
    const svg = renderChart('t', [cdf, cdf, cdf], 's');
    assert.ok(svg.includes('p50 ≤ 30') && svg.includes('p99 ≤ 100'));
    assert.match(svg, /height="990"/);
    assert.ok(!svg.includes('NaN'));
  });

  it('draws lines with gaps where a value is missing, the marks and the band, and says "no data" without values', () => {
    const line = {
      title: 'memory', xLabel: 'minutes', yLabel: 'MiB',
      lines: [{ label: 'agent RSS', color: '#111', points: [[0, 70], [1, null], [2, 72], [3, 73]] as [number, number | null][] }],
      marks: [{ at: 1, label: 'agent restarted' }],
      band: { from: 2, to: 3, label: 'measured' },
    };
    const svg = renderChart('t', [line], 's');
    assert.equal((svg.match(/M[\d.]+,[\d.]+/g) ?? []).length, 2, 'two subpaths around the gap');
    assert.ok(svg.includes('agent restarted') && svg.includes('measured') && svg.includes('agent RSS'));
    assert.ok(!svg.includes('NaN'));
    assert.ok(renderChart('t', [{ ...line, lines: [{ ...line.lines[0]!, points: [[0, null]] }] }], 's').includes('no data'));
  });

  it('the subtitle: one line while it fits, else cut at its "; " into lines that fit', () => {
    assert.deepEqual(wrapAt('a; b; c', 10), ['a; b; c']);
    assert.deepEqual(wrapAt('2 CPUs; measured by: latency x; burst y', 22), ['2 CPUs', 'measured by: latency x', 'burst y']);
    assert.deepEqual(wrapAt('a longer piece than fits; b', 5), ['a longer piece than fits', 'b']);
  });
});
