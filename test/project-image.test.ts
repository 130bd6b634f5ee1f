// The project image, built offline by e2e/images/build-project-image.sh, imported into a private
// containerd and run as the manifests run it (read-only root, no capabilities, default seccomp):
// proves that the image's Node runtime, its compiled code, dependencies and CRI proto work.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startContainerd, type Containerd } from './support/containerd.ts';
import { REPO_ROOT } from './support/images.ts';
import { run } from './support/run.ts';
import { atProcessEnd } from './support/sweep.ts';

const IMAGE = 'sidecar-terminator.local/sidecar-terminator:dev';
const CTR = '/usr/bin/ctr';
/** The image's entrypoint: `ctr run IMAGE ID ARGS...` replaces it together with the args, so it is given again. */
const ENTRYPOINT = ['/nodejs/bin/node', '/app/dist/main.js'];
/** containerd's default capabilities: ctr has no `--cap-drop ALL`, so each is dropped by name. */
const DEFAULT_CAPS = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE',
];

let archive: Promise<string> | undefined;

/** The image's OCI archive, built once per test process into a temp dir removed at process end. */
function projectImage(): Promise<string> {
  archive ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'st-project-image-'));
    atProcessEnd(() => rmSync(dir, { recursive: true, force: true }));
    await run('bash', [join(REPO_ROOT, 'e2e/images/build-project-image.sh'), dir], { timeoutMs: 600_000 });
    return join(dir, 'sidecar-terminator.tar');
  })();
  return archive;
}

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Running {
  id: string;
  output(): string;
  exited: Promise<Exit>;
}

describe('the project image', () => {
  let containerd: Containerd;

  before(async () => {
    const file = await projectImage();
    containerd = await startContainerd({ images: false });
    await run(CTR, ['-a', containerd.socket, '-n', 'k8s.io', 'images', 'import', file], { timeoutMs: 300_000 });
  });

  after(async () => {
    await containerd?.stop();
  });

  /**
   * `ctr run --rm` of the image: with args, the entrypoint and them; without, the image's own
   * entrypoint. The container's cgroup and runc state stay in the private daemon's scope.
   */
  function start(args: string[], mounts: string[] = []): Running {
    const id = `st-image-${randomBytes(4).toString('hex')}`;
    const child = spawn(CTR, [
      '-a', containerd.socket, '-n', 'k8s.io', 'run', '--rm',
      '--read-only', '--seccomp', ...DEFAULT_CAPS.flatMap((c) => ['--cap-drop', c]),
      '--cgroup', `${containerd.cgroupParent}/${id}`,
      '--runc-root', join(containerd.dir, 'runc'),
      '--fifo-dir', join(containerd.dir, 'fifo'),
      ...mounts.flatMap((m) => ['--mount', m]),
      IMAGE, id, ...(args.length ? [...ENTRYPOINT, ...args] : []),
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<Exit>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`container ${id} did not exit within 60 s; output:\n${stdout}${stderr}`));
      }, 60_000);
      child.once('error', reject);
      child.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
    return { id, output: () => stdout + stderr, exited };
  }

  it('agent without a node name exits non-zero, saying so', async () => {
    const { code, stderr } = await start(['agent']).exited;
    assert.notEqual(code, 0);
    assert.match(stderr, /the node name is required: set NODE_NAME or --node-name/);
    assert.match(stderr, /usage: sidecar-terminator agent/);
  });

  it('controller with an unknown flag prints its usage', async () => {
    const { code, stderr } = await start(['controller', '--help']).exited;
    assert.equal(code, 2);
    assert.match(stderr, /Unknown option '--help'/);
    assert.match(stderr, /usage: sidecar-terminator controller \[flags\]\n\s+--kubeconfig PATH/);
  });

  it("run with the image's own entrypoint and no role, prints the usage", async () => {
    const { code, stderr } = await start([]).exited;
    assert.equal(code, 2);
    assert.match(stderr, /usage: sidecar-terminator agent\|controller/);
  });

  it('agent finds the CRI runtime under --host-run-dir, talks CRI, and exits 0 on SIGTERM', async () => {
    // The image runs as uid 65532; this private socket is root's, 0660. (The DaemonSet runs the
    // agent as uid 0 without capabilities for this reason: docs/deploy.md.)
    chmodSync(containerd.socket, 0o666);
    // No cluster here: a kubeconfig naming a server that is not there (the agent retries its watches).
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'st-image-kubeconfig-')), 'kubeconfig');
    atProcessEnd(() => rmSync(dirname(kubeconfig), { recursive: true, force: true }));
    writeFileSync(kubeconfig, JSON.stringify({
      'current-context': 'none',
      contexts: [{ name: 'none', context: { cluster: 'none', user: 'none' } }],
      clusters: [{ name: 'none', cluster: { server: 'https://127.0.0.1:1' } }],
      users: [{ name: 'none', user: { token: 'none' } }],
    }));
    chmodSync(kubeconfig, 0o644);
    const agent = start(
      ['agent', '--node-name', 'image-test-node', '--host-run-dir', '/host/var/run', '--kubeconfig', '/etc/kubeconfig'],
      [
        `type=bind,src=${containerd.socket},dst=/host/var/run/containerd/containerd.sock,options=rbind:ro`,
        `type=bind,src=${kubeconfig},dst=/etc/kubeconfig,options=rbind:ro`,
      ],
    );
    const until = Date.now() + 30_000;
    while (!/"message":"container runtimes connected"/.test(agent.output())) {
      if (Date.now() > until) assert.fail(`the agent did not connect to containerd; output:\n${agent.output()}`);
      const done = await Promise.race([agent.exited, new Promise((r) => setTimeout(r, 100))]);
      if (done) assert.fail(`the agent exited early; output:\n${agent.output()}`);
    }
    const connected = agent.output().split('\n').find((l) => l.includes('"message":"container runtimes connected"'))!;
    assert.deepEqual((JSON.parse(connected) as { runtimes: string[] }).runtimes, ['containerd']);
    // As the manifests run it: the image's non-root user, no capabilities at all.
    const tasks = (await run(CTR, ['-a', containerd.socket, '-n', 'k8s.io', 'tasks', 'ls'])).stdout;
    const pid = tasks.split('\n').map((l) => l.trim().split(/\s+/)).find((f) => f[0] === agent.id)?.[1];
    assert.ok(pid, `no task ${agent.id} in:\n${tasks}`);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    assert.match(status, /^Uid:\s+65532\s+65532\s+65532\s+65532$/m);
    assert.match(status, /^CapEff:\s+0+$/m);
    assert.match(status, /^CapBnd:\s+0+$/m);
    assert.match(status, /^Seccomp:\s+2$/m);
    await run(CTR, ['-a', containerd.socket, '-n', 'k8s.io', 'tasks', 'kill', '--signal', 'SIGTERM', agent.id]);
    const { code } = await agent.exited;
    assert.equal(code, 0, agent.output());
  });
});
