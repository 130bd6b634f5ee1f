// The namespaces a second e2e cluster runs in beside one on the host's network
// (e2e/cluster/own-network.sh), and the machine's kernel settings that the clusters share
// (claim_host and release_host in e2e/cluster/lib.sh): tried for real, as root.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function bash(script: string, env: Record<string, string> = {}): string {
  const run = spawnSync('bash', ['-c', script], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout;
}

describe('own-network.sh', () => {
  it('runs its command with a network of its own (a default route, no host link) and private /run, /var/lib and /var/log (besides the libmount directory)', () => {
    const hostRun = readdirSync('/run').sort();
    const inside = bash(`bash e2e/cluster/own-network.sh bash -c '
      ip -4 route show default; ip -o link show | cut -d: -f2 | tr -d " " | sort | tr "\\n" " "; echo
      for d in /run /var/lib /var/log; do echo "$d $(stat -f -c %T "$d") $(ls -A "$d" | grep -vx mount | wc -l)"; done
      touch /run/made-inside'`).split('\n');
    assert.match(inside[0]!, /^default via 10\.211\.0\.1 dev st-node onlink/);
    assert.equal(inside[1]!.trim(), 'lo st-node-peer@st-node st-node@st-node-peer');
    assert.deepEqual(inside.slice(2, 5), ['/run tmpfs 0', '/var/lib tmpfs 0', '/var/log tmpfs 0']);
    assert.equal(existsSync('/run/made-inside'), false);
    assert.deepEqual(readdirSync('/run').sort(), hostRun);
  });
});

describe('the machine settings clusters share', () => {
  it('are saved by the first cluster up and restored only by the last one down', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'host-claims-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const claims = path.join(dir, 'claims');
    const out = bash(`
      set -euo pipefail
      source e2e/cluster/lib.sh
      claim() { ST=$1; claim_host; }
      release() { ST=$1; release_host; echo "released $1: $(ls "$HOST_CLAIMS/clusters" 2>/dev/null | tr "\\n" " ")"; }
      before=$(sysctl -n kernel.panic)
      claim /tmp/first; cp "$HOST_CLAIMS/sysctl.orig" "$HOST_CLAIMS.first"
      sysctl -qw kernel.panic=$(( before + 9 ))  # as the first cluster's kubelet does
      claim /tmp/second
      cmp "$HOST_CLAIMS/sysctl.orig" "$HOST_CLAIMS.first" && echo "the second claim kept the first one's copy"
      release /tmp/first
      claim /tmp/third
      release /tmp/second
      [ "$(sysctl -n kernel.panic)" = $(( before + 9 )) ] && echo "changed while a cluster is up"
      release /tmp/third
      [ "$(sysctl -n kernel.panic)" = "$before" ] && echo "restored by the last one down"
      [ -e "$HOST_CLAIMS" ] || echo "no claims left"`, { ST_HOST_CLAIMS: claims });
    assert.deepEqual(out.trim().split('\n'), [
      "the second claim kept the first one's copy",
      'released /tmp/first: _tmp_second ',
      'released /tmp/second: _tmp_third ',
      'changed while a cluster is up',
      'released /tmp/third: ',
      'restored by the last one down',
      'no claims left',
    ]);
    const saved = readFileSync(`${claims}.first`, 'utf8');
    assert.match(saved, /^vm\.overcommit_memory=\d+$/m);
    assert.doesNotMatch(saved, /^net\./m, "a network's settings are its own, not the machine's");
  });
});
