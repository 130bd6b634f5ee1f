import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KUBELET_LABELS, ownerFromLabels } from './owner.ts';

describe('ownerFromLabels (R37)', () => {
  const all = {
    [KUBELET_LABELS.podUid]: 'uid-1',
    [KUBELET_LABELS.podNamespace]: 'ns',
    [KUBELET_LABELS.podName]: 'job-pod',
    [KUBELET_LABELS.container]: 'proxy',
  };
  it('names the Pod container when all four labels are set', () => {
    assert.deepEqual(ownerFromLabels(all), { podUid: 'uid-1', podNamespace: 'ns', podName: 'job-pod', container: 'proxy' });
  });
  for (const key of Object.values(KUBELET_LABELS)) {
    it(`none without ${key}, or with it empty`, () => {
      const rest: Record<string, string> = { ...all };
      delete rest[key];
      assert.equal(ownerFromLabels(rest), undefined);
      assert.equal(ownerFromLabels({ ...all, [key]: '' }), undefined);
    });
  }
  it('none without labels', () => {
    assert.equal(ownerFromLabels(undefined), undefined);
    assert.equal(ownerFromLabels(null), undefined);
    assert.equal(ownerFromLabels({}), undefined);
  });
});
