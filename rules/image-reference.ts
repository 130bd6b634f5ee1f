// Image references as the runtime names them: the short forms a Pod spec may use ("busybox",
// "team/app:1") spelled out as containerd and kubelet report them ("docker.io/library/busybox:latest").
// Only for telling whether two references name the same image; a pair it cannot match counts as different.

const DEFAULT_DOMAIN = 'docker.io';
const OFFICIAL_PATH = 'library';

/** The reference in full: domain, path, and a tag (`latest` when it names neither tag nor digest). */
export function normalizedImage(reference: string): string {
  const ref = reference.trim();
  const slash = ref.indexOf('/');
  const first = slash < 0 ? '' : ref.slice(0, slash);
  // The first component is a domain when it looks like one (a dot, a port) or is localhost.
  const hasDomain = slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  let named = hasDomain ? ref : `${DEFAULT_DOMAIN}/${slash < 0 ? `${OFFICIAL_PATH}/` : ''}${ref}`;
  const lastSegment = named.slice(named.lastIndexOf('/') + 1);
  if (!named.includes('@') && !lastSegment.includes(':')) named += ':latest';
  return named;
}

/** Whether the two references name the same image, as far as their text says. */
export function sameImage(a: string, b: string): boolean {
  return normalizedImage(a) === normalizedImage(b);
}

/** The repository of a reference in full (domain and path), without its tag or digest. */
export function repositoryOf(reference: string): string {
  const full = normalizedImage(reference);
  const at = full.indexOf('@');
  const named = at < 0 ? full : full.slice(0, at);
  const colon = named.lastIndexOf(':');
  return colon > named.lastIndexOf('/') ? named.slice(0, colon) : named;
}

/**
 * Whether `reference` is on `allowed`: an entry with a tag or digest allows that image alone, an
 * entry naming a repository only allows any tag or digest of it.
 */
export function imageAllowed(reference: string, allowed: readonly string[]): boolean {
  return allowed.some((entry) => {
    const bare = entry.trim();
    const pinned = bare.includes('@') || bare.slice(bare.lastIndexOf('/') + 1).includes(':');
    return pinned ? sameImage(bare, reference) : repositoryOf(bare) === repositoryOf(reference);
  });
}
