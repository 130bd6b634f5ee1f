// preStop hooks against real loopback HTTP servers (one that drips header lines forever among them),
// sleeps and hanging execs: each bounded by the grace period as a total deadline. Exec hooks run
// through the real runtimes in test/ and e2e/; which hooks run at all is agent/request-plan.ts's
// hookRefusal (agent/request-plan.test.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolvePort, runPreStop } from './prestop.ts';
import { runtimeContainerID } from '../api/container-id.ts';
import type { HookTarget } from './prestop.ts';
import { fakeRuntime } from '../test/support/fake-runtime.ts';

const noRuntime = fakeRuntime({ exec: async () => assert.fail('no exec hook here') });
const target = (over: Partial<HookTarget> = {}): HookTarget => ({ runtime: noRuntime, containerID: runtimeContainerID('c'), podIP: '127.0.0.1', ...over });

describe('runPreStop (R38)', () => {
  let server: http.Server;
  let port: number;
  const seen: { path?: string; header?: string }[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push({ path: req.url, header: req.headers['x-drain'] as string | undefined });
      if (req.url === '/slow') return; // never answers
      if (req.url === '/drip') {
        // Headers that never end: a line every 50 ms keeps any idle timeout from firing.
        res.socket!.write('HTTP/1.1 200 OK\r\n');
        const drip = setInterval(() => res.socket!.write(`X-Drip: ${Date.now()}\r\n`), 50);
        res.socket!.on('close', () => clearInterval(drip));
        return;
      }
      res.writeHead(req.url === '/fail' ? 500 : 200).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
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
    assert.match((await runPreStop({ httpGet: { port, path: '/slow' } }, target(), 300))!, /did not finish within 300ms/);
    assert.ok(Date.now() - started < 2_000);
  });
  it('a grace period of 0 still bounds the hook (0 is "no timeout" to Node sockets)', async () => {
    const started = Date.now();
    assert.match((await runPreStop({ httpGet: { port, path: '/slow' } }, target(), 0))!, /did not finish within 1000ms/);
    assert.ok(Date.now() - started < 3_000);
  });
  it('httpGet to the hook host instead of the Pod IP', async () => {
    assert.equal(await runPreStop({ httpGet: { port, host: '127.0.0.1', path: '/h' } }, target({ podIP: undefined }), 2_000), undefined);
  });
  it('no Pod IP and no host: a clear failure', async () => {
    assert.match((await runPreStop({ httpGet: { port } }, target({ podIP: undefined }), 500))!, /no IP yet/);
  });
  it('httpGet whose server drips header lines and never ends them: cut off at the deadline, the socket closed', async () => {
    const started = Date.now();
    assert.match((await runPreStop({ httpGet: { port, path: '/drip' } }, target(), 600))!, /HTTP GET port .* did not finish within 600ms/);
    const took = Date.now() - started;
    assert.ok(took >= 550 && took < 1_500, `took ${took} ms`);
    await new Promise((r) => setTimeout(r, 100));
    const open = await new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)));
    assert.equal(open, 0, 'the hook\'s connection is closed');
  });
  it('sleep waits its seconds, then succeeds', async () => {
    const started = Date.now();
    assert.equal(await runPreStop({ sleep: { seconds: 0.3 } }, target(), 2_000), undefined);
    assert.ok(Date.now() - started >= 290);
  });
  it('sleep 0 returns at once (kubelet\'s zero sleep)', async () => {
    const started = Date.now();
    assert.equal(await runPreStop({ sleep: { seconds: 0 } }, target(), 2_000), undefined);
    assert.ok(Date.now() - started < 200);
  });
  it('sleep longer than the grace period is cut off at the grace period', async () => {
    const started = Date.now();
    assert.match((await runPreStop({ sleep: { seconds: 60 } }, target(), 300))!, /sleep 60s did not finish within 300ms/);
    assert.ok(Date.now() - started < 1_000);
  });
  it('an exec the runtime never answers is cut off at the deadline', async () => {
    const runtime = fakeRuntime({ exec: () => new Promise(() => {}) });
    const started = Date.now();
    assert.match((await runPreStop({ exec: { command: ['/hang'] } }, target({ runtime }), 300))!, /exec \["\/hang"\] did not finish within 300ms/);
    assert.ok(Date.now() - started < 1_000);
  });
  it('exec whose output was too long to read: reported as ran to its end, exit code unknown', async () => {
    const runtime = fakeRuntime({ exec: async () => ({ exitCode: undefined, stdout: '', stderr: '' }) });
    assert.equal(await runPreStop({ exec: { command: ['/flood'] } }, target({ runtime }), 1_000),
      'exec ["/flood"] ran to its end, but wrote more than 65536 bytes of output, which the agent does not read: its exit code is unknown');
  });

  it('exec reports a non-zero exit with its output', async () => {
    const runtime = fakeRuntime({ exec: async () => ({ exitCode: 3, stdout: '', stderr: 'drain refused\n' }) });
    assert.equal(await runPreStop({ exec: { command: ['/drain'] } }, target({ runtime }), 1_000), 'exec ["/drain"] exited with code 3: drain refused');
  });
  it('an unknown named port is a clear failure', async () => {
    assert.match((await runPreStop({ httpGet: { port: 'nope' } }, target(), 500))!, /named port "nope" not found/);
  });
});

describe('resolvePort', () => {
  for (const [port, expected] of [[8080, 8080], ['9090', 9090]] as const) {
    it(`${JSON.stringify(port)} → ${expected}`, () => assert.equal(resolvePort(port, undefined), expected));
  }
});
