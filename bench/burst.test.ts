import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { byVerbAndCode } from './burst.ts';
import { parseMetrics } from './stats.ts';

describe('the burst: the agent\'s API requests by verb and code', () => {
  it('the deltas between two scrapes, only those that moved, a series new in the second counted whole', () => {
    const scrape = (lines: string[]) => parseMetrics(lines.map((l) => `sidecar_terminator_agent_api_requests_total${l}`).join('\n'));
    const before = scrape(['{verb="create",code="201"} 10', '{verb="patch",code="200"} 5', '{verb="get",code="200"} 3']);
    const after = scrape(['{verb="create",code="201"} 110', '{verb="patch",code="200"} 205', '{verb="get",code="200"} 3', '{verb="patch",code="409"} 7']);
    assert.deepEqual(byVerbAndCode(before, after), { 'create 201': 100, 'patch 200': 200, 'patch 409': 7 });
  });
});
