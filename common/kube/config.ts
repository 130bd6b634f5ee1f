// Where the API server is and how to authenticate to it: the in-cluster ServiceAccount, or a
// kubeconfig file's current context (client certificates or a bearer token).
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { load as parseYaml } from 'js-yaml';

export interface KubeConnection {
  server: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** The bearer token to send now (re-read as the kubelet rotates it). */
  token?: () => string;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Projected ServiceAccount tokens rotate (about hourly); re-reading each minute stays well inside. */
const TOKEN_REREAD_MS = 60_000;

/** A kubeconfig file when one is named, else the in-cluster ServiceAccount. */
export function loadKubeConfig(path?: string): KubeConnection {
  return path ? fromKubeconfigFile(path) : inCluster();
}

function inCluster(dir = SERVICE_ACCOUNT_DIR, env = process.env): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) and no kubeconfig given');
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: readFileSync(`${dir}/ca.crt`),
    token: rereadEvery(`${dir}/token`, TOKEN_REREAD_MS),
  };
}

function rereadEvery(file: string, everyMs: number): () => string {
  let token = '';
  let readAt = -Infinity;
  return () => {
    const now = Date.now();
    if (now - readAt >= everyMs) {
      token = readFileSync(file, 'utf8').trim();
      readAt = now;
    }
    return token;
  };
}

interface Named<T> { name: string; [key: string]: unknown; cluster?: T; user?: T; context?: T }
interface KubeconfigFile {
  'current-context'?: string;
  clusters?: Named<{ server?: string; 'certificate-authority'?: string; 'certificate-authority-data'?: string; 'insecure-skip-tls-verify'?: boolean }>[];
  users?: Named<{ token?: string; 'tokenFile'?: string; 'client-certificate'?: string; 'client-certificate-data'?: string; 'client-key'?: string; 'client-key-data'?: string }>[];
  contexts?: Named<{ cluster?: string; user?: string }>[];
}

export function fromKubeconfigFile(path: string): KubeConnection {
  const file = parseYaml(readFileSync(path, 'utf8')) as KubeconfigFile;
  const base = dirname(path);
  const context = find(file.contexts, file['current-context'], 'context', path).context ?? {};
  const cluster = find(file.clusters, context.cluster, 'cluster', path).cluster ?? {};
  const user = context.user ? (find(file.users, context.user, 'user', path).user ?? {}) : {};
  if (!cluster.server) throw new Error(`kubeconfig ${path}: cluster ${context.cluster} has no server`);
  const bytes = (data: string | undefined, file: string | undefined) =>
    data ? Buffer.from(data, 'base64') : file ? readFileSync(resolve(base, file)) : undefined;
  const tokenFile = user.tokenFile;
  return {
    server: cluster.server,
    ca: bytes(cluster['certificate-authority-data'], cluster['certificate-authority']),
    cert: bytes(user['client-certificate-data'], user['client-certificate']),
    key: bytes(user['client-key-data'], user['client-key']),
    insecureSkipTLSVerify: cluster['insecure-skip-tls-verify'] === true,
    token: user.token ? () => user.token! : tokenFile ? rereadEvery(resolve(base, tokenFile), TOKEN_REREAD_MS) : undefined,
  };
}

function find<T extends Named<unknown>>(entries: T[] | undefined, name: string | undefined, kind: string, path: string): T {
  const entry = entries?.find((e) => e.name === name);
  if (!entry) throw new Error(`kubeconfig ${path}: no ${kind} named ${JSON.stringify(name ?? '')}`);
  return entry;
}
