// The proxy in front of the API server, decided once (our client talks to one server) as kubectl
// decides it: the cluster's proxy-url when it has one; else HTTPS_PROXY (or https_proxy) unless
// NO_PROXY (or no_proxy) names the server, and never for localhost or a loopback address. NO_PROXY
// is comma-separated: `*`, an IP address, a CIDR range, or a domain name (which also covers its
// subdomains; a leading `.` or `*.` covers only the subdomains), each but a range optionally with
// `:port`. Node's https.Agent tunnels through http and https proxies only.
import { BlockList, isIP } from 'node:net';

/** The proxy URL to reach `server` through, or undefined to connect directly. */
export function proxyFor(server: URL, proxyUrl: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (proxyUrl) {
    // Our client sends plain http to loopback addresses only, never through a proxy.
    if (server.protocol !== 'https:') throw new Error(`proxy-url: only used with an https server, not ${server.origin}`);
    return checked(proxyUrl, 'proxy-url');
  }
  const proxy = env.HTTPS_PROXY || env.https_proxy;
  if (!proxy || server.protocol !== 'https:') return undefined;
  const host = server.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = server.port || '443';
  if (host === 'localhost' || inRange(host, ['127.0.0.0/8', '::1/128'])) return undefined;
  const noProxy = (env.NO_PROXY || env.no_proxy || '').split(',').map((e) => e.trim().toLowerCase()).filter(Boolean);
  if (noProxy.some((entry) => bypasses(entry, host, port))) return undefined;
  return checked(/^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `http://${proxy}`, 'HTTPS_PROXY');
}

/** The proxy URL if Node can tunnel through it; errors leave out its credentials. */
function checked(proxy: string, setting: string): string {
  let url: URL;
  try {
    url = new URL(proxy);
  } catch {
    throw new Error(`${setting}: not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`${setting} ${url.protocol}//${url.host}: ${url.protocol.slice(0, -1)} proxies are not supported (http and https only)`);
  }
  return proxy;
}

function bypasses(entry: string, host: string, port: string): boolean {
  if (entry === '*') return true;
  if (entry.includes('/')) return inRange(host, [entry]);
  const [name, entryPort] = splitPort(entry);
  if (entryPort !== undefined && entryPort !== port) return false;
  const family = isIP(name);
  if (family) return inRange(host, [`${name}/${family === 4 ? 32 : 128}`]);
  if (isIP(host)) return false;
  const domain = name.replace(/^\*\./, '.');
  return domain.startsWith('.') ? host.endsWith(domain) : host === domain || host.endsWith(`.${domain}`);
}

/** `[v6]:port`, `v4:port` or `name:port`, or no port (a bare IPv6 address has several colons). */
function splitPort(entry: string): [string, string | undefined] {
  const bracketed = /^\[(.+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return [bracketed[1]!, bracketed[2]];
  const colon = entry.indexOf(':');
  return colon > 0 && colon === entry.lastIndexOf(':') ? [entry.slice(0, colon), entry.slice(colon + 1)] : [entry, undefined];
}

/** Whether an IP address lies in one of the CIDR ranges (false for a name or a malformed range). */
function inRange(host: string, ranges: string[]): boolean {
  const family = isIP(host);
  if (!family) return false;
  const list = new BlockList();
  for (const range of ranges) {
    const [net, bits] = range.split('/');
    const netFamily = isIP(net!);
    if (!netFamily || !/^\d+$/.test(bits ?? '')) continue;
    try {
      list.addSubnet(net!, Number(bits), netFamily === 6 ? 'ipv6' : 'ipv4');
    } catch {
      continue; // a prefix length out of range: the entry matches nothing, as a malformed one does
    }
  }
  return list.check(host, family === 6 ? 'ipv6' : 'ipv4');
}
