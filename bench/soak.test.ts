import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SOAK_KINDS, flatWindow, soakJob } from './soak.ts';

describe('soak: the measured window', () => {
  // One sample every 15 s for an hour; the window is minutes 20–60.
  const points = (rss: (minute: number) => number, heap: (minute: number) => number | null = () => 10) =>
    Array.from({ length: 241 }, (_, i) => ({ minute: i / 4, rss: rss(i / 4), heap: heap(i / 4) }));
  const cases: { name: string; rss: (m: number) => number; growth: number; slope: number }[] = [
    { name: 'flat after a warm-up climb', rss: (m) => (m < 15 ? 60 + m : 80), growth: 0, slope: 0 },
    { name: 'a steady leak of 6 MiB an hour', rss: (m) => 80 + m / 10, growth: 3.7, slope: 6 },
    { name: 'a step that comes back', rss: (m) => (m > 35 && m < 45 ? 100 : 80), growth: 0, slope: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const w = flatWindow(points(c.rss), 20, 60);
      assert.equal(w.rssGrowthPercent, c.growth);
      assert.ok(Math.abs(w.rssSlopeMiBPerHour - c.slope) < 6, `slope ${w.rssSlopeMiBPerHour} near ${c.slope}`);
      assert.equal(w.heapGrowthPercent, 0);
    });
  }

  it('leaves out samples not read, and uses a quarter of a short window as its stretch', () => {
    const w = flatWindow(points((m) => (m < 5 ? 50 : 70 + (m > 9 ? 7 : 0)), (m) => (m < 6 ? null : 20)), 5, 13);
    assert.equal(w.rssBeforeMiB, 50, 'the stretch before the window');
    assert.equal(w.rssFirstMiB, 70);
    assert.equal(w.rssLastMiB, 77);
    assert.equal(w.rssGrowthPercent, 10);
    assert.equal(w.heapFirstMiB, 20);
  });

  it('takes the stretch before the window from the process the window opens on', () => {
    // The leader moved at minute 16: the one before it ran at 425 MiB, the new one at 90.
    const w = flatWindow(points((m) => (m < 16 ? 425 : m < 20 ? 90 : 150)), 20, 60, 16);
    assert.equal(w.rssBeforeMiB, 90);
    assert.equal(flatWindow(points((m) => (m < 16 ? 425 : m < 20 ? 90 : 150)), 20, 60).rssBeforeMiB, 425, 'without the process change');
  });
});

describe('soak: the Jobs', () => {
  const table: { kind: (typeof SOAK_KINDS)[number]; restartPolicy: string; ttl?: number; backoffLimit: number }[] = [
    { kind: 'deleted', restartPolicy: 'Never', backoffLimit: 0 },
    { kind: 'ttl', restartPolicy: 'Never', ttl: 60, backoffLimit: 0 },
    { kind: 'retained', restartPolicy: 'Never', backoffLimit: 0 },
    { kind: 'onFailure', restartPolicy: 'OnFailure', backoffLimit: 2 },
  ];
  for (const t of table) {
    it(`${t.kind}: ${t.restartPolicy}, TTL ${t.ttl ?? 'none'}, hostile annotation unique per Pod`, () => {
      const job = soakJob(`soak-${t.kind}`, t.kind, 7, 'node-1');
      assert.equal(job.spec?.template.spec?.restartPolicy, t.restartPolicy);
      assert.equal(job.spec?.ttlSecondsAfterFinished, t.ttl);
      assert.equal(job.spec?.backoffLimit, t.backoffLimit);
      assert.equal(job.spec?.template.metadata?.annotations?.['sidecar-terminator.dev/sidecars'], 'proxy,not-a-container-7');
      assert.equal(job.metadata?.labels?.['sidecar-terminator.bench/soak-kind'], t.kind);
    });
  }
  it('covers every kind', () => assert.deepEqual(table.map((t) => t.kind), [...SOAK_KINDS]));
});
