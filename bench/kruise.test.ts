import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { KruiseResult, MemorySample } from './kruise.ts';
import { crdName, kruiseDaemonArgs, kruiseTargets, kubeletWorkingSetMiB, memoryCgroupPath, parseMemoryStat, summarizeMemory, workingSetBytes } from './kruise.ts';
import { parseMetrics } from './stats.ts';

const MiB = 1024 * 1024;

// memory.stat of a cgroup v1 container: its own counters, then the hierarchy's (total_*).
const STAT = [
  'cache 52428800', 'rss 20971520', 'inactive_file 10485760', 'active_file 41943040',
  'total_cache 52428800', 'total_rss 20971520', 'total_inactive_file 31457280', 'total_active_file 20971520',
  'hierarchical_memory_limit 201326592', '',
].join('\n');

describe('the kruise part: working set from the memory cgroup (cgroup v1)', () => {
  it('reads memory.stat as numbers by key', () => {
    const stat = parseMemoryStat(STAT);
    assert.equal(stat.get('total_inactive_file'), 31457280);
    assert.equal(stat.get('rss'), 20971520);
    assert.equal(stat.size, 9);
  });

  it('is usage minus total_inactive_file, as kubelet computes it (not the cgroup\'s own inactive_file)', () => {
    assert.equal(workingSetBytes(80 * MiB, STAT), 80 * MiB - 30 * MiB);
  });

  it('is never below 0', () => {
    assert.equal(workingSetBytes(10 * MiB, STAT), 0);
  });

  it('finds kubelet\'s own figure of a container in its resource metrics', () => {
    const metrics = parseMetrics([
      'container_memory_working_set_bytes{container="agent",namespace="sidecar-terminator",pod="a-1"} 3.3554432e+07 1764380000000',
      'container_memory_working_set_bytes{container="daemon",namespace="kruise-system",pod="k-1"} 19505152 1764380000000',
      'pod_memory_working_set_bytes{namespace="kruise-system",pod="k-1"} 20000000 1764380000000',
    ].join('\n'));
    assert.equal(kubeletWorkingSetMiB(metrics, 'sidecar-terminator', 'a-1', 'agent'), 32);
    assert.equal(kubeletWorkingSetMiB(metrics, 'kruise-system', 'k-1', 'daemon'), 18.6);
    assert.equal(kubeletWorkingSetMiB(metrics, 'kruise-system', 'k-1', 'agent'), null);
  });

  it('refuses a memory.stat without total_inactive_file', () => {
    assert.throws(() => workingSetBytes(10 * MiB, 'cache 1\nrss 2\n'), /total_inactive_file/);
  });

  it('finds the memory cgroup among the v1 hierarchies, also when it shares a line with other controllers', () => {
    const path = '/kubepods/besteffort/pod1234/abcdef';
    assert.equal(memoryCgroupPath(`12:pids:/x\n9:memory:${path}\n1:name=systemd:/y\n0::/\n`), path);
    assert.equal(memoryCgroupPath(`4:memory,hugetlb:${path}\n`), path);
    assert.throws(() => memoryCgroupPath('0::/kubepods.slice/x\n'), /no memory controller/);
  });
});

const sample = (i: number, rssMiB: number, wsMiB: number, cpuSeconds: number): MemorySample => ({
  tMs: 1_000_000 + i * 2000, rssBytes: rssMiB * MiB, rssAnonBytes: (rssMiB - 40) * MiB, rssFileBytes: 40 * MiB,
  usageBytes: (wsMiB + 30) * MiB, workingSetBytes: wsMiB * MiB, cpuSeconds,
});

describe('the kruise part: the summary', () => {
  it('gives median and max in MiB, the splits\' medians and CPU over the window', () => {
    const s = summarizeMemory([sample(0, 70, 28, 10), sample(1, 72, 30, 10.01), sample(2, 71, 29.5, 10.02), sample(3, 75, 31, 10.03), sample(4, 70.5, 28.2, 10.04)]);
    assert.deepEqual(s.rssMiB, { median: 71, max: 75 });
    assert.deepEqual(s.workingSetMiB, { median: 29.5, max: 31 });
    assert.equal(s.rssFileMiB, 40);
    assert.equal(s.rssAnonMiB, 31);
    assert.equal(s.cgroupUsageMiB, 59.5);
    assert.equal(s.samples, 5);
    // 0.04 s of CPU over 8 s.
    assert.equal(s.cpuMillicores, 5);
  });

  it('refuses no samples', () => {
    assert.throws(() => summarizeMemory([]), /no samples/);
  });
});

describe('the kruise part: targets', () => {
  const result = (agentWs: number, kruiseWs: number, agentRss: number): KruiseResult => {
    const memory = (ws: number, rss: number) => ({
      pod: 'p', container: 'c', cgroup: '/x', samples: 31, rssMiB: { median: rss, max: rss + 2 }, workingSetMiB: { median: ws, max: ws + 1 },
      rssAnonMiB: 1, rssFileMiB: 1, cgroupUsageMiB: 1, cpuMillicores: 1, kubeletWorkingSetMiB: null, rssSamplesMiB: [], workingSetSamplesMiB: [],
    });
    return {
      method: '',
      kruise: { version: 'v1.9.0', module: '', image: '', args: [], pod: '', restarts: 0, serving: [], duringWindow: { logLines: 0, logExcerpt: [], containerRecreateRequests: 0, nodeImages: 0, nodePodProbes: 0 } },
      benchPods: 100, podsStartSeconds: 60, podsOnNode: 104, windowSeconds: 60, everySeconds: 2,
      beforePods: { podsOnNode: 4, agent: memory(1, 1), kruiseDaemon: memory(1, 1) },
      agent: memory(agentWs, agentRss), kruiseDaemon: memory(kruiseWs, 62), ratio: { workingSet: 1, rss: 1 },
    };
  };

  it('compares the medians of the working sets, and the agent\'s RSS median with 66 MiB', () => {
    const [ws, rss] = kruiseTargets(result(25, 30, 70));
    assert.equal(ws!.met, true);
    assert.match(ws!.value, /^25 vs 30 MiB \(max 26 vs 31\)$/);
    assert.match(ws!.what, /v1\.9\.0.*104 Pods/);
    assert.equal(rss!.met, false);
    assert.match(rss!.what, /kruise-daemon's median 62 MiB/);
    const [ws2, rss2] = kruiseTargets(result(30.1, 30, 66));
    assert.equal(ws2!.met, false);
    assert.equal(rss2!.met, true);
  });

  it('reports both rows as not measured without the part', () => {
    const rows = kruiseTargets(undefined);
    assert.equal(rows.length, 2);
    assert.ok(rows.every((r) => r.met === null && r.value === 'not measured'));
  });
});

describe('the kruise part: how kruise-daemon runs', () => {
  it('takes the chart\'s flags with the socket named', () => {
    assert.deepEqual(kruiseDaemonArgs('containerd.sock'), ['--logtostderr=true', '--v=4', '--addr=:10221', '--feature-gates=', '--socket-file=containerd.sock', '--enable-pprof=false']);
  });

  it('names a CRD from its file', () => {
    assert.equal(crdName('/cache/crds/apps.kruise.io_nodeimages.yaml'), 'nodeimages.apps.kruise.io');
  });
});
