// The bearer token of a kubeconfig user whose credential comes from a plugin: an exec plugin
// (`exec`) or an `auth-provider`. @kubernetes/client-node runs the plugin; an exec plugin's token is
// kept until the expiry it came with, then the plugin runs again. client-node is imported at the first
// request, and only from here: it adds about 65 MiB to the agent's resident memory (measured; all its
// API models), which the agent in a cluster never needs. The image leaves it out altogether.
import type { RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** A kubeconfig user's plugin settings: `exec` (its command resolved against its file) or `auth-provider`. */
export interface PluginUser {
  exec?: unknown;
  'auth-provider'?: { name?: string };
}

/** The token to send now, from the plugin of the user named `name`. */
export function pluginToken(name: string, user: PluginUser): () => Promise<string> {
  const where = `kubeconfig user ${name}: ${user.exec ? 'exec plugin' : `auth-provider ${JSON.stringify(user['auth-provider']?.name ?? '')}`}`;
  let config: Promise<KubeConfig> | undefined;
  let pending: Promise<string> | undefined;
  const fetchToken = async (): Promise<string> => {
    config ??= load(name, user);
    const opts: RequestOptions = {};
    try {
      await (await config).applyToHTTPSOptions(opts);
    } catch (err) {
      throw new Error(`${where}: ${(err instanceof Error ? err.message : String(err)).trim() || 'failed'}`, { cause: err });
    }
    // client-node sees only the plugin settings: a client certificate here came from the plugin,
    // and our client's connections are set up once, before any plugin runs.
    if (opts.cert || opts.key) throw new Error(`${where} gave a client certificate: only tokens are supported`);
    const auth = (opts.headers as Record<string, unknown> | undefined)?.Authorization;
    if (typeof auth !== 'string' || !auth.startsWith('Bearer ')) throw new Error(`${where} gave no token`);
    return auth.slice('Bearer '.length);
  };
  // Requests sent at once share one run of the plugin.
  return () => (pending ??= fetchToken().finally(() => { pending = undefined; }));
}

async function load(name: string, user: PluginUser): Promise<KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node').catch((err: unknown) => {
    if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    // The project image leaves it out (scripts/runtime-modules.ts OUTSIDE_CLUSTER_ONLY).
    throw new Error('a credential plugin needs the package @kubernetes/client-node, which this installation leaves out ' +
      '(the image does: in a cluster, the ServiceAccount token is used); run from a checkout after `npm ci`, ' +
      'or give the user a token or a client certificate');
  });
  const config = new KubeConfig();
  // The context names no cluster it knows: the server, its CA and any client certificate are ours.
  config.loadFromString(JSON.stringify({
    users: [{ name, user }],
    contexts: [{ name: 'plugin', context: { cluster: 'none', user: name } }],
    'current-context': 'plugin',
  }));
  return config;
}
