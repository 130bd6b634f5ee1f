import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { partStamps, stampsText } from './stamps.ts';

const stamp = (commit: string) => ({ commit, at: '2026-11-27T00:00:00Z', kubernetes: 'v1.37.2', runtime: 'containerd v2.4.2' });

describe('which commit measured each part', () => {
  it('parts run now get this run\'s stamp; kept parts keep theirs, whatever run kept them last', () => {
    const previous = { measured: { latency: stamp('aaa'), burst: stamp('bbb'), scale: stamp('ccc') }, partsRun: ['latency'], generatedAt: 'x', environment: { commit: 'aaa' } };
    assert.deepEqual(partStamps(new Set(['burst']), stamp('new'), previous), { latency: stamp('aaa'), burst: stamp('new'), scale: stamp('ccc') });
  });

  it('results from before the stamps: the previous run\'s commit only for the parts it ran, none for what it had kept', () => {
    const previous = { partsRun: ['latency'], generatedAt: '2026-11-26T19:08:39Z', environment: { commit: 'ab6d3b6', kubernetes: 'v1.37.2', runtime: 'containerd v2.4.2' } };
    const stamps = partStamps(new Set(['soak']), stamp('new'), previous);
    assert.deepEqual(stamps.latency, { commit: 'ab6d3b6', at: '2026-11-26T19:08:39Z', kubernetes: 'v1.37.2', runtime: 'containerd v2.4.2' });
    assert.equal(stamps.burst, undefined);
    assert.equal(stamps.scale, undefined);
    assert.deepEqual(stamps.soak, stamp('new'));
  });

  it('reads as one line, in the parts\' order, parts measured alike together', () => {
    assert.equal(stampsText({ soak: stamp('s'), latency: stamp('l'), scale: stamp('s') }), 'latency l (v1.37.2, containerd v2.4.2); scale, soak s (v1.37.2, containerd v2.4.2)');
  });

  it('the parts on several nodes: kept like the others, their node count in the text', () => {
    const nodes = { ...stamp('n'), nodes: 3 };
    const stamps = partStamps(new Set(['latency']), stamp('new'), { measured: { latencyNodes: nodes, burstNodes: nodes }, partsRun: ['latency'] });
    assert.deepEqual(stamps, { latency: stamp('new'), latencyNodes: nodes, burstNodes: nodes });
    assert.equal(stampsText(stamps), 'latency new (v1.37.2, containerd v2.4.2); latencyNodes, burstNodes n (v1.37.2, containerd v2.4.2, 3 nodes)');
  });

  it('the kruise part is stamped as the others are: this run\'s when run, else the kept one', () => {
    assert.deepEqual(partStamps(new Set(['kruise']), stamp('new'), { measured: { kruise: stamp('k') } }).kruise, stamp('new'));
    const kept = partStamps(new Set(['latency']), stamp('new'), { measured: { kruise: stamp('k') } });
    assert.deepEqual(kept, { latency: stamp('new'), kruise: stamp('k') });
    assert.equal(stampsText(kept), 'latency new (v1.37.2, containerd v2.4.2); kruise k (v1.37.2, containerd v2.4.2)');
  });
});
