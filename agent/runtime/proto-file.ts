// The protos under proto/, found from the source tree (agent/runtime/), tsc's output
// (dist/agent/runtime/) or the bundled image (dist/main.js).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function protoFile(name: string): string {
  const candidates = ['../../proto/', '../../../proto/', '../proto/'].map((dir) => fileURLToPath(new URL(dir + name, import.meta.url)));
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`proto ${name} not found; looked at ${candidates.join(', ')}`);
  return found;
}
