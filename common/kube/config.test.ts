import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeClient } from './client.ts';
import { fromKubeconfig, loadKubeConfig } from './config.ts';
import { podPath, resourcePath } from './paths.ts';

const dirs: string[] = [];
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'st-kubeconfig-'));
  dirs.push(dir);
  return dir;
}

/** Writes `files` and then the kubeconfig `text` into a new directory; the kubeconfig's path. */
function kubeconfig(text: string, files: Record<string, string> = {}, dir = tempDir()): string {
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content, { mode: 0o755 });
  writeFileSync(join(dir, 'config'), text);
  return join(dir, 'config');
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An exec credential plugin, in Node: prints an ExecCredential whose token is its first argument and
 * how many times it has run (counted in $COUNT_FILE), valid for $TTL_MS.
 */
const PLUGIN = `#!${process.execPath}
const fs = process.getBuiltinModule('node:fs'); // in a CommonJS or an ES module alike
const runs = (fs.existsSync(process.env.COUNT_FILE) ? Number(fs.readFileSync(process.env.COUNT_FILE, 'utf8')) : 0) + 1;
fs.writeFileSync(process.env.COUNT_FILE, String(runs));
process.stdout.write(JSON.stringify({
  apiVersion: 'client.authentication.k8s.io/v1',
  kind: 'ExecCredential',
  status: { token: process.argv[2] + '-' + runs, expirationTimestamp: new Date(Date.now() + Number(process.env.TTL_MS)).toISOString() },
}));
`;

/** A kubeconfig whose user gets its token from PLUGIN (at bin/plugin, named relative to the file); its run counter. */
function execKubeconfig(server: string, ttlMs: number, cluster = ''): { path: string; runs: () => number } {
  const dir = tempDir();
  mkdirSync(join(dir, 'bin'));
  const countFile = join(dir, 'runs');
  const path = kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "${server}"${cluster}}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
      args: [tok]
      env: [{name: COUNT_FILE, value: "${countFile}"}, {name: TTL_MS, value: "${ttlMs}"}]
      interactiveMode: Never
`, { 'bin/plugin': PLUGIN }, dir);
  return { path, runs: () => Number(readFileSync(countFile, 'utf8')) };
}

describe('fromKubeconfig', () => {
  it('reads the current context: inline certificates', () => {
    const conn = fromKubeconfig([kubeconfig(`
current-context: b
contexts:
- {name: a, context: {cluster: other, user: other}}
- {name: b, context: {cluster: c1, user: u1}}
clusters:
- {name: c1, cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: ${b64('CA')}}}
users:
- {name: u1, user: {client-certificate-data: ${b64('CERT')}, client-key-data: ${b64('KEY')}}}
`)], {});
    assert.equal(conn.server, 'https://10.0.0.1:6443');
    assert.equal(conn.ca?.toString(), 'CA');
    assert.equal(conn.cert?.toString(), 'CERT');
    assert.equal(conn.key?.toString(), 'KEY');
    assert.equal(conn.token, undefined);
    assert.equal(conn.insecureSkipTLSVerify, false);
    assert.equal(conn.proxy, undefined);
  });

  it('resolves file paths against the kubeconfig directory; token and tokenFile', () => {
    const conn = fromKubeconfig([kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h", certificate-authority: ca.crt, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {tokenFile: token}}]
`, { 'ca.crt': 'FILE-CA', token: 'secret\n' })]);
    assert.equal(conn.ca?.toString(), 'FILE-CA');
    assert.equal(conn.token?.(), 'secret');
    assert.equal(conn.insecureSkipTLSVerify, true);
    const inline = fromKubeconfig([kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {token: abc}}]
`)]);
    assert.equal(inline.token?.(), 'abc');
  });

  it('names what is missing', () => {
    assert.throws(() => fromKubeconfig([kubeconfig('current-context: nope\ncontexts: []\n')]), /no context named "nope"/);
    assert.throws(() => fromKubeconfig([kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c}}]
clusters: [{name: c, cluster: {}}]
`)]), /cluster c has no server/);
  });

  it('merges a KUBECONFIG list as kubectl does: the first current-context and the first entry of each name', () => {
    const first = kubeconfig(`
clusters: [{name: c, cluster: {server: "https://first:6443", certificate-authority: ca.crt}}]
users: [{name: u, user: {tokenFile: token}}]
`, { 'ca.crt': 'FIRST-CA', token: 'first-token' });
    const second = kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://second:6443"}}]
users: [{name: u, user: {token: second-token}}]
`);
    const third = kubeconfig('current-context: y\ncontexts: [{name: y, context: {cluster: none}}]\n');
    const missing = join(tempDir(), 'absent');
    const conn = loadKubeConfig([first, missing, second, third].join(':'), {});
    assert.equal(conn.server, 'https://first:6443');
    assert.equal(conn.ca?.toString(), 'FIRST-CA'); // relative to the first file, which defines the cluster
    assert.equal(conn.token?.(), 'first-token');
    // A missing file is skipped in a list only.
    assert.throws(() => loadKubeConfig(missing), /ENOENT/);
    assert.throws(() => loadKubeConfig(`${missing}:${missing}`), /no such file/);
  });

  it("takes the cluster's proxy-url, else HTTPS_PROXY and NO_PROXY", () => {
    const text = (proxy: string) => `
current-context: x
contexts: [{name: x, context: {cluster: c}}]
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"${proxy}}}]
`;
    assert.equal(fromKubeconfig([kubeconfig(text(', proxy-url: "http://p:3128"'))], {}).proxy, 'http://p:3128');
    assert.equal(fromKubeconfig([kubeconfig(text(''))], { HTTPS_PROXY: 'http://q:3128' }).proxy, 'http://q:3128');
    assert.equal(fromKubeconfig([kubeconfig(text(''))], { HTTPS_PROXY: 'http://q:3128', NO_PROXY: '10.0.0.0/8' }).proxy, undefined);
    assert.throws(() => fromKubeconfig([kubeconfig(text(', proxy-url: "socks5://p:1080"'))], {}), /proxy-url socks5:\/\/p:1080: socks5 proxies are not supported/);
  });

  it('refuses, by name, settings it does not carry out', () => {
    const text = (cluster: string, user: string) => `
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"${cluster}}}]
users: [{name: u, user: {${user}}}]
`;
    assert.throws(() => fromKubeconfig([kubeconfig(text(', tls-server-name: api', 'token: t, as: admin'))]),
      /not supported: cluster c: tls-server-name, user u: as$/);
    assert.throws(() => fromKubeconfig([kubeconfig(text('', 'token: t, exec: {command: x}'))]), /user u has more than one credential \(token, exec\)/);
  });
});

describe('credential plugins', () => {
  it('exec: runs the plugin (relative command, args, env) once for requests at once, again after the expiry', async () => {
    // Good for 5 s: long enough that the first four calls come within it on a loaded machine.
    const { path, runs } = execKubeconfig('https://h', 5000);
    const conn = loadKubeConfig(path, {});
    assert.deepEqual(await Promise.all([conn.token!(), conn.token!(), conn.token!()]), ['tok-1', 'tok-1', 'tok-1']);
    assert.equal(await conn.token!(), 'tok-1');
    assert.equal(runs(), 1);
    await sleep(5100);
    assert.equal(await conn.token!(), 'tok-2');
    assert.equal(runs(), 2);
  });

  it('a failing plugin, an auth-provider that gives nothing: errors name the user and the plugin', async () => {
    const failing = fromKubeconfig([kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin}}}]
`, { plugin: '#!/bin/sh\necho "no credentials here" >&2\nexit 1\n' })], {});
    await assert.rejects(async () => failing.token!(), /^Error: kubeconfig user u: exec plugin: no credentials here$/);
    const unknown = fromKubeconfig([kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {auth-provider: {name: nonesuch, config: {}}}}]
`)], {});
    await assert.rejects(async () => unknown.token!(), /kubeconfig user u: auth-provider "nonesuch" gave no token/);
  });

  it('kubeconfigs without a plugin never load @kubernetes/client-node; one with a plugin does', async () => {
    // A fresh process records every module it resolves while it loads a kubeconfig and builds a client.
    const probe = `
      import { registerHooks } from 'node:module';
      let loaded = false;
      registerHooks({ resolve(specifier, context, next) {
        const result = next(specifier, context);
        loaded ||= result.url.includes('/node_modules/@kubernetes/client-node/');
        return result;
      } });
      const { loadKubeConfig } = await import(${JSON.stringify(new URL('./config.ts', import.meta.url).href)});
      const { KubeClient } = await import(${JSON.stringify(new URL('./client.ts', import.meta.url).href)});
      const conn = loadKubeConfig(process.argv[1], {});
      new KubeClient(conn).close();
      await conn.token?.();
      console.log(JSON.stringify({ loaded }));`;
    const run = async (path: string) =>
      JSON.parse((await promisify(execFile)(process.execPath, ['--input-type=module', '-e', probe, path])).stdout) as { loaded: boolean };
    const simple = kubeconfig(`
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h", proxy-url: "http://p:3128"}}]
users: [{name: u, user: {token: t}}]
`);
    const other = kubeconfig('users: [{name: v, user: {token: v}}]\n');
    assert.deepEqual(await run(simple), { loaded: false });
    assert.deepEqual(await run(`${simple}:${other}`), { loaded: false });
    assert.deepEqual(await run(execKubeconfig('https://h', 60_000).path), { loaded: true });
  });

  it('a plugin kubeconfig where @kubernetes/client-node is not installed (the image): an error that says so', async () => {
    // A fresh process in which the package does not resolve, as in the image's /app.
    const probe = `
      import { registerHooks } from 'node:module';
      registerHooks({ resolve(specifier, context, next) {
        if (specifier === '@kubernetes/client-node') throw Object.assign(new Error('not installed'), { code: 'ERR_MODULE_NOT_FOUND' });
        return next(specifier, context);
      } });
      const { loadKubeConfig } = await import(${JSON.stringify(new URL('./config.ts', import.meta.url).href)});
      const conn = loadKubeConfig(process.argv[1], {});
      console.log(await conn.token().then(() => 'no error', (err) => err.message));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', probe, execKubeconfig('https://h', 60_000).path]);
    assert.equal(stdout.trim(), 'kubeconfig user u: exec plugin: a credential plugin needs the package @kubernetes/client-node, which this ' +
      'installation leaves out (the image does: in a cluster, the ServiceAccount token is used); run from a checkout after `npm ci`, ' +
      'or give the user a token or a client certificate');
  });
});

describe('KubeClient with a plugin token, over TLS', () => {
  let dir = '';
  let server: Server;
  let url = '';
  const seen: string[] = [];
  before(async () => {
    dir = tempDir();
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'ca.crt')], { stdio: 'ignore' });
    server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'ca.crt')) }, (req, res) => {
      seen.push(req.headers.authorization ?? '');
      res.writeHead(req.headers.authorization?.startsWith('Bearer tok-') ? 200 : 401, { 'Content-Type': 'application/json' });
      res.end('{"gitVersion":"v1.33.0"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('sends the exec plugin token, verified against the kubeconfig CA, and the renewed one after the expiry', async () => {
    seen.length = 0;
    // A token good for 5 s: the second request comes well within it even on a loaded machine (with
    // 1 s, a busy CI machine saw it expire first), and the third after it.
    const { path, runs } = execKubeconfig(url, 5000, `, certificate-authority: "${join(dir, 'ca.crt')}"`);
    const client = new KubeClient(loadKubeConfig(path, {}));
    try {
      assert.deepEqual(await client.get('/version'), { gitVersion: 'v1.33.0' });
      await client.get('/version');
      await sleep(5100);
      await client.get('/version');
    } finally {
      client.close();
    }
    assert.deepEqual(seen, ['Bearer tok-1', 'Bearer tok-1', 'Bearer tok-2']);
    assert.equal(runs(), 2);
  });

  it("goes through the cluster's proxy-url (CONNECT), with the proxy URL's credentials", async () => {
    seen.length = 0;
    const tunnels: { target: string; auth: string | undefined }[] = [];
    const proxy = createHttpServer();
    proxy.on('connect', (req, socket, head) => {
      tunnels.push({ target: req.url!, auth: req.headers['proxy-authorization'] });
      const [host, port] = req.url!.split(':');
      const upstream = connect(Number(port), host, () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(socket).pipe(upstream);
      });
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxyUrl = `http://me:pw@127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const { path } = execKubeconfig(url, 60_000, `, certificate-authority: "${join(dir, 'ca.crt')}", proxy-url: "${proxyUrl}"`);
    const client = new KubeClient(loadKubeConfig(path, {}));
    try {
      await client.get('/version');
    } finally {
      client.close();
      proxy.closeAllConnections();
      await new Promise((resolve) => proxy.close(resolve));
    }
    assert.deepEqual(tunnels, [{ target: new URL(url).host, auth: `Basic ${b64('me:pw')}` }]);
    assert.deepEqual(seen, ['Bearer tok-1']);
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
