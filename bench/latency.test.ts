import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ourJobOptions, ratios, sidecarNames, VARIANTS } from './latency.ts';
import { summarize } from './stats.ts';

describe('part 1: the Jobs of each kind of batch', () => {
  const containers = (batch: Parameters<typeof ourJobOptions>[0]) => ourJobOptions(batch).containers;

  it('ours alone: a main and one marked sidecar that exits 0 on SIGTERM, no hook', () => {
    const [main, proxy, ...rest] = containers('allOurs');
    assert.equal(main!.name, 'main');
    assert.equal(proxy!.name, 'proxy');
    assert.deepEqual(rest, []);
    assert.match(proxy!.command!.join(' '), /trap 'exit 0' TERM/);
    assert.equal(proxy!.lifecycle, undefined);
  });

  it('the variants: a preStop hook; an ignore-exit-code sidecar exiting 143; three sidecars, all marked', () => {
    assert.deepEqual(VARIANTS, ['preStop', 'exit143', 'threeSidecars']);
    assert.ok(containers('preStop')[1]!.lifecycle?.preStop?.exec);
    const exit143 = containers('exit143')[1]!;
    assert.match(exit143.command!.join(' '), /trap 'exit 143' TERM/);
    assert.ok(exit143.env!.some((e) => e.name === 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE' && e.value === 'true'));
    const three = containers('threeSidecars').slice(1);
    assert.deepEqual(three.map((c) => c.name), sidecarNames('threeSidecars'));
    assert.ok(three.every((c) => c.env!.some((e) => e.name === 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT')));
    assert.equal(ourJobOptions('onFailure').restartPolicy, 'OnFailure');
    assert.equal(ourJobOptions('exit143').restartPolicy, 'Never');
  });

  it('ratios: ours over native, to two decimals', () => {
    const figures = (mainToSidecar: number[], complete: number[]) => ({ mainToSidecarMs: summarize(mainToSidecar), createdToCompleteMs: summarize(complete) });
    const r = ratios(figures([10, 20, 30], [5000]), figures([900, 1000, 1100], [6000]));
    assert.equal(r.mainToSidecarP50, 0.02);
    assert.equal(r.createdToCompleteP50, 0.83);
  });
});
