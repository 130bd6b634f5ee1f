import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createControllerMetrics, type QueueDepths } from './metrics.ts';

describe('createControllerMetrics (R51)', () => {
  it('exports the leader\'s queue depths at each scrape, none while a standby', async () => {
    let depths: QueueDepths | undefined;
    const { registry } = createControllerMetrics(() => depths);
    assert.doesNotMatch(await registry.metrics(), /^sidecar_terminator_controller_queue_depth\{/m);
    depths = { pods: 3, requests: 0 };
    let text = await registry.metrics();
    assert.match(text, /^sidecar_terminator_controller_queue_depth\{queue="pods"\} 3$/m);
    assert.match(text, /^sidecar_terminator_controller_queue_depth\{queue="requests"\} 0$/m);
    depths = undefined; // leadership lost
    text = await registry.metrics();
    assert.doesNotMatch(text, /^sidecar_terminator_controller_queue_depth\{/m);
    assert.match(text, /^sidecar_terminator_controller_build_info\{/m);
  });
});
