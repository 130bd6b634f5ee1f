// The project's version, from package.json (inlined into the bundle by esbuild), and the commit it
// was built from when the build knew it (scripts/build.ts defines SIDECAR_TERMINATOR_COMMIT).
import pkg from '../package.json' with { type: 'json' };

export const VERSION: string = pkg.version;

/** The source commit, or '' when unknown (run from the sources, or built without git or SOURCE_COMMIT). */
export const COMMIT: string = process.env.SIDECAR_TERMINATOR_COMMIT ?? '';

/** What --version prints: `sidecar-terminator 0.1.0 (commit 1a2b3c4, node v24.11.0)`. */
export function versionText(): string {
  const commit = COMMIT ? `commit ${COMMIT.slice(0, 12)}, ` : '';
  return `sidecar-terminator ${VERSION} (${commit}node ${process.version})`;
}
