// Raw API calls as someone other than the cluster admin: impersonating a user (with the admin's
// client certificate and the Impersonate-* headers), or with a bearer token alone. The attacks in
// e2e/security.test.ts and the admission checks are made this way.
import * as https from 'node:https';
import { readFileSync } from 'node:fs';
import { clients } from './cluster.ts';

export type Caller =
  | { user: string; extra?: Record<string, string> }
  | { token: string };

export interface ApiAnswer {
  status: number;
  body: { message?: string; [field: string]: unknown };
}

/** One API request as `caller`; resolves with the status and the parsed body, whatever the status. */
export async function apiAs(caller: Caller, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
  const { kc } = clients();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const contentType = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  const headers: Record<string, string> = { 'Content-Type': contentType, Accept: 'application/json' };
  let options: https.RequestOptions = { method, headers };
  if ('token' in caller) {
    // The token alone: no client certificate, which the API server would authenticate first.
    headers.Authorization = `Bearer ${caller.token}`;
    options.ca = cluster.caData ? Buffer.from(cluster.caData, 'base64') : cluster.caFile ? readFileSync(cluster.caFile) : undefined;
  } else {
    headers['Impersonate-User'] = caller.user;
    // Header names cannot hold "/": extra keys are percent-encoded.
    for (const [key, value] of Object.entries(caller.extra ?? {})) headers[`Impersonate-Extra-${key.replaceAll('/', '%2f')}`] = value;
    await kc.applyToHTTPSOptions(options);
    options = { ...options, headers: { ...(options.headers as Record<string, string>), ...headers } };
  }
  const url = new URL(path, cluster.server);
  return new Promise((resolve, reject) => {
    const req = https.request(url, options, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => {
        let parsed: ApiAnswer['body'];
        try {
          parsed = JSON.parse(text) as ApiAnswer['body'];
        } catch {
          parsed = { message: text };
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** The path of the requests collection in a namespace (optionally one request, a dry run). */
export function requestsPath(namespace: string, { dryRun = false }: { dryRun?: boolean } = {}): string {
  return `/apis/sidecar-terminator.dev/v1alpha1/namespaces/${namespace}/containerrecreaterequests${dryRun ? '?dryRun=All' : ''}`;
}
