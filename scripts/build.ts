// `npm run build [OUT_DIR]`: one ES module, OUT_DIR/main.js (default dist/), with every dependency
// but dockerode inlined. One bundled file loads with much less memory than hundreds of modules
// (measured: 14 MiB less resident for the agent), which matters for a daemon on every node.
// dockerode stays in node_modules: the agent imports it only on nodes with a Docker socket.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

const outDir = process.argv[2] ?? 'dist';
rmSync(outDir, { recursive: true, force: true });
await build({
  entryPoints: ['main.ts'],
  outfile: join(outDir, 'main.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  external: ['dockerode'],
  // The CommonJS dependencies (grpc-js, protobufjs, winston) require() Node's built-in modules.
  banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  sourcemap: 'linked',
  logLevel: 'warning',
});
