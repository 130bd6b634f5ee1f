// Where the API server is and how to authenticate to it: the in-cluster ServiceAccount, or a
// kubeconfig's current context. A kubeconfig is one file, or a list of files merged as kubectl
// merges a KUBECONFIG list. Its user authenticates with client certificates, a token or a token file,
// or a plugin (exec, auth-provider), whose tokens come from plugin-token.ts: only then is
// @kubernetes/client-node loaded. Proxies: proxy.ts.
import { now } from '../clock.ts';
import { readFileSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, resolve } from 'node:path';
import { load as parseYaml } from 'js-yaml';
import { pluginToken, type PluginUser } from './plugin-token.ts';
import { proxyFor } from './proxy.ts';

export interface KubeConnection {
  server: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** The bearer token to send now: re-read as the kubelet rotates it, or a plugin's, renewed as it expires. */
  token?: () => string | Promise<string>;
  /** The proxy to reach the server through (proxy.ts); none when undefined. */
  proxy?: string;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Projected ServiceAccount tokens rotate (about hourly); re-reading each minute stays well inside. */
const TOKEN_REREAD_MS = 60_000;

/**
 * The kubeconfig `path` when one is given (several files separated by ':', as in KUBECONFIG), else
 * the in-cluster ServiceAccount.
 */
export function loadKubeConfig(path?: string, env = process.env): KubeConnection {
  return path ? fromKubeconfig(path.split(delimiter).filter(Boolean), env) : inCluster(env);
}

function inCluster(env: NodeJS.ProcessEnv): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) and no kubeconfig given');
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    server,
    ca: readFileSync(`${SERVICE_ACCOUNT_DIR}/ca.crt`),
    token: rereadEvery(`${SERVICE_ACCOUNT_DIR}/token`, TOKEN_REREAD_MS),
    proxy: proxyFor(new URL(server), undefined, env),
  };
}

function rereadEvery(file: string, everyMs: number): () => string {
  let token = '';
  let readAt = -Infinity;
  return () => {
    const nowMs = now();
    if (nowMs - readAt >= everyMs) {
      token = readFileSync(file, 'utf8').trim();
      readAt = nowMs;
    }
    return token;
  };
}

interface Cluster {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'proxy-url'?: string;
}
interface User extends PluginUser {
  token?: string;
  tokenFile?: string;
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  exec?: { command?: string };
}
interface KubeconfigFile {
  'current-context'?: string;
  clusters?: { name: string; cluster?: Cluster }[];
  users?: { name: string; user?: User }[];
  contexts?: { name: string; context?: { cluster?: string; user?: string } }[];
}
/** A kubeconfig file and its directory, against which its relative paths are resolved. */
interface Loaded { file: KubeconfigFile; dir: string }

/** Settings that change whom we connect to or as whom, which this loader does not carry out. */
const UNSUPPORTED = { cluster: ['tls-server-name'], user: ['as', 'as-uid', 'as-groups', 'as-user-extra'] };

/**
 * The current context of the kubeconfig files `paths`, merged as kubectl merges them: the first file
 * to set current-context sets it, and of entries with the same name the first file's is used.
 */
export function fromKubeconfig(paths: string[], env: NodeJS.ProcessEnv = process.env): KubeConnection {
  const where = `kubeconfig ${paths.join(delimiter)}`;
  const files = readFiles(paths, where);
  const contextName = files.find((f) => f.file['current-context'])?.file['current-context'];
  const context = find(files, (f) => f.contexts, contextName, 'context', where).entry.context ?? {};
  const { entry: { cluster = {} }, dir: clusterDir } = find(files, (f) => f.clusters, context.cluster, 'cluster', where);
  const named = context.user ? find(files, (f) => f.users, context.user, 'user', where) : undefined;
  const user = named?.entry.user ?? {};
  const userDir = named?.dir ?? '';
  const unsupported = [
    ...UNSUPPORTED.cluster.filter((key) => key in cluster).map((key) => `cluster ${context.cluster}: ${key}`),
    ...UNSUPPORTED.user.filter((key) => key in user).map((key) => `user ${context.user}: ${key}`),
  ];
  if (unsupported.length) throw new Error(`${where}: not supported: ${unsupported.join(', ')}`);
  if (!cluster.server) throw new Error(`${where}: cluster ${context.cluster} has no server`);
  if (!URL.canParse(cluster.server)) throw new Error(`${where}: cluster ${context.cluster}: server ${cluster.server} is not a URL`);
  const bytes = (data: string | undefined, file: string | undefined, dir: string) =>
    data ? Buffer.from(data, 'base64') : file ? readFileSync(resolve(dir, file)) : undefined;
  return {
    server: cluster.server,
    ca: bytes(cluster['certificate-authority-data'], cluster['certificate-authority'], clusterDir),
    cert: bytes(user['client-certificate-data'], user['client-certificate'], userDir),
    key: bytes(user['client-key-data'], user['client-key'], userDir),
    insecureSkipTLSVerify: cluster['insecure-skip-tls-verify'] === true,
    token: userToken(user, context.user ?? '', userDir, where),
    proxy: proxyFor(new URL(cluster.server), cluster['proxy-url'], env),
  };
}

function userToken(user: User, name: string, dir: string, where: string): KubeConnection['token'] {
  const sources = (['token', 'tokenFile', 'exec', 'auth-provider'] as const).filter((key) => user[key]);
  if (sources.length > 1) throw new Error(`${where}: user ${name} has more than one credential (${sources.join(', ')}): one only`);
  if (user.token) return () => user.token!;
  if (user.tokenFile) return rereadEvery(resolve(dir, user.tokenFile), TOKEN_REREAD_MS);
  if (user.exec) {
    // As kubectl: a command given as a relative path is relative to the kubeconfig file; a bare name is looked up in PATH.
    const command = user.exec.command;
    const resolved = command?.includes('/') && !isAbsolute(command) ? resolve(dir, command) : command;
    return pluginToken(name, { exec: { ...user.exec, command: resolved } });
  }
  if (user['auth-provider']) return pluginToken(name, { 'auth-provider': user['auth-provider'] });
  return undefined;
}

/** Reads and parses the files; as kubectl, a file named alone must exist, and missing files in a list are skipped. */
function readFiles(paths: string[], where: string): Loaded[] {
  const files = paths.flatMap((path) => {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      if (paths.length > 1 && (err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    return [{ file: (parseYaml(text) ?? {}) as KubeconfigFile, dir: dirname(path) }];
  });
  if (files.length === 0) throw new Error(`${where}: no such file`);
  return files;
}

/** The entry named `name` in the first file that has one, and that file's directory. */
function find<T extends { name: string }>(files: Loaded[], entries: (file: KubeconfigFile) => T[] | undefined, name: string | undefined, kind: string, where: string): { entry: T; dir: string } {
  for (const { file, dir } of files) {
    const entry = entries(file)?.find((e) => e.name === name);
    if (entry) return { entry, dir };
  }
  throw new Error(`${where}: no ${kind} named ${JSON.stringify(name ?? '')}`);
}
