// The offline test images (e2e/images/build.sh), built once per test process into a temp dir that
// is removed when the process ends.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from './run.ts';
import { atProcessEnd } from './sweep.ts';

export const BUSYBOX_IMAGE = 'sidecar-terminator.local/busybox:1';
export const PAUSE_IMAGE = 'sidecar-terminator.local/pause:1';

export interface TestImages {
  dir: string;
  /** OCI archive of BUSYBOX_IMAGE (cmd sh). */
  busybox: string;
  /** OCI archive of PAUSE_IMAGE. */
  pause: string;
  /** The bare rootfs layer, for `docker import`. */
  rootfs: string;
}

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

let images: Promise<TestImages> | undefined;

export function testImages(): Promise<TestImages> {
  images ??= build();
  return images;
}

async function build(): Promise<TestImages> {
  const dir = mkdtempSync(join(tmpdir(), 'st-images-'));
  atProcessEnd(() => rmSync(dir, { recursive: true, force: true }));
  await run('bash', [join(REPO_ROOT, 'e2e/images/build.sh'), dir]);
  return {
    dir,
    busybox: join(dir, 'busybox.tar'),
    pause: join(dir, 'pause.tar'),
    rootfs: join(dir, 'rootfs.tar'),
  };
}
