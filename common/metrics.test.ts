import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { processRegistry, programMetrics } from './metrics.ts';
import { WorkQueue } from './queue.ts';
import { VERSION } from './version.ts';

describe('programMetrics (R51)', () => {
  it('exports build_info with the version and the Node.js release, and counts and times API requests by verb, resource and code', async () => {
    const registry = processRegistry();
    const { apiClient } = programMetrics(registry, 'agent');
    apiClient.onResponse({ verb: 'list', resource: 'pods', code: '429', seconds: 0.003 });
    apiClient.onResponse({ verb: 'list', resource: 'pods', code: '200', seconds: 0.2 });
    apiClient.onResponse({ verb: 'list', resource: 'pods', code: '200', seconds: 3 });
    apiClient.onRateLimited('create', 0);
    apiClient.onRateLimited('create', 0.3);
    const text = await registry.metrics();
    assert.match(text, new RegExp(`^sidecar_terminator_agent_build_info\\{version="${VERSION}",commit="[0-9a-f]*",node_version="${process.version}"\\} 1$`, 'm'));
    assert.match(text, /^sidecar_terminator_agent_api_requests_total\{verb="list",resource="pods",code="429"\} 1$/m);
    assert.match(text, /^sidecar_terminator_agent_api_requests_total\{verb="list",resource="pods",code="200"\} 2$/m);
    assert.match(text, /^sidecar_terminator_agent_api_request_duration_seconds_bucket\{le="0.25",verb="list",resource="pods",code="200"\} 1$/m);
    assert.match(text, /^sidecar_terminator_agent_api_request_duration_seconds_count\{verb="list",resource="pods",code="200"\} 2$/m);
    assert.match(text, /^sidecar_terminator_agent_api_rate_limiter_duration_seconds_bucket\{le="0.005",verb="create"\} 1$/m);
    assert.match(text, /^sidecar_terminator_agent_api_rate_limiter_duration_seconds_count\{verb="create"\} 2$/m);
  });

  it('exports each work queue in client-go\'s shape by name, and its reconcile errors by controller', async () => {
    const registry = processRegistry();
    const { workQueue } = programMetrics(registry, 'controller');
    let text = await registry.metrics();
    assert.doesNotMatch(text, /^sidecar_terminator_controller_workqueue_depth\{/m, 'no queue made yet: no series');
    let now = 0;
    const gate = Promise.withResolvers<void>();
    const q = new WorkQueue({
      workers: 1, now: () => now, observe: workQueue('pods'), onError: () => {},
      handler: async (key) => {
        if (key === 'a') await gate.promise;
        if (key === 'bad') throw new Error('boom');
      },
    });
    q.add('a');
    q.add('b');
    q.add('bad');
    now = 4000;
    text = await registry.metrics();
    assert.match(text, /^sidecar_terminator_controller_workqueue_depth\{name="pods"\} 2$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_unfinished_work_seconds\{name="pods"\} 4$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_longest_running_processor_seconds\{name="pods"\} 4$/m);
    assert.match(text, /^sidecar_terminator_controller_reconcile_errors_total\{controller="pods"\} 0$/m);
    gate.resolve();
    await q.idle();
    q.stop();
    text = await registry.metrics();
    assert.match(text, /^sidecar_terminator_controller_workqueue_adds_total\{name="pods"\} 3$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_retries_total\{name="pods"\} 1$/m);
    assert.match(text, /^sidecar_terminator_controller_reconcile_errors_total\{controller="pods"\} 1$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_queue_duration_seconds_count\{name="pods"\} 3$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_queue_duration_seconds_bucket\{le="5",name="pods"\} 3$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_work_duration_seconds_bucket\{le="2.5",name="pods"\} 2$/m);
    assert.match(text, /^sidecar_terminator_controller_workqueue_depth\{name="pods"\} 0$/m);
  });
});
