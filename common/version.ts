// The project's version, from package.json (inlined into the bundle by esbuild).
import pkg from '../package.json' with { type: 'json' };

export const VERSION: string = pkg.version;
