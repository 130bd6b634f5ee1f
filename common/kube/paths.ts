// REST paths of Kubernetes resources.

/** `/api/v1/...` for the core group, `/apis/GROUP/VERSION/...` for the others. */
export function resourcePath(groupVersion: string, resource: string, namespace?: string, name?: string, subresource?: string): string {
  const parts = [groupVersion.includes('/') ? `/apis/${groupVersion}` : `/api/${groupVersion}`];
  if (namespace) parts.push('namespaces', encodeURIComponent(namespace));
  parts.push(resource);
  if (name) parts.push(encodeURIComponent(name));
  if (subresource) parts.push(subresource);
  return parts.join('/');
}

export const podPath = (namespace?: string, name?: string, subresource?: string) => resourcePath('v1', 'pods', namespace, name, subresource);
