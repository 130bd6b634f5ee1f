import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { proxyFor } from './proxy.ts';

const P = 'http://proxy.corp:3128';

describe('proxyFor', () => {
  const cases: [server: string, env: NodeJS.ProcessEnv, want: string | undefined][] = [
    ['https://10.0.0.1:6443', {}, undefined],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P }, P],
    ['https://10.0.0.1:6443', { https_proxy: 'proxy.corp:3128' }, P],
    ['https://10.0.0.1:6443', { HTTP_PROXY: P }, undefined],
    ['http://10.0.0.1:8080', { HTTPS_PROXY: P }, undefined],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P, NO_PROXY: '*' }, undefined],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P, NO_PROXY: 'a.example, 10.0.0.0/8' }, undefined],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P, no_proxy: '10.0.0.1' }, undefined],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P, NO_PROXY: '10.0.0.1:6443' }, undefined],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P, NO_PROXY: '10.0.0.1:443' }, P],
    ['https://10.0.0.1:6443', { HTTPS_PROXY: P, NO_PROXY: '10.0.0.0/33,10.0.0.2' }, P],
    ['https://10.0.0.1', { HTTPS_PROXY: P, NO_PROXY: '10.0.0.1:443' }, undefined],
    ['https://[fd00::1]:6443', { HTTPS_PROXY: P, NO_PROXY: 'fd00::/8' }, undefined],
    ['https://[fd00::1]:6443', { HTTPS_PROXY: P, NO_PROXY: 'fd00::1' }, undefined],
    ['https://[fd00::1]:6443', { HTTPS_PROXY: P, NO_PROXY: '[fd00::1]:6443' }, undefined],
    ['https://[fd00::1]:6443', { HTTPS_PROXY: P, NO_PROXY: 'fd00::2' }, P],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: 'example.com' }, undefined],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: 'API.example.com' }, undefined],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: '.example.com' }, undefined],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: '*.example.com' }, undefined],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: '.api.example.com' }, P],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: 'ample.com' }, P],
    ['https://api.example.com', { HTTPS_PROXY: P, NO_PROXY: '10.0.0.0/8' }, P],
    ['https://api.example.com:6443', { HTTPS_PROXY: P, NO_PROXY: 'example.com:443' }, P],
    ['https://127.0.0.1:6443', { HTTPS_PROXY: P }, undefined],
    ['https://127.1.2.3:6443', { HTTPS_PROXY: P }, undefined],
    ['https://localhost:6443', { HTTPS_PROXY: P }, undefined],
    ['https://[::1]:6443', { HTTPS_PROXY: P }, undefined],
  ];
  for (const [server, env, want] of cases) {
    it(`${server} ${JSON.stringify(env)} → ${want ?? 'direct'}`, () => assert.equal(proxyFor(new URL(server), undefined, env), want));
  }

  it("the cluster's proxy-url wins over the environment, loopback addresses included", () => {
    assert.equal(proxyFor(new URL('https://127.0.0.1:6443'), 'https://p:1', { HTTPS_PROXY: P, NO_PROXY: '*' }), 'https://p:1');
  });

  it('refuses what cannot be tunnelled through, without showing credentials', () => {
    assert.throws(() => proxyFor(new URL('https://h'), 'socks5://u:secret@p:1080', {}), (err: Error) =>
      /^proxy-url socks5:\/\/p:1080: socks5 proxies are not supported \(http and https only\)$/.test(err.message));
    assert.throws(() => proxyFor(new URL('https://h'), undefined, { HTTPS_PROXY: 'socks5h://p:1080' }), /HTTPS_PROXY socks5h:\/\/p:1080: socks5h proxies/);
    assert.throws(() => proxyFor(new URL('http://127.0.0.1:8001'), P, {}), /proxy-url: only used with an https server, not http:\/\/127.0.0.1:8001/);
  });
});
