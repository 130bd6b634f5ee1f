// `node scripts/runtime-modules.ts METAFILE PROJECT_DIR OUT_DIR`: the node_modules of the image.
// The bundle (scripts/build.ts) inlines every dependency but the packages it leaves external; only
// those (but OUTSIDE_CLUSTER_ONLY), and the packages they need at run time, go into OUT_DIR/node_modules, copied from
// PROJECT_DIR/node_modules (an `npm ci` of PROJECT_DIR/package-lock.json) at their locked paths.
//   METAFILE  esbuild's metafile of the bundle: `npm run build -- OUT METAFILE` writes it; the
//             external packages are the bare imports of the bundle that are not Node built-ins.
// What is followed from each package: its dependencies and its required peer dependencies. Not its
// optional dependencies (native add-ons built only by install scripts, which the image build does
// not run), and not the packages of NEVER_LOADED: each of those gets a stand-in package instead.
// Of each package, the files Node never loads are left out: TypeScript (declarations and sources;
// Node does not strip types under node_modules) and source maps of the packages' own builds.
// Fails, naming the package, when an external is not a production dependency of the project, when a
// package is missing or at another version than the lockfile's, or when a package is made for one
// OS or CPU only (the image's node_modules is built once, on the build machine, for every platform).
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';

/** The parts of esbuild's metafile read here. */
export interface Metafile {
  outputs: Record<string, { imports: { path: string; kind: string; external?: boolean }[] }>;
}

/** The parts of a package-lock.json (lockfile version 2 or 3) read here. */
export interface LockEntry {
  version?: string;
  dev?: boolean;
  optional?: boolean;
  link?: boolean;
  os?: string[];
  cpu?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export interface Lockfile {
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
}

/** `@scope/name/sub/path` → `@scope/name`; `name/sub` → `name`. */
function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/**
 * Packages the bundle imports that the image leaves out: they serve only a run outside a cluster.
 * @kubernetes/client-node runs a kubeconfig's credential plugin (common/kube/plugin-token.ts); in a
 * cluster both roles use their ServiceAccount token, and it would be 36 of the image's 44 MiB of
 * /app. Without it, a plugin kubeconfig fails with an error that says so.
 */
export const OUTSIDE_CLUSTER_ONLY: readonly string[] = ['@kubernetes/client-node'];

/**
 * Packages of the closure that the image never runs, each with the reason, and stand-in packages
 * in their place. dockerode serves the agent's few Engine calls over the node's unix socket; its
 * SSH transport (docker-modem, for an ssh:// DOCKER_HOST) and its image builds (BuildKit sessions
 * over a second grpc-js, build contexts packed with tar-fs) never run, yet their modules require
 * these packages when they load. A stand-in loads, and throws an error naming the package and the
 * reason when used; the packages' own dependencies are not followed.
 */
export const NEVER_LOADED: Readonly<Record<string, string>> = {
  ssh2: 'Docker over SSH (an ssh:// DOCKER_HOST) is not supported: the agent reaches the Docker Engine by its unix socket',
  '@grpc/grpc-js': "dockerode's image builds (BuildKit sessions) are not used: the bundle has its own grpc-js",
  '@grpc/proto-loader': "dockerode's image builds (BuildKit sessions) are not used",
  protobufjs: "dockerode's image builds (BuildKit progress) are not used",
  'tar-fs': "dockerode's image builds (build contexts) are not used",
  '@balena/dockerignore': "dockerode's image builds (build contexts) are not used",
};

/** The packages the bundle imports at run time from node_modules, sorted. */
export function externalPackages(metafile: Metafile): string[] {
  const names = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const { path, external } of output.imports) {
      if (!external || isBuiltin(path) || path.startsWith('.') || path.startsWith('/')) continue;
      names.add(packageName(path));
    }
  }
  return [...names].sort();
}

/** The lockfile path of the package that `name` resolves to from the package at `from` ('' = the project). */
function resolve(lock: Lockfile, from: string, name: string): string | undefined {
  for (let base = from; ; base = base.slice(0, Math.max(0, base.lastIndexOf('/node_modules/')))) {
    const path = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (lock.packages[path]) return path;
    if (!base) return undefined;
  }
}

/** What the image's node_modules holds, by lockfile path (`node_modules/a`, `node_modules/a/node_modules/b`, ...), sorted. */
export interface RuntimeModules {
  /** The packages copied. */
  packages: string[];
  /** The packages of `neverLoaded` needed by them, as stand-ins. */
  standIns: string[];
}

/**
 * `roots` and everything they need at run time, but the packages named in `neverLoaded` (stand-ins,
 * not followed). Throws when a root is not a production dependency of the project, or a needed
 * package is absent from the lockfile or platform-specific.
 */
export function runtimeClosure(lock: Lockfile, roots: string[], neverLoaded: Readonly<Record<string, string>> = {}): RuntimeModules {
  if (lock.lockfileVersion < 2) throw new Error(`package-lock.json version ${lock.lockfileVersion}: version 2 or later is needed`);
  const project = lock.packages[''] ?? {};
  const found = new Set<string>();
  const standIns = new Set<string>();
  const queue: { from: string; name: string; by: string }[] = [];
  for (const name of roots) {
    if (!project.dependencies?.[name]) {
      const where = project.devDependencies?.[name] ? 'a devDependency' : 'not a dependency';
      throw new Error(`${name} is left external by the bundle but is ${where} in package.json: ` +
        `move it to "dependencies" (npm ci --omit=dev would not install it)`);
    }
    queue.push({ from: '', name, by: 'the bundle' });
  }
  for (let item = queue.shift(); item; item = queue.shift()) {
    const path = resolve(lock, item.from, item.name);
    if (!path) throw new Error(`${item.name} (needed by ${item.by}) is not in package-lock.json: run npm install`);
    if (found.has(path) || standIns.has(path)) continue;
    if (Object.hasOwn(neverLoaded, item.name)) {
      standIns.add(path);
      continue;
    }
    const entry = lock.packages[path]!;
    if (entry.link) throw new Error(`${path} is a link (a workspace or a file: dependency): not supported`);
    if (entry.os || entry.cpu) {
      throw new Error(`${path} (needed by ${item.by}) is for ${[...(entry.os ?? []), ...(entry.cpu ?? [])].join(', ')} only: ` +
        'the image\'s node_modules is built once for every platform');
    }
    found.add(path);
    const needed = Object.keys(entry.dependencies ?? {});
    for (const peer of Object.keys(entry.peerDependencies ?? {})) {
      if (!entry.peerDependenciesMeta?.[peer]?.optional) needed.push(peer);
    }
    for (const name of needed) queue.push({ from: path, name, by: path.replace(/^.*node_modules\//, '') });
  }
  return { packages: [...found].sort(), standIns: [...standIns].sort() };
}

/** Files of a package that Node never loads: TypeScript files, and source maps of JavaScript or TypeScript. */
export const UNLOADED_FILE = /\.(?:[cm]?ts|[cm]?js\.map|[cm]?ts\.map)$/;

/**
 * Copies the packages at `paths` from `projectDir` into `outDir` (same relative paths), each without
 * its own nested node_modules (the packages of the closure in there are copied by their own paths)
 * and without the files Node never loads (UNLOADED_FILE).
 * Throws when a package is not installed at the lockfile's version.
 */
export function copyPackages(lock: Lockfile, paths: string[], projectDir: string, outDir: string): void {
  for (const path of paths) {
    const src = join(projectDir, path);
    const manifest = join(src, 'package.json');
    if (!existsSync(manifest)) throw new Error(`${src} is not installed: run npm ci`);
    const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string };
    const locked = lock.packages[path]!.version;
    if (locked && version !== locked) throw new Error(`${src} is version ${version}, package-lock.json has ${locked}: run npm ci`);
    const nested = join(src, 'node_modules');
    mkdirSync(join(outDir, path), { recursive: true });
    cpSync(src, join(outDir, path), {
      recursive: true,
      filter: (from) => from !== nested && !(UNLOADED_FILE.test(from) && lstatSync(from).isFile()),
    });
    removeEmptyDirs(join(outDir, path));
  }
}

/** The version of every stand-in package: no release of the real package has it. */
export const STAND_IN_VERSION = '0.0.0-left-out';

/**
 * Writes a stand-in package at each of `paths` under `outDir`: it loads (its dependents require it
 * when they load), and any use of what it exports throws `NAME is left out of the image: REASON`.
 */
export function writeStandIns(paths: string[], outDir: string, neverLoaded: Readonly<Record<string, string>>): void {
  for (const path of paths) {
    const name = path.replace(/^.*node_modules\//, '');
    const reason = neverLoaded[name];
    if (!reason) throw new Error(`${path}: no reason given for leaving ${name} out`);
    const dir = join(outDir, path);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify({
      name, version: STAND_IN_VERSION, private: true, main: 'index.cjs',
      description: `Left out of the sidecar-terminator image: ${reason}`,
    }, null, 2)}\n`);
    writeFileSync(join(dir, 'index.cjs'), standInSource(name, reason));
  }
}

function standInSource(name: string, reason: string): string {
  const message = JSON.stringify(`${name} is left out of the sidecar-terminator image: ${reason}`);
  return `'use strict';
// A stand-in written by scripts/runtime-modules.ts: every property is a function that throws, called
// or constructed; \`then\` is absent so that nothing takes the module for a promise.
function leftOut() {
  throw new Error(${message});
}
module.exports = new Proxy(leftOut, { get: (_, key) => (key === 'then' ? undefined : leftOut) });
`;
}

/** Removes the directories under `dir` left empty (e.g. @types/node's, of declarations only). */
function removeEmptyDirs(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name === 'node_modules') continue;
    const sub = join(dir, entry.name);
    removeEmptyDirs(sub);
    if (readdirSync(sub).length === 0) rmdirSync(sub);
  }
}

if (import.meta.main) {
  const [metafilePath, projectDir, outDir] = process.argv.slice(2);
  if (!metafilePath || !projectDir || !outDir) {
    console.error('usage: node scripts/runtime-modules.ts METAFILE PROJECT_DIR OUT_DIR');
    process.exit(2);
  }
  try {
    if (existsSync(join(outDir, 'node_modules'))) throw new Error(`${join(outDir, 'node_modules')} exists already`);
    const metafile = JSON.parse(readFileSync(metafilePath, 'utf8')) as Metafile;
    const lock = JSON.parse(readFileSync(join(projectDir, 'package-lock.json'), 'utf8')) as Lockfile;
    const externals = externalPackages(metafile).filter((name) => !OUTSIDE_CLUSTER_ONLY.includes(name));
    const { packages, standIns } = runtimeClosure(lock, externals, NEVER_LOADED);
    mkdirSync(join(outDir, 'node_modules'), { recursive: true });
    copyPackages(lock, packages, projectDir, outDir);
    writeStandIns(standIns, outDir, NEVER_LOADED);
    console.log(`node_modules: ${packages.length} packages, for ${externals.join(', ') || 'nothing (no external package)'}; ` +
      `stand-ins for ${standIns.length} never loaded (${standIns.map((p) => p.replace(/^.*node_modules\//, '')).join(', ')}); ` +
      `left out: ${OUTSIDE_CLUSTER_ONLY.join(', ')}`);
  } catch (error) {
    console.error(`runtime-modules.ts: ${(error as Error).message}`);
    process.exit(1);
  }
}
