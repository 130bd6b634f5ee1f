// The chart from figures as results.json holds them: missing figures (null after JSON, NaN before) draw nothing, never NaN.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { BarPanel } from './chart.ts';
import { renderChart, wrapAt } from './chart.ts';
import type { KruiseResult } from './kruise.ts';
import { kruisePanel } from './kruise.ts';

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

  it('a subtitle of more than two lines moves the panels down', () => {
    const cdf = { title: 'cdf', xLabel: 'ms', series: [{ label: 'a', color: '#111', values: [10, 20, 40] }] };
    const piece = 'x'.repeat(100);
    assert.match(renderChart('t', [cdf], `${piece}; ${piece}`), /height="540"/);
    const svg = renderChart('t', [cdf], `${piece}; ${piece}; ${piece}`);
    assert.match(svg, /height="555"/);
    assert.ok(svg.includes('y="86"') && svg.includes('y="107"'), 'the third line, and the panel\'s title below it');
  });

  // The kruise part as results.json holds it (the fields the panel reads).
  const memory = (median: number, max: number) => ({ workingSetMiB: { median, max } });
  const kruiseDaemon = {
    kruise: { version: 'v1.9.0' }, benchPods: 100, podsOnNode: 104, windowSeconds: 60,
    beforePods: { podsOnNode: 4, agent: memory(29.9, 30.2), kruiseDaemon: memory(12.9, 12.9) },
    agent: memory(32, 32.3), kruiseDaemon: memory(18.5, 18.6),
  } as unknown as KruiseResult;
  const stamp = { commit: '15b1141', at: '2026-11-29T02:19:10.828Z', kubernetes: 'v1.37.2', runtime: 'containerd v2.4.2' };
  const colors = { agent: '#111', kruiseDaemon: '#222' };

  it('the kruise part: the working sets side by side, median and max, the target at kruise-daemon\'s median, with the part\'s stamp', () => {
    const svg = renderChart('t', [kruisePanel({ kruiseDaemon, measured: { kruise: stamp } }, colors)], 's');
    assert.ok(svg.includes('32 / 32.3') && svg.includes('18.5 / 18.6'), 'the window');
    assert.ok(svg.includes('29.9 / 30.2') && svg.includes('12.9 / 12.9'), 'before the Pods');
    assert.ok(svg.includes('104 Pods, 60 s idle') && svg.includes('4 Pods, before the 100'));
    assert.ok(svg.includes('kruise-daemon v1.9.0'));
    assert.ok(svg.includes('solid median, light max; red: target agent ≤ kruise-daemon (medians)'));
    assert.ok(svg.includes('measured at 15b1141 (v1.37.2, containerd v2.4.2)'));
    assert.ok(!svg.includes('NaN'));
  });

  it('a results.json without the kruise part still draws, the panel saying "not measured"', () => {
    const results = JSON.parse('{ "measured": { "latency": { "commit": "c3c109a", "at": "", "kubernetes": "v1.37.2", "runtime": "containerd v2.4.2" } } }') as Parameters<typeof kruisePanel>[0];
    const svg = renderChart('t', [bars(12.5, 80), kruisePanel(results, colors)], 's');
    assert.ok(svg.includes('12.5 / 80'));
    assert.ok(svg.includes('not measured: no kruise part in results.json'));
    assert.ok(!svg.includes('NaN') && !svg.includes('undefined'));
  });
});
