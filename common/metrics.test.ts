import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { processRegistry, programMetrics } from './metrics.ts';
import { VERSION } from './version.ts';

describe('programMetrics (R51)', () => {
  it('exports build_info with the version and the Node.js release, and counts API requests by verb and code', async () => {
    const registry = processRegistry();
    const { apiRequests } = programMetrics(registry, 'agent');
    apiRequests.inc({ verb: 'list', code: '429' });
    apiRequests.inc({ verb: 'list', code: '200' });
    apiRequests.inc({ verb: 'list', code: '200' });
    const text = await registry.metrics();
    assert.match(text, new RegExp(`^sidecar_terminator_agent_build_info\\{version="${VERSION}",commit="[0-9a-f]*",node_version="${process.version}"\\} 1$`, 'm'));
    assert.match(text, /^sidecar_terminator_agent_api_requests_total\{verb="list",code="429"\} 1$/m);
    assert.match(text, /^sidecar_terminator_agent_api_requests_total\{verb="list",code="200"\} 2$/m);
  });
});
