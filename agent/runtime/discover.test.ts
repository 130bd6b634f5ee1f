import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseContainerID } from '../../api/container-id.ts';
import { CRI_SOCKETS, DiscoveredRuntimes, discoverRuntimes } from './discover.ts';
import { fakeRuntime } from '../../test/support/fake-runtime.ts';

describe('parseContainerID', () => {
  it('splits runtime and ID', () => {
    assert.deepEqual(parseContainerID('containerd://abc123'), { full: 'containerd://abc123', runtime: 'containerd', id: 'abc123' });
    assert.deepEqual(parseContainerID('cri-o://abc123'), { full: 'cri-o://abc123', runtime: 'cri-o', id: 'abc123' });
  });
  it('refuses IDs without a runtime', () => {
    assert.equal(parseContainerID('abc123'), undefined);
    assert.equal(parseContainerID('docker://'), undefined);
  });
});

describe('DiscoveredRuntimes.forContainer', () => {
  const fake = (idPrefix: string) => fakeRuntime({ idPrefix, socket: `/run/${idPrefix}.sock` });
  const runtimes = new DiscoveredRuntimes([fake('containerd'), fake('docker')]);
  const picked = (containerID: string) => {
    const found = runtimes.forContainer(containerID);
    assert.ok('runtime' in found, JSON.stringify(found));
    return found;
  };
  it('picks the runtime by prefix, with the ID parsed', () => {
    assert.equal(picked('docker://x').runtime.idPrefix, 'docker');
    assert.deepEqual(picked('containerd://x').container, { full: 'containerd://x', runtime: 'containerd', id: 'x' });
  });
  it('refuses a malformed ID', () => {
    assert.match((runtimes.forContainer('abc123') as { error: string }).error, /malformed container ID "abc123": expected "<runtime>:\/\/<id>"/);
  });
  it('says which runtimes the node has when none matches', () => {
    assert.match(
      (runtimes.forContainer('cri-o://x') as { error: string }).error,
      /runtime "cri-o" is not on this node \(found: containerd \(\/run\/containerd.sock\), docker \(\/run\/docker.sock\)\)/,
    );
  });
});

describe('discoverRuntimes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'st-discover-'));
  const servers: Server[] = [];
  after(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    rmSync(dir, { recursive: true, force: true });
  });

  /** A unix socket that accepts and hangs up: speaks neither CRI nor the Docker API. */
  async function mute(path: string): Promise<void> {
    const server = createServer((conn) => conn.destroy());
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(path, resolve));
  }

  it('lists the socket paths of R46 (docs/design.md) in order', () => {
    assert.deepEqual(CRI_SOCKETS, [
      'containerd/containerd.sock',
      'containerd.sock',
      'k3s/containerd/containerd.sock',
      'crio/crio.sock',
      'crio.sock',
      'cri-dockerd.sock',
      'cri-dockerd/cri-dockerd.sock',
    ]);
  });

  it('fails clearly when there is no runtime', async () => {
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    writeFileSync(join(empty, 'containerd.sock'), 'not a socket');
    await assert.rejects(discoverRuntimes({ hostRunDir: empty }), /no container runtime found under .*empty \(looked for containerd\/containerd.sock, /);
  });

  it('names sockets that do not answer and why', async () => {
    const run = join(dir, 'run');
    mkdirSync(join(run, 'crio'), { recursive: true });
    await mute(join(run, 'crio', 'crio.sock'));
    await mute(join(run, 'docker.sock'));
    await assert.rejects(
      discoverRuntimes({ hostRunDir: run, cri: { callTimeoutMs: 3_000 }, docker: { callTimeoutMs: 3_000 } }),
      (error: Error) => {
        assert.match(error.message, /crio\/crio.sock: CRI Version on .*crio\.sock failed \[UNAVAILABLE\]/);
        assert.match(error.message, /docker.sock: Docker GET \/version on .*docker\.sock failed/);
        return true;
      },
    );
  });

  it('fails clearly for an explicit socket that is missing or mute', async () => {
    await assert.rejects(discoverRuntimes({ socket: join(dir, 'nope.sock') }), /nope.sock \(from the flag\) does not exist or is not a socket/);
    const path = join(dir, 'mute.sock');
    await mute(path);
    await assert.rejects(
      discoverRuntimes({ socket: `unix://${path}`, cri: { callTimeoutMs: 3_000 }, docker: { callTimeoutMs: 3_000 } }),
      /mute.sock \(from the flag\) answers neither CRI runtime.v1 nor the Docker Engine API: CRI Version .* Docker GET \/version/,
    );
  });
});
