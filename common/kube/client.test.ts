import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_USER_AGENT, KubeAnswerTooLargeError, KubeApiError, KubeClient, MAX_RETRIES, MAX_RETRY_AFTER_MS, apiResource, apiVerb, getObject, retryAfterMs, userAgentFor } from './client.ts';
import { ServerClock } from './server-clock.ts';
import { isValidName, podPath } from './paths.ts';
import type { UnreadableEvent, WatchEvent } from './api.ts';

interface Seen { method: string; url: string; headers: IncomingHttpHeaders; body: string; atMs: number }
type Reply = (res: ServerResponse) => void;

const json = (code: number, body: unknown, headers: Record<string, string> = {}): Reply => (res) => {
  res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const status = (code: number, reason: string, headers: Record<string, string> = {}) =>
  json(code, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, message: `${reason} (${code})`, code }, headers);
const tooMany = (retryAfter?: string) => status(429, 'TooManyRequests', retryAfter === undefined ? {} : { 'Retry-After': retryAfter });

/** An API server on 127.0.0.1 that records each request and answers with the next scripted reply (200 {} once they run out). */
class FakeApi {
  readonly seen: Seen[] = [];
  replies: Reply[] = [];
  private readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString(), atMs: Date.now() });
      (this.replies.shift() ?? json(200, {}))(res);
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('KubeClient', () => {
  const api = new FakeApi();
  let server = '';
  let client: KubeClient;
  before(async () => { server = await api.start(); });
  after(() => api.stop());
  beforeEach(() => {
    client?.close();
    api.seen.length = 0;
    api.replies = [];
    client = new KubeClient({ server, token: () => 'tok' });
  });

  describe('User-Agent', () => {
    it('is sent on every request, with the token; sidecar-terminator by default', async () => {
      await client.get('/api/v1/pods', { limit: 1 });
      await client.create('/api/v1/namespaces/ns/events', { a: 1 });
      await client.patch('/api/v1/namespaces/ns/pods/p', { b: 2 }, 'merge');
      await client.replace('/apis/coordination.k8s.io/v1/namespaces/ns/leases/l', {});
      await client.delete('/api/v1/namespaces/ns/pods/p');
      assert.deepEqual(api.seen.map((s) => s.method), ['GET', 'POST', 'PATCH', 'PUT', 'DELETE']);
      for (const s of api.seen) {
        assert.equal(s.headers['user-agent'], DEFAULT_USER_AGENT);
        assert.equal(s.headers.authorization, 'Bearer tok');
      }
      assert.equal(api.seen[2]!.headers['content-type'], 'application/merge-patch+json');
    });

    it('is the one the process gives, on watches too', async () => {
      const agent = new KubeClient({ server }, { userAgent: userAgentFor('agent', '0.1.0') });
      api.replies = [(res) => res.end(`${JSON.stringify({ type: 'ADDED', object: { n: 1 } })}\n`)];
      const events: (WatchEvent<{ n: number }> | UnreadableEvent)[] = [];
      await agent.watch<{ n: number }>('/api/v1/pods', { resourceVersion: '5' }, (e) => events.push(e), new AbortController().signal);
      agent.close();
      assert.equal(api.seen[0]!.headers['user-agent'], 'sidecar-terminator-agent/0.1.0');
      assert.equal(api.seen[0]!.headers.authorization, undefined);
      assert.match(api.seen[0]!.url, /[?&]watch=true/);
      assert.deepEqual(events, [{ type: 'ADDED', object: { n: 1 } }]);
      assert.equal(userAgentFor('controller', '1.2.3'), 'sidecar-terminator-controller/1.2.3');
    });

    it('refuses what would not be a valid header; plain http only on loopback', () => {
      assert.throws(() => new KubeClient({ server }, { userAgent: 'x\r\nInjected: 1' }), /printable ASCII/);
      assert.throws(() => new KubeClient({ server: 'http://10.0.0.1:6443' }), /loopback/);
      assert.throws(() => new KubeClient({ server: 'ftp://127.0.0.1' }), /https/);
      new KubeClient({ server: 'https://10.0.0.1:6443' }).close();
      new KubeClient({ server: 'http://[::1]:8001' }).close();
    });
  });

  describe('Retry-After', () => {
    it('a GET turned away with 429 is sent again after the time asked for', async () => {
      api.replies = [tooMany('1'), json(200, { items: [1] })];
      const started = Date.now();
      assert.deepEqual(await client.get('/api/v1/pods', { limit: 500 }), { items: [1] });
      assert.equal(api.seen.length, 2);
      assert.equal(api.seen[1]!.url, api.seen[0]!.url);
      assert.equal(api.seen[1]!.headers['user-agent'], DEFAULT_USER_AGENT);
      const waited = api.seen[1]!.atMs - api.seen[0]!.atMs;
      assert.ok(waited >= 950, `waited ${waited} ms, asked 1 s`);
      assert.ok(Date.now() - started < 5_000);
    });

    it('a write turned away with 429 was not executed: sent again, with the same body', async () => {
      api.replies = [tooMany('0'), tooMany('0'), json(201, { created: true })];
      const body = { metadata: { name: 'r' }, spec: { podName: 'p' } };
      assert.deepEqual(await client.create('/apis/x/v1/namespaces/ns/things', body), { created: true });
      assert.deepEqual(api.seen.map((s) => s.method), ['POST', 'POST', 'POST']);
      for (const s of api.seen) assert.deepEqual(JSON.parse(s.body), body);
      api.seen.length = 0;
      api.replies = [tooMany('0'), json(200, { patched: true })];
      assert.deepEqual(await client.patch('/api/v1/namespaces/ns/pods/p/status', { metadata: { resourceVersion: '7' } }, 'strategic'), { patched: true });
      assert.equal(api.seen.length, 2);
      assert.equal(api.seen[1]!.headers['content-type'], 'application/strategic-merge-patch+json');
    });

    it('a 503 with Retry-After is retried for reads only; other errors never', async () => {
      api.replies = [status(503, 'ServiceUnavailable', { 'Retry-After': '0' }), json(200, { ok: 1 })];
      assert.deepEqual(await client.get('/api/v1/nodes/n'), { ok: 1 });
      assert.equal(api.seen.length, 2);

      const cases: [string, Reply, () => Promise<unknown>, number][] = [
        ['503 on a write (it may have been executed)', status(503, 'ServiceUnavailable', { 'Retry-After': '0' }), () => client.create('/api/v1/namespaces/ns/events', {}), 503],
        ['503 without Retry-After', status(503, 'ServiceUnavailable'), () => client.get('/api/v1/pods'), 503],
        ['500', status(500, 'InternalError', { 'Retry-After': '0' }), () => client.get('/api/v1/pods'), 500],
        ['409 conflict', status(409, 'Conflict'), () => client.patch('/api/v1/namespaces/ns/pods/p', {}, 'merge'), 409],
        ['410 gone', status(410, 'Expired'), () => client.get('/api/v1/pods', { continue: 'x' }), 410],
      ];
      for (const [what, reply, call, code] of cases) {
        api.seen.length = 0;
        api.replies = [reply, json(200, {})];
        await assert.rejects(call(), (err: unknown) => err instanceof KubeApiError && err.code === code, what);
        assert.equal(api.seen.length, 1, `${what}: sent once`);
      }
    });

    it('gives up after MAX_RETRIES more tries, with the API server\'s error', async () => {
      api.replies = Array.from({ length: 10 }, () => tooMany('0'));
      await assert.rejects(client.get('/api/v1/pods'), (err: unknown) => err instanceof KubeApiError && err.code === 429 && err.reason === 'TooManyRequests');
      assert.equal(api.seen.length, 1 + MAX_RETRIES);
    });

    it('a watch turned away with 429 is started again', async () => {
      api.replies = [tooMany('0'), (res) => res.end(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } })}\n`)];
      const events: string[] = [];
      await client.watch('/api/v1/pods', { resourceVersion: '5' }, (e) => events.push(e.type), new AbortController().signal);
      assert.equal(api.seen.length, 2);
      assert.deepEqual(events, ['BOOKMARK']);
    });

    it('a watch stopped while it waits to retry ends at once', async () => {
      api.replies = [tooMany('30')];
      const abort = new AbortController();
      const started = Date.now();
      setTimeout(() => abort.abort(), 50);
      await client.watch('/api/v1/pods', {}, () => assert.fail('no events'), abort.signal);
      assert.ok(Date.now() - started < 5_000);
      assert.equal(api.seen.length, 1);
    });

    it('reads seconds or an HTTP date, within 0..MAX_RETRY_AFTER_MS', () => {
      const now = Date.parse('2025-01-01T00:00:00Z');
      assert.equal(retryAfterMs('0', now), 0);
      assert.equal(retryAfterMs(' 5 ', now), 5_000);
      assert.equal(retryAfterMs('3600', now), MAX_RETRY_AFTER_MS);
      assert.equal(retryAfterMs('Wed, 01 Jan 2025 00:00:10 GMT', now), 10_000);
      assert.equal(retryAfterMs('Tue, 31 Dec 2024 23:00:00 GMT', now), 0);
      assert.equal(retryAfterMs('Thu, 01 Jan 2026 00:00:00 GMT', now), MAX_RETRY_AFTER_MS);
      assert.equal(retryAfterMs('-1', now), undefined);
      assert.equal(retryAfterMs('soon', now), undefined);
      assert.equal(retryAfterMs('', now), undefined);
      assert.equal(retryAfterMs(undefined, now), undefined);
    });
  });

  describe('answer cap (R48): bounded before it is parsed', () => {
    const CAP = 64 * 1024;
    /** An answer of `bytes` whose length is known only as it arrives (chunked), or said up front. */
    const big = (bytes: number, chunked: boolean): Reply => (res) => {
      const body = JSON.stringify({ kind: 'PodList', items: [{ metadata: { labels: { a: 'x'.repeat(bytes) } } }] });
      res.writeHead(200, chunked ? { 'Content-Type': 'application/json' } : { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
      if (!chunked) return void res.end(body);
      for (let at = 0; at < body.length; at += 8192) res.write(body.slice(at, at + 8192));
      res.end();
    };

    for (const chunked of [false, true]) {
      it(`an answer over the cap fails that call, with a clear error (${chunked ? 'chunked' : 'Content-Length'}); the next call goes on`, async () => {
        client = new KubeClient({ server }, { maxAnswerBytes: CAP });
        api.replies = [big(CAP * 4, chunked), json(200, { kind: 'PodList', items: [] })];
        await assert.rejects(client.get('/api/v1/pods'), (err: unknown) =>
          err instanceof KubeAnswerTooLargeError && /GET \/api\/v1\/pods: the answer is over 65536 bytes/.test(err.message));
        assert.deepEqual(await client.get('/api/v1/pods'), { kind: 'PodList', items: [] });
      });
    }

    it('an answer at the cap is read whole', async () => {
      client = new KubeClient({ server }, { maxAnswerBytes: CAP });
      api.replies = [big(CAP - 200, true)];
      const list = await client.get<{ items: unknown[] }>('/api/v1/pods');
      assert.equal(list.items.length, 1);
    });

    it('an error answer over the cap is not read either', async () => {
      client = new KubeClient({ server }, { maxAnswerBytes: CAP });
      api.replies = [(res) => { res.writeHead(500); res.end('x'.repeat(CAP * 2)); }];
      await assert.rejects(client.get('/api/v1/pods'), KubeAnswerTooLargeError);
    });

    /** A Pod as the API server serves one whose env is full of `<`: escaped, six bytes each, with its identity after. */
    const escapedPod = (name: string, chars: number) =>
      `{"kind":"Pod","apiVersion":"v1","metadata":{"annotations":{"a":"${'\\u003c'.repeat(chars)}","q":"a \\"quoted\\" \\\\"},"name":"${name}","namespace":"ns","uid":"u-${name}","resourceVersion":"7"},"spec":{}}`;

    it('a watch event over the cap is told as UNREADABLE, with who it is about, and the stream goes on past it', async () => {
      client = new KubeClient({ server }, { maxAnswerBytes: CAP });
      api.replies = [(res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'small' } } })}\n`);
        // Written in pieces that cut escapes and the identity's strings in two.
        const line = `{"type":"MODIFIED","object":${escapedPod('big', CAP)}}\n`;
        for (let at = 0; at < line.length; at += 4099) res.write(line.slice(at, at + 4099));
        res.write('not json\n');
        res.end(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'after' } } })}\n`);
      }];
      const seen: string[] = [];
      await client.watch<{ metadata: { name: string } }>('/api/v1/pods', {}, (e) => {
        seen.push(e.type === 'UNREADABLE' ? `UNREADABLE ${e.of ?? '?'} ${JSON.stringify(e.object)}: ${e.reason.slice(0, 40)}` : `${e.type} ${e.object.metadata.name}`);
      }, new AbortController().signal);
      assert.deepEqual(seen, [
        'ADDED small',
        'UNREADABLE MODIFIED {"namespace":"ns","name":"big","uid":"u-big","resourceVersion":"7"}: watch /api/v1/pods: one event: the answe',
        'UNREADABLE ? {}: not JSON: Unexpected token \'o\', "not jso',
        'ADDED after',
      ]);
    });

    for (const chunked of [false, true]) {
      it(`a page over the cap, when asked, is read through for the paths named (${chunked ? 'chunked' : 'Content-Length'})`, async () => {
        client = new KubeClient({ server }, { maxAnswerBytes: CAP });
        // As a custom resource's list is served: keys sorted, the list's metadata after its items.
        const body = `{"apiVersion":"v1","items":[${escapedPod('big', CAP)}],"kind":"PodList","metadata":{"continue":"next-page","resourceVersion":"9"}}`;
        api.replies = [(res) => {
          res.writeHead(200, chunked ? { 'Content-Type': 'application/json' } : { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
          for (let at = 0; at < body.length; at += 5003) res.write(body.slice(at, at + 5003));
          res.end();
        }];
        const paths = ['metadata.continue', 'metadata.resourceVersion', 'items.0.metadata.name', 'items.0.metadata.namespace', 'items.1.metadata.name'];
        await assert.rejects(client.get('/api/v1/pods', { limit: 1 }, { scanOversized: paths }), (err: unknown) => {
          assert.ok(err instanceof KubeAnswerTooLargeError);
          assert.deepEqual(Object.fromEntries(err.scanned ?? []), { 'items.0.metadata.name': 'big', 'items.0.metadata.namespace': 'ns', 'metadata.continue': 'next-page', 'metadata.resourceVersion': '9' });
          return true;
        });
      });
    }

    it('an answer cut off before its end says nothing of what it held', async () => {
      client = new KubeClient({ server }, { maxAnswerBytes: CAP });
      api.replies = [(res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(`{"metadata":{"resourceVersion":"9"},"items":[${escapedPod('big', CAP)}`);
      }];
      await assert.rejects(client.get('/api/v1/pods', { limit: 1 }, { scanOversized: ['metadata.resourceVersion'] }), (err: unknown) =>
        err instanceof KubeAnswerTooLargeError && err.scanned === undefined);
    });
  });

  describe('the API server\'s clock, from each answer\'s Date header', () => {
    it('an API server two minutes ahead: the clock says so; an answer without a Date header changes nothing', async () => {
      const clock = new ServerClock();
      client = new KubeClient({ server }, { clock });
      const ahead = () => json(200, {}, { Date: new Date(Date.now() + 120_000).toUTCString() });
      api.replies = [ahead(), ahead(), ahead()];
      for (let i = 0; i < 3; i++) await client.get('/api/v1/pods');
      assert.ok(Math.abs(clock.offsetMs() - 120_000) < 1_500, String(clock.offsetMs()));
      assert.ok(Math.abs(clock.now() - (Date.now() + 120_000)) < 1_500);
    });
  });

  describe('paths (R27)', () => {
    it('a path with an empty, `.` or `..` segment (in any encoding) is refused before anything is sent', async () => {
      client = new KubeClient({ server });
      for (const path of ['/api/v1/namespaces/ns/pods/.', '/api/v1/namespaces/ns/pods/..', '/api/v1/namespaces/ns/pods/', '/api/v1/namespaces/ns/pods/%2e',
        '/api/v1/namespaces/ns/pods/%2E%2E', '/api/v1//pods', 'api/v1/pods', '/api/v1/pods?limit=1', '/api/v1/namespaces/ns/pods/a%2Fb']) {
        await assert.rejects(client.get(path), /every path segment must be a name/, path);
      }
      await assert.rejects(client.watch('/api/v1/namespaces/ns/pods/.', {}, () => {}, new AbortController().signal), /every path segment must be a name/);
      assert.deepEqual(api.seen, []);
    });

    it('resourcePath refuses a name, namespace or subresource that is not one, even empty: never a collection\'s path', () => {
      for (const name of ['.', '..', '', 'a/b', 'A', '-a', 'a..b', 'x'.repeat(254), '%2e', 'a b']) {
        assert.throws(() => podPath('ns', name), /invalid name/, name);
        assert.throws(() => podPath(name, 'p'), /invalid namespace/, name);
      }
      assert.throws(() => podPath('ns', 'p', '../x'), /invalid subresource/);
      assert.equal(podPath('ns', 'job-1.example'), '/api/v1/namespaces/ns/pods/job-1.example');
      assert.equal(podPath(), '/api/v1/pods');
      assert.equal(isValidName('x'.repeat(253)), true);
    });

    it('getObject: an answer of another kind (a PodList for a Pod) is an error', async () => {
      client = new KubeClient({ server });
      api.replies = [json(200, { kind: 'PodList', apiVersion: 'v1', items: [] }), json(200, { kind: 'Pod', apiVersion: 'v1', metadata: { name: 'p' } })];
      await assert.rejects(getObject(client, podPath('ns', 'p'), 'Pod'), /expected a Pod, got PodList/);
      assert.equal((await getObject<{ kind: string }>(client, podPath('ns', 'p'), 'Pod')).kind, 'Pod');
    });
  });

  describe('onResponse (R51: the api_requests_total and api_request_duration_seconds metrics)', () => {
    it('is told of every answer by verb, resource and status, each 429 retry too, and of requests that got none', async () => {
      const seen: string[] = [];
      const seconds: number[] = [];
      client = new KubeClient({ server }, {
        onResponse: (a) => {
          seen.push(`${a.verb} ${a.resource} ${a.code}`);
          seconds.push(a.seconds);
        },
      });
      api.replies = [tooMany('0'), json(200, { items: [] })];
      await client.get('/api/v1/pods');
      await client.get('/api/v1/namespaces/ns/pods/p');
      api.replies = [status(409, 'AlreadyExists')];
      await assert.rejects(client.create('/api/v1/namespaces/ns/events', {}));
      await client.patch('/api/v1/namespaces/ns/pods/p/status', {}, 'merge');
      await client.replace('/apis/coordination.k8s.io/v1/namespaces/ns/leases/l', {});
      await client.delete('/api/v1/namespaces/ns/pods/p');
      api.replies = [(res) => res.end()];
      await client.watch('/api/v1/pods', {}, () => {}, new AbortController().signal);
      assert.deepEqual(seen, ['list pods 429', 'list pods 200', 'get pods 200', 'create events 409', 'patch pods/status 200', 'update leases 200',
        'delete pods 200', 'watch pods 200']);
      assert.ok(seconds.every((x) => x >= 0 && x < 5), `${seconds.join(', ')}: each from the request sent to its answer`);

      seen.length = 0;
      api.replies = [(res) => res.destroy()];
      await assert.rejects(client.get('/api/v1/pods'));
      await assert.rejects(client.get('/api/v1/namespaces/ns/pods/.'), /every path segment must be a name/); // never sent
      assert.deepEqual(seen, ['list pods error']);
    });

    it('a watch its caller stops is not an error', async () => {
      const seen: string[] = [];
      client = new KubeClient({ server }, { onResponse: (a) => seen.push(`${a.verb} ${a.code}`) });
      const abort = new AbortController();
      // Stopped once the server has the request and before it answers (a timer raced a loaded machine).
      api.replies = [(res) => {
        abort.abort();
        setTimeout(() => res.end(), 500);
      }];
      await client.watch('/api/v1/pods', {}, () => {}, abort.signal).catch(() => {});
      assert.equal(api.seen.length, 1);
      assert.deepEqual(seen, []);
    });

    const verbs: [string, string, boolean, string][] = [
      ['GET', '/api/v1/pods', false, 'list'],
      ['GET', '/api/v1/namespaces', false, 'list'],
      ['GET', '/api/v1/namespaces/ns', false, 'get'],
      ['GET', '/api/v1/namespaces/ns/pods', false, 'list'],
      ['GET', '/api/v1/namespaces/ns/pods/p', false, 'get'],
      ['GET', '/api/v1/nodes/n', false, 'get'],
      ['GET', '/apis/sidecar-terminator.dev/v1alpha1/containerrecreaterequests', false, 'list'],
      ['GET', '/apis/sidecar-terminator.dev/v1alpha1/namespaces/ns/containerrecreaterequests/r', false, 'get'],
      ['GET', '/apis/admissionregistration.k8s.io/v1', false, 'get'],
      ['GET', '/version', false, 'get'],
      ['GET', '/api/v1/pods', true, 'watch'],
      ['POST', '/api/v1/namespaces/ns/events', false, 'create'],
      ['PUT', '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l', false, 'update'],
      ['PATCH', '/api/v1/namespaces/ns/pods/p/status', false, 'patch'],
      ['DELETE', '/api/v1/namespaces/ns/pods/p', false, 'delete'],
    ];
    for (const [method, path, watch, want] of verbs) {
      it(`${method} ${path}${watch ? ' (watch)' : ''}: ${want}`, () => assert.equal(apiVerb(method, path, watch), want));
    }

    it('names the resource of a path as RBAC does, never an object or a namespace (bounded series)', () => {
      const resources: [string, string][] = [
        ['/api/v1/pods', 'pods'],
        ['/api/v1/namespaces/ns/pods/p', 'pods'],
        ['/api/v1/namespaces/ns/pods/p/status', 'pods/status'],
        ['/api/v1/namespaces', 'namespaces'],
        ['/api/v1/namespaces/ns', 'namespaces'],
        ['/api/v1/namespaces/ns/events', 'events'],
        ['/api/v1/nodes/n', 'nodes'],
        ['/apis/coordination.k8s.io/v1/namespaces/ns/leases/l', 'leases'],
        ['/apis/sidecar-terminator.dev/v1alpha1/namespaces/ns/containerrecreaterequests/r', 'containerrecreaterequests'],
        ['/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', 'selfsubjectaccessreviews'],
        ['/apis/admissionregistration.k8s.io/v1', ''],
        ['/version', ''],
      ];
      for (const [path, want] of resources) assert.equal(apiResource(path), want, path);
    });
  });

  describe('rateLimit (client-go\'s --kube-api-qps and --kube-api-burst)', () => {
    it('lets a burst leave at once, then spaces requests at the rate, 429 retries included, and says how long each waited', async () => {
      const waits: number[] = [];
      client = new KubeClient({ server }, { rateLimit: { qps: 5, burst: 2 }, onRateLimited: (verb, seconds) => waits.push(seconds) });
      api.replies = [json(200, {}), tooMany('0'), json(200, {})];
      const startedMs = Date.now();
      await Promise.all([client.get('/api/v1/namespaces/ns/pods/a'), client.get('/api/v1/namespaces/ns/pods/b')]);
      await client.get('/api/v1/namespaces/ns/pods/c');
      // Four sends (b's 429 and its retry count twice): the burst's two at once, the next at 200 ms
      // and 400 ms at the earliest, however fast the answers come.
      assert.equal(api.seen.length, 4);
      assert.equal(waits.length, 4);
      assert.deepEqual(waits.slice(0, 2), [0, 0]);
      assert.ok(waits[2]! + waits[3]! > 0.1, `the two beyond the burst waited (${waits.join(', ')} s)`);
      const sentAfterMs = api.seen.map((x) => x.atMs - startedMs);
      assert.ok(sentAfterMs[2]! >= 180 && sentAfterMs[3]! >= 380, `sent after ${sentAfterMs.join(', ')} ms`);
    });

    it('is off with a qps not above 0 (client-go\'s negative QPS), and a watch stopped while it waits is never sent', async () => {
      const waits: number[] = [];
      client = new KubeClient({ server }, { rateLimit: { qps: -1, burst: 1 }, onRateLimited: (_, s) => waits.push(s) });
      await Promise.all([1, 2, 3].map(() => client.get('/api/v1/pods')));
      assert.deepEqual(waits, []);
      client.close();

      client = new KubeClient({ server }, { rateLimit: { qps: 0.5, burst: 1 } });
      await client.get('/api/v1/pods');
      const abort = new AbortController();
      const watch = client.watch('/api/v1/pods', {}, () => {}, abort.signal);
      setTimeout(() => abort.abort(), 50);
      await assert.rejects(watch, /stopped while waiting for the rate limit/);
      assert.equal(api.seen.length, 4);
    });
  });

  after(() => client?.close());
});
