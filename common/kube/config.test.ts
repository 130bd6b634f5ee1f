import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromKubeconfigFile } from './config.ts';
import { podPath, resourcePath } from './paths.ts';

function kubeconfig(text: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'st-kubeconfig-'));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  writeFileSync(join(dir, 'config'), text);
  return join(dir, 'config');
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('fromKubeconfigFile', () => {
  it('reads the current context: inline certificates', () => {
    const conn = fromKubeconfigFile(kubeconfig(`
current-context: b
contexts:
- {name: a, context: {cluster: other, user: other}}
- {name: b, context: {cluster: c1, user: u1}}
clusters:
- {name: c1, cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: ${b64('CA')}}}
users:
- {name: u1, user: {client-certificate-data: ${b64('CERT')}, client-key-data: ${b64('KEY')}}}
`));
    assert.equal(conn.server, 'https://10.0.0.1:6443');
    assert.equal(conn.ca?.toString(), 'CA');
    assert.equal(conn.cert?.toString(), 'CERT');
    assert.equal(conn.key?.toString(), 'KEY');
    assert.equal(conn.token, undefined);
    assert.equal(conn.insecureSkipTLSVerify, false);
  });

  it('resolves file paths against the kubeconfig directory; token and tokenFile', () => {
    const conn = fromKubeconfigFile(kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h", certificate-authority: ca.crt, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {tokenFile: token}}]
`, { 'ca.crt': 'FILE-CA', token: 'secret\n' }));
    assert.equal(conn.ca?.toString(), 'FILE-CA');
    assert.equal(conn.token?.(), 'secret');
    assert.equal(conn.insecureSkipTLSVerify, true);
    const inline = fromKubeconfigFile(kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {token: abc}}]
`));
    assert.equal(inline.token?.(), 'abc');
  });

  it('names what is missing', () => {
    assert.throws(() => fromKubeconfigFile(kubeconfig('current-context: nope\ncontexts: []\n')), /no context named "nope"/);
    assert.throws(() => fromKubeconfigFile(kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c}}]
clusters: [{name: c, cluster: {}}]
`)), /cluster c has no server/);
  });
});

describe('resourcePath', () => {
  const cases: [string, string][] = [
    [podPath(), '/api/v1/pods'],
    [podPath('ns', 'p', 'status'), '/api/v1/namespaces/ns/pods/p/status'],
    [resourcePath('v1', 'nodes', undefined, 'n1'), '/api/v1/nodes/n1'],
    [resourcePath('coordination.k8s.io/v1', 'leases', 'kube-system', 'l'), '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l'],
  ];
  for (const [got, want] of cases) it(want, () => assert.equal(got, want));
});
