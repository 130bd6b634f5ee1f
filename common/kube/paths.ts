// REST paths of Kubernetes resources.

/**
 * A name the API server accepts for a namespace or an object we address by name (a DNS subdomain:
 * lowercase letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter
 * or digit). Never `.`, `..`, empty or with a '/': URL resolution would turn `…/pods/.` into the
 * collection `…/pods/`, an unpaged LIST, and `..` into the parent.
 */
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const MAX_NAME_LENGTH = 253;

export function isValidName(name: string): boolean {
  return name.length <= MAX_NAME_LENGTH && NAME.test(name) && !name.includes('..');
}

/** A subresource we address: lowercase letters only (status, log, eviction, ...). */
const SUBRESOURCE = /^[a-z]+$/;

function segment(what: string, value: string, valid: (v: string) => boolean): string {
  if (!valid(value)) throw new Error(`invalid ${what} ${JSON.stringify(value.slice(0, 300))}: not a name the API server can have`);
  return value;
}

/**
 * `/api/v1/...` for the core group, `/apis/GROUP/VERSION/...` for the others. A namespace, name or
 * subresource that is given (even empty) must be valid: a bad one throws, never a path that reads
 * something else.
 */
export function resourcePath(groupVersion: string, resource: string, namespace?: string, name?: string, subresource?: string): string {
  const parts = [groupVersion.includes('/') ? `/apis/${groupVersion}` : `/api/${groupVersion}`];
  if (namespace !== undefined) parts.push('namespaces', segment('namespace', namespace, isValidName));
  parts.push(resource);
  if (name !== undefined) parts.push(segment('name', name, isValidName));
  if (subresource !== undefined) parts.push(segment('subresource', subresource, (s) => SUBRESOURCE.test(s)));
  return parts.join('/');
}

export const podPath = (namespace?: string, name?: string, subresource?: string) => resourcePath('v1', 'pods', namespace, name, subresource);
