import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { API_RATE_DEFAULTS, apiRateFlags } from './api-rate-flags.ts';

describe('--kube-api-qps and --kube-api-burst', () => {
  const { parse, usage } = apiRateFlags('controller');

  it('take a rate (fractions too, negative: no limit) and a whole burst', () => {
    assert.deepEqual(parse({ 'kube-api-qps': '7.5', 'kube-api-burst': '12' }), { kubeApiQps: 7.5, kubeApiBurst: 12 });
    assert.deepEqual(parse({ 'kube-api-qps': '-1', 'kube-api-burst': '1' }), { kubeApiQps: -1, kubeApiBurst: 1 });
  });

  it('refuse 0 (client-go\'s "its default"), words, and a burst that is not a positive whole number', () => {
    for (const qps of ['0', '', 'fast', 'Infinity']) assert.throws(() => parse({ 'kube-api-qps': qps, 'kube-api-burst': '1' }), /--kube-api-qps must be/);
    for (const burst of ['0', '1.5', '-3']) assert.throws(() => parse({ 'kube-api-qps': '1', 'kube-api-burst': burst }), /--kube-api-burst must be/);
  });

  it('default per program, as the usage says, well above the benchmarks\' rates', () => {
    assert.match(usage, new RegExp(`--kube-api-qps N .*\\(default ${API_RATE_DEFAULTS.controller.qps}\\)`));
    assert.match(usage, new RegExp(`--kube-api-burst N .*\\(default ${API_RATE_DEFAULTS.controller.burst}\\)`));
    assert.ok(API_RATE_DEFAULTS.controller.qps >= 2 * 500, 'twice the scale benchmark\'s ~500 requests a second');
    assert.ok(API_RATE_DEFAULTS.agent.burst >= 500, 'a 100-Job burst\'s 500 requests at once');
  });
});
