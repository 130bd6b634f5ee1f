// preStop hooks against real loopback servers (HTTP and TCP); exec hooks run through the real
// runtimes in test/ and e2e/.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { resolvePort, runPreStop } from './prestop.ts';
import type { HookTarget } from './prestop.ts';
import type { ContainerRuntime } from './runtime/types.ts';

const noRuntime = {} as ContainerRuntime;
const target = (over: Partial<HookTarget> = {}): HookTarget => ({ runtime: noRuntime, containerID: 'c', podIP: '127.0.0.1', ...over });

describe('runPreStop', () => {
  let server: http.Server;
  let port: number;
  const seen: { path?: string; header?: string }[] = [];
  let tcp: net.Server;
  let tcpPort: number;

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push({ path: req.url, header: req.headers['x-drain'] as string | undefined });
      if (req.url === '/slow') return; // never answers
      res.writeHead(req.url === '/fail' ? 500 : 200).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    tcp = net.createServer((c) => c.end());
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    tcpPort = (tcp.address() as AddressInfo).port;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    tcp.close();
  });

  it('httpGet against the Pod IP, with path and headers', async () => {
    const failure = await runPreStop({ httpGet: { port, path: 'drain', httpHeaders: [{ name: 'X-Drain', value: 'now' }] } }, target(), 2_000);
    assert.equal(failure, undefined);
    assert.deepEqual(seen.at(-1), { path: '/drain', header: 'now' });
  });
  it('httpGet with a named port resolved through the container ports', async () => {
    const failure = await runPreStop({ httpGet: { port: 'admin', path: '/ok' } }, target({ ports: [{ name: 'admin', containerPort: port }] }), 2_000);
    assert.equal(failure, undefined);
  });
  it('httpGet answering 500 is a failure with the status', async () => {
    assert.match((await runPreStop({ httpGet: { port, path: '/fail' } }, target(), 2_000))!, /returned 500/);
  });
  it('httpGet that does not answer is cut off at the timeout', async () => {
    const started = Date.now();
    assert.match((await runPreStop({ httpGet: { port, path: '/slow' } }, target(), 300))!, /timed out after 300ms/);
    assert.ok(Date.now() - started < 2_000);
  });
  it('a grace period of 0 still bounds the hook (0 is "no timeout" to Node sockets)', async () => {
    const started = Date.now();
    assert.match((await runPreStop({ httpGet: { port, path: '/slow' } }, target(), 0))!, /timed out after 1000ms/);
    assert.ok(Date.now() - started < 3_000);
  });
  it('httpGet to the hook host instead of the Pod IP', async () => {
    assert.equal(await runPreStop({ httpGet: { port, host: '127.0.0.1', path: '/h' } }, target({ podIP: undefined }), 2_000), undefined);
  });
  it('no Pod IP and no host: a clear failure', async () => {
    assert.match((await runPreStop({ httpGet: { port } }, target({ podIP: undefined }), 500))!, /no IP yet/);
  });
  it('tcpSocket connects', async () => {
    assert.equal(await runPreStop({ tcpSocket: { port: tcpPort } }, target(), 2_000), undefined);
  });
  it('tcpSocket to a closed port fails with the address', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    assert.match((await runPreStop({ tcpSocket: { port: freePort } }, target(), 1_000))!, new RegExp(`TCP connect 127.0.0.1:${freePort}`));
  });
  it('exec reports a non-zero exit with its output', async () => {
    const runtime = { exec: async () => ({ exitCode: 3, stdout: '', stderr: 'drain refused\n' }) } as unknown as ContainerRuntime;
    assert.equal(await runPreStop({ exec: { command: ['/drain'] } }, target({ runtime }), 1_000), 'exec ["/drain"] exited with code 3: drain refused');
  });
  it('an unknown named port is a clear failure', async () => {
    assert.match((await runPreStop({ tcpSocket: { port: 'nope' } }, target(), 500))!, /named port "nope" not found/);
  });
});

describe('resolvePort', () => {
  for (const [port, expected] of [[8080, 8080], ['9090', 9090]] as const) {
    it(`${JSON.stringify(port)} → ${expected}`, () => assert.equal(resolvePort(port, undefined), expected));
  }
});
