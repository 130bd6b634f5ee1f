// test group: serial — it builds the project image and runs it in a private containerd.
// The project image, built offline by e2e/images/build-project-image.sh, imported into a private
// containerd and run as the manifests run it (read-only root, no capabilities, default seccomp):
// proves that the image's Node runtime, its compiled code, dependencies and CRI proto work, that its
// node_modules holds only the packages the bundle imports, and that stack traces name the .ts sources.
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
import {
  NEVER_LOADED, OUTSIDE_CLUSTER_ONLY, STAND_IN_VERSION, externalPackages, runtimeClosure, type Lockfile, type Metafile,
} from '../scripts/runtime-modules.ts';

const IMAGE = 'sidecar-terminator.local/sidecar-terminator:dev';
const CTR = '/usr/bin/ctr';
/** The image's entrypoint: `ctr run IMAGE ID ARGS...` replaces it together with the args, so it is given again. */
const ENTRYPOINT = ['/nodejs/bin/node', '--enable-source-maps', '/app/dist/main.js'];
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

let layer: Promise<string> | undefined;

/** The image's one layer (a gzip tar), unpacked from the archive once. */
function imageLayer(): Promise<string> {
  layer ??= (async () => {
    const archiveFile = await projectImage();
    const dir = mkdtempSync(join(tmpdir(), 'st-project-image-layout-'));
    atProcessEnd(() => rmSync(dir, { recursive: true, force: true }));
    await run('tar', ['-xf', archiveFile, '-C', dir]);
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
    const blob = (digest: string) => join(dir, 'blobs', ...digest.split(':'));
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as { layers: { digest: string }[] };
    assert.equal(manifest.layers.length, 1);
    return blob(manifest.layers[0]!.digest);
  })();
  return layer;
}

let files: Promise<string[]> | undefined;

/** The paths in the image's layer, without the leading ./ (e.g. app/dist/main.js). */
function imageFiles(): Promise<string[]> {
  files ??= (async () => {
    const { stdout } = await run('tar', ['-tzf', await imageLayer()]);
    return stdout.split('\n').filter(Boolean).map((f) => f.replace(/^\.\//, ''));
  })();
  return files;
}

/** The text of one file of the image (e.g. app/package.json). */
async function imageFile(path: string): Promise<string> {
  return (await run('tar', ['-xzOf', await imageLayer(), `./${path}`])).stdout;
}

let externals: Promise<string[]> | undefined;

/** The packages the bundle imports from node_modules, from the metafile of a build like the image's. */
function bundleExternals(): Promise<string[]> {
  externals ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'st-image-meta-'));
    atProcessEnd(() => rmSync(dir, { recursive: true, force: true }));
    await run(process.execPath, [join(REPO_ROOT, 'scripts/build.ts'), join(dir, 'dist'), join(dir, 'meta.json')], { cwd: REPO_ROOT });
    return externalPackages(JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8')) as Metafile);
  })();
  return externals;
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
   * `ctr run --rm` of the image: with args, the entrypoint (or `command`) and them; without, the
   * image's own entrypoint. The container's cgroup and runc state stay in the private daemon's scope.
   */
  function start(args: string[], mounts: string[] = [], command = ENTRYPOINT): Running {
    const id = `st-image-${randomBytes(4).toString('hex')}`;
    const child = spawn(CTR, [
      '-a', containerd.socket, '-n', 'k8s.io', 'run', '--rm',
      '--read-only', '--seccomp', ...DEFAULT_CAPS.flatMap((c) => ['--cap-drop', c]),
      '--cgroup', `${containerd.cgroupParent}/${id}`,
      '--runc-root', join(containerd.dir, 'runc'),
      '--fifo-dir', join(containerd.dir, 'fifo'),
      ...mounts.flatMap((m) => ['--mount', m]),
      IMAGE, id, ...(args.length ? [...command, ...args] : []),
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
    const { code, stderr } = await start(['controller', '--bogus']).exited;
    assert.equal(code, 2);
    assert.match(stderr, /Unknown option '--bogus'/);
    assert.match(stderr, /usage: sidecar-terminator controller \[flags\]\n\s+--kubeconfig PATH/);
  });

  it('controller --help prints its usage on stdout and exits 0', async () => {
    const { code, stdout } = await start(['controller', '--help']).exited;
    assert.equal(code, 0);
    assert.match(stdout, /^usage: sidecar-terminator controller \[flags\]\n\s+--kubeconfig PATH/);
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

  it('node_modules holds the packages the bundle imports and what they need, and nothing else', async () => {
    const files = await imageFiles();
    const packages = new Set(files.flatMap((f) => /^app\/(node_modules\/(?:.+\/node_modules\/)?(?:@[^/]+\/)?[^/@]+)\/package\.json$/.exec(f)?.[1] ?? []));
    for (const name of ['dockerode', 'docker-modem']) assert.ok(packages.has(`node_modules/${name}`), `${name} in the image`);
    // devDependencies, packages the bundle inlines, native add-ons built only by install scripts, and
    // the dependencies of the packages never loaded (ssh2's, the second grpc-js').
    for (const name of [
      'typescript', 'eslint', 'esbuild', 'node', 'typescript-eslint', '@eslint/js', '@types/dockerode',
      'winston', 'logform', 'prom-client', 'bintrees', 'cpu-features', 'nan', 'buildcheck',
      'asn1', 'bcrypt-pbkdf', 'tweetnacl', 'yargs', 'long', 'tar-stream',
    ]) {
      assert.ok(!packages.has(`node_modules/${name}`), `${name} is not in the image`);
    }
    // Exactly the closure, in the lockfile's layout, of what the bundle leaves external, but the
    // packages only a run outside a cluster loads (client-node, for kubeconfig credential plugins).
    const names = await bundleExternals();
    assert.ok(names.includes('dockerode') && names.includes('@kubernetes/client-node'), `externals: ${names.join(', ')}`);
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as Lockfile;
    const expected = runtimeClosure(lock, names.filter((n) => !OUTSIDE_CLUSTER_ONLY.includes(n)), NEVER_LOADED);
    assert.deepEqual([...packages].sort(), [...expected.packages, ...expected.standIns].sort());
    assert.ok(expected.standIns.includes('node_modules/ssh2'), `stand-ins: ${expected.standIns.join(', ')}`);
    for (const path of expected.standIns) {
      const manifest = JSON.parse(await imageFile(`app/${path}/package.json`)) as { version: string };
      assert.equal(manifest.version, STAND_IN_VERSION, `${path} is a stand-in`);
    }
    assert.ok(!packages.has('node_modules/@kubernetes/client-node'), 'client-node is not in the image');
    // Of each package, no TypeScript file and no source map; the bundle with its map.
    const unloaded = files.filter((f) => f.startsWith('app/node_modules/') && /\.(?:[cm]?ts|[cm]?[jt]s\.map)$/.test(f));
    assert.deepEqual(unloaded, []);
    assert.deepEqual(files.filter((f) => f.startsWith('app/dist/') && !f.endsWith('/')).sort(), ['app/dist/main.js', 'app/dist/main.js.map']);
  });

  it('loads every package the bundle leaves external that it ships', async () => {
    // Each imported as the bundle does, from /app; and a Docker client on a socket that is not
    // there: dockerode and docker-modem work, the ping fails with ENOENT.
    const names = (await bundleExternals()).filter((n) => !OUTSIDE_CLUSTER_ONLY.includes(n));
    const script = [
      `for (const name of ${JSON.stringify(names)}) { await import(name); console.log('loaded', name); }`,
      "const { default: Docker } = await import('dockerode');",
      "await new Docker({ socketPath: '/tmp/none.sock' }).ping().catch((e) => console.log('ping', e.code));",
    ].join('\n');
    const { code, stdout, stderr } = await start(['--input-type=module', '-e', script], [], ['/nodejs/bin/node']).exited;
    assert.equal(code, 0, stderr);
    for (const name of names) assert.ok(stdout.includes(`loaded ${name}\n`), stdout);
    assert.match(stdout, /^ping ENOENT$/m);
  });

  it('a kubeconfig with a credential plugin: the controller says the image has no @kubernetes/client-node for it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'st-image-kubeconfig-'));
    atProcessEnd(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'config'), `current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, interactiveMode: Never}}}]
`);
    chmodSync(dir, 0o755);
    chmodSync(join(dir, 'config'), 0o644);
    const controller = start(['controller', '--kubeconfig', '/kube/config'], [`type=bind,src=${dir},dst=/kube,options=rbind:ro`]);
    const deadline = Date.now() + 30_000;
    while (!controller.output().includes('@kubernetes/client-node') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    await run(CTR, ['-a', containerd.socket, '-n', 'k8s.io', 'tasks', 'kill', '--signal', 'SIGKILL', controller.id]).catch(() => undefined);
    await controller.exited.catch(() => undefined);
    assert.match(controller.output(), /kubeconfig user u: exec plugin: a credential plugin needs the package @kubernetes\/client-node, which this installation leaves out \(the image does/);
  });

  it("a stack trace through the bundle names the TypeScript sources (the entrypoint's --enable-source-maps)", async () => {
    // The first write to stderr prints the stack that made it: the agent's usage, from main.ts.
    const script = [
      'const write = process.stderr.write.bind(process.stderr); let first = true;',
      "process.stderr.write = (chunk, ...rest) => { if (first) { first = false; write(new Error('where').stack + '\\n'); } return write(chunk, ...rest); };",
      "process.argv.splice(1, Infinity, '/app/dist/main.js', 'agent');",
      "await import('/app/dist/main.js');",
    ].join('\n');
    const { stderr } = await start([...ENTRYPOINT.slice(1, -1), '--input-type=module', '-e', script], [], ['/nodejs/bin/node']).exited;
    assert.match(stderr, /the node name is required/);
    assert.match(stderr, /^\s+at .*\/app\/main\.ts:\d+:\d+\)?$/m, stderr);
    assert.doesNotMatch(stderr, /\/app\/dist\/main\.js:\d+:\d+/, stderr);
  });
});
