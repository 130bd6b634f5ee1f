import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseAgentConfig } from './config.ts';

describe('parseAgentConfig', () => {
  it('takes the node name from NODE_NAME and defaults the rest', () => {
    assert.deepEqual(parseAgentConfig([], { NODE_NAME: 'n1' }), {
      nodeName: 'n1', hostRunDir: '/var/run', runtimeSocket: undefined, metricsPort: 9440, workers: 32, resyncSeconds: 30, kubeconfig: undefined,
    });
  });
  it('refuses to start without a node name', () => {
    assert.throws(() => parseAgentConfig([], {}), /NODE_NAME/);
  });
  it('rejects a bad number with the flag named', () => {
    assert.throws(() => parseAgentConfig(['--workers', 'many'], { NODE_NAME: 'n1' }), /--workers must be a positive whole number/);
  });
  it('rejects unknown flags, with the usage', () => {
    assert.throws(() => parseAgentConfig(['--nope'], { NODE_NAME: 'n1' }), /Unknown option '--nope'\nusage: sidecar-terminator agent/);
  });
  it('flags win over the environment', () => {
    const c = parseAgentConfig(['--node-name', 'n2', '--runtime-socket', '/run/x.sock', '--kubeconfig', '/k'], { NODE_NAME: 'n1', KUBECONFIG: '/e' });
    assert.equal(c.nodeName, 'n2');
    assert.equal(c.runtimeSocket, '/run/x.sock');
    assert.equal(c.kubeconfig, '/k');
  });
});
