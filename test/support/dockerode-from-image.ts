// Loaded with `--import` before the Docker path's tests: `dockerode` then resolves from the image's
// own node_modules (ST_IMAGE_APP, the image's /app as e2e/images/build-dockerfile.sh extracts it)
// instead of the project's, so the tests run what the image ships. Whatever a module of the image
// requires must resolve inside the image: a package the image lacks fails here rather than being
// found in a node_modules above it. Each resolution of dockerode is appended to ST_IMAGE_RESOLUTIONS.
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const app = process.env.ST_IMAGE_APP;
const log = process.env.ST_IMAGE_RESOLUTIONS;
if (!app || !log) throw new Error('dockerode-from-image.ts: set ST_IMAGE_APP (the image\'s /app) and ST_IMAGE_RESOLUTIONS (a file)');
const appUrl = `${pathToFileURL(app).href}/`;
const bundleUrl = pathToFileURL(join(app, 'dist/main.js')).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === 'dockerode') {
      const resolved = nextResolve(specifier, { ...context, parentURL: bundleUrl });
      appendFileSync(log, `${resolved.url}\n`);
      return resolved;
    }
    const resolved = nextResolve(specifier, context);
    if (context.parentURL?.startsWith(appUrl) && resolved.url.startsWith('file:') && !resolved.url.startsWith(appUrl)) {
      throw new Error(`${specifier}, required by ${context.parentURL}, resolved outside the image: ${resolved.url}`);
    }
    return resolved;
  },
});
