import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { projectAgentPod } from './pod.ts';
import { kubeletRestarts } from './request-plan.ts';

describe('projectAgentPod', () => {
  it('keeps a container\'s own restartPolicy and rules, which decide whether kubelet runs it again (R41)', () => {
    const pod: V1Pod = {
      metadata: { namespace: 'ns', name: 'p', uid: 'u' },
      spec: {
        restartPolicy: 'OnFailure',
        containers: [
          { name: 'main', image: 'busybox' },
          { name: 'proxy', image: 'busybox', restartPolicy: 'Never' },
          { name: 'shipper', image: 'busybox', restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [143] } }] },
        ],
      },
      status: { phase: 'Running' },
    };
    const projected = projectAgentPod(pod);
    assert.deepEqual(projected.containers.map((c) => c.restart), [
      undefined,
      { policy: 'Never', rules: [] },
      { policy: 'Never', rules: [{ action: 'Restart', operator: 'In', values: [143] }] },
    ]);
    assert.equal(kubeletRestarts(projected, 'main', 143), true, 'the Pod\'s OnFailure');
    assert.equal(kubeletRestarts(projected, 'proxy', 143), false, 'its own Never');
    assert.equal(kubeletRestarts(projected, 'shipper', 143), true, 'its Restart rule');
  });
});
