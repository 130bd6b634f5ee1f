import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ourJobOptions, planBatches, POLICY_MARKED_SIDECAR, ratios, sidecarNames, VARIANTS } from './latency.ts';
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

  it('the variants: a preStop hook; an ignore-exit-code sidecar exiting 143; three sidecars, all marked; one a policy marks alone', () => {
    assert.deepEqual(VARIANTS, ['preStop', 'exit143', 'threeSidecars', 'policyMarked']);
    const byPolicy = containers('policyMarked')[1]!;
    assert.equal(byPolicy.name, POLICY_MARKED_SIDECAR);
    assert.equal(byPolicy.env, undefined, 'no marker of its own');
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

  it('the plan: the kinds of batches take turns; on one node every Job on it', () => {
    const batches = planBatches({ jobsPerKind: 10, batchSize: 10, withNative: true, variantJobs: 0 }, ['host']);
    assert.deepEqual(batches.map((b) => b[0]!.batch), ['mixed', 'allOurs', 'onFailure', 'allNative', 'mixed']);
    assert.deepEqual(batches[0]!.slice(0, 2).map((j) => j.name), ['mixed-ours-000', 'mixed-native-000']);
    assert.ok(batches.flat().every((j) => j.node === 'host'));
    assert.equal(batches.flat().length, 50);
  });

  it('the plan of two kinds alone (only): their batches take turns, each first of a pair as often, nothing else runs', () => {
    const batches = planBatches({ jobsPerKind: 20, batchSize: 10, withNative: false, variantJobs: 20, only: ['allOurs', 'policyMarked'] }, ['host']);
    assert.deepEqual(batches.map((b) => b[0]!.batch), ['allOurs', 'policyMarked', 'policyMarked', 'allOurs'], 'each kind as often first of a pair as second');
    assert.ok(batches.every((b) => b.every((j) => j.batch === b[0]!.batch) && b.length === 10));
  });

  it('the plan on three nodes: each kind of batch spread evenly, a batch over all nodes, ours and native of a mixed pair on one node', () => {
    const nodes = ['host', 'host-2', 'host-3'];
    const batches = planBatches({ jobsPerKind: 30, batchSize: 10, withNative: true, variantJobs: 6 }, nodes);
    const jobs = batches.flat();
    for (const batch of ['mixed', 'allOurs', 'allNative', 'onFailure', ...VARIANTS] as const) {
      const of = jobs.filter((j) => j.batch === batch);
      const counts = nodes.map((node) => of.filter((j) => j.node === node).length);
      assert.ok(counts.every((n) => n === counts[0]), `${batch}: ${counts.join(', ')}`);
    }
    assert.ok(batches.every((b) => new Set(b.map((j) => j.node)).size === 3));
    const mixed = jobs.filter((j) => j.batch === 'mixed');
    for (const ours of mixed.filter((j) => j.kind === 'ours')) assert.equal(mixed.find((j) => j.name === ours.name.replace('ours', 'native'))!.node, ours.node);
  });
});
