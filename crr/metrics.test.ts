import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WorkQueue } from '../common/queue.ts';
import { createControllerMetrics } from './metrics.ts';

describe('createControllerMetrics (R51)', () => {
  it('exports the leader\'s work queues at each scrape, none while a standby', async () => {
    const metrics = createControllerMetrics();
    assert.doesNotMatch(await metrics.registry.metrics(), /^sidecar_terminator_controller_workqueue_depth\{/m);
    // What startLoops makes on leading.
    const queues = ['pods', 'requests'].map((name) => new WorkQueue({ workers: 1, handler: async () => {}, onError: () => {}, observe: metrics.workQueue(name) }));
    const text = await metrics.registry.metrics();
    assert.match(text, /^sidecar_terminator_controller_workqueue_depth\{name="pods"\} 0$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_depth\{name="requests"\} 0$/m);
    assert.match(text, /^sidecar_terminator_controller_reconcile_errors_total\{controller="requests"\} 0$/m);
    assert.match(text, /^sidecar_terminator_controller_build_info\{/m);
    for (const q of queues) q.stop();
  });
});
