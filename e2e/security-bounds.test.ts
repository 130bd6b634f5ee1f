// Hostile namespaces, round three: what a namespace's user can make big is bounded before our parts
// read it, on the real cluster with the shipped memory limits (R48).
// - A request with more labels or annotations than the admission policy allows (1.30+) is refused.
// - Exec hooks writing 15 MB each, four in one Pod, beside five Pods whose hooks take 20 s: the
//   agent holds 64 KiB of any hook's output; it does not restart, and every 20 s hook runs to its end.
// The peak memory of each part under each attack is printed against its limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../api/container-recreate-request.ts';
import { EVENT_REASONS } from '../api/names.ts';
import { apiStatus, clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { NAMESPACE, agentPod, deployProject, podMetric } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { sleep } from './support/wait.ts';

const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const features = versionFeatures();
const AGENT_METRICS_PORT = 9440;
const MiB = 1024 * 1024;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

let ns: string;

function request(namespace: string, name: string, podName: string, labels: Record<string, string>, annotations?: Record<string, string>) {
  return custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, body: {
    apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest',
    metadata: { name, namespace, labels, ...(annotations ? { annotations } : {}) },
    spec: { podName, containers: [{ name: 'proxy' }] },
  } });
}

/** The limit the deployed manifests give a part's container. */
function memoryLimit(pod: V1Pod): string {
  return pod.spec?.containers[0]?.resources?.limits?.memory ?? 'none';
}

/** Restarts of every container of our parts' Pods, and whether any was OOM-killed. */
async function health(): Promise<{ restarts: Record<string, number>; oomKilled: string[] }> {
  const pods = (await core.listNamespacedPod({ namespace: NAMESPACE })).items;
  const restarts: Record<string, number> = {};
  const oomKilled: string[] = [];
  for (const p of pods) {
    for (const s of p.status?.containerStatuses ?? []) {
      restarts[p.metadata!.name!] = (restarts[p.metadata!.name!] ?? 0) + s.restartCount;
      if (s.lastState?.terminated?.reason === 'OOMKilled' || s.state?.terminated?.reason === 'OOMKilled') oomKilled.push(p.metadata!.name!);
    }
  }
  return { restarts, oomKilled };
}

/** Samples the RSS of a part every second until stopped; the highest seen. */
function peakRss(pod: () => Promise<V1Pod>, port: number) {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        peak = Math.max(peak, await podMetric(await pod(), port, 'process_resident_memory_bytes'));
      } catch {
        // A Pod between leaders, or restarting: the next sample.
      }
      await sleep(1_000);
    }
  })();
  return async () => {
    running = false;
    await loop;
    return peak;
  };
}

describe('security: hostile namespaces, round three (R48)', { timeout: 1_200_000 }, () => {
  before(async () => {
    await deployProject();
    ns = await createTestNamespace(core, 'bounds');
  });
  after(async () => {
    if (ns) await deleteTestNamespace(core, ns);
  });

  const noPolicies = !features.admissionPolicies && `Kubernetes ${clusterEnv().k8sVersion} serves no ValidatingAdmissionPolicy v1 (1.30+)`;
  it('1.30+: a request with more than 32 labels, or 16 KiB of annotations, is refused by the API server', { skip: noPolicies }, async () => {
    const refused = async (name: string, labels: Record<string, string>, annotations?: Record<string, string>) => {
      const err = await request(ns, name, 'nothing', labels, annotations).then(() => undefined, (e: unknown) => e);
      assert.equal(apiStatus(err), 422, `${name}: ${String(err)}`);
      assert.match(String((err as { body?: unknown }).body ?? err), /request-metadata\.sidecar-terminator\.dev/);
    };
    await refused('many-labels', Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`l${i}`, 'v'])));
    await refused('fat-annotation', {}, { note: 'x'.repeat(16_400) });
    // Within the bounds: stored.
    await request(ns, 'within-bounds', 'nothing', Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`l${i}`, 'v'])), { note: 'x'.repeat(1_000) });
  });

  it('four hooks writing 15 MB each in one Pod, beside five Pods whose hooks take 20 s: no restart, every 20 s hook runs to its end', async (t) => {
    const before = await health();
    const limit = memoryLimit(await agentPod());
    const agentPeak = peakRss(agentPod, AGENT_METRICS_PORT);
    const sidecar = (name: string, hook: string): V1Container => container(name, 'trap \'echo "got SIGTERM"; exit 0\' TERM; while :; do sleep 1 & wait $!; done', {
      env: [SIDECAR_MARK],
      lifecycle: { preStop: { exec: { command: ['sh', '-c', hook] } } },
    });
    const flood = 'head -c 15000000 /dev/zero | tr "\\0" x; echo "flooded" > /proc/1/fd/1';
    const slow = 'echo "hook started" > /proc/1/fd/1; sleep 20; echo "hook ended" > /proc/1/fd/1';
    // Every main ends at the same moment: the hooks run side by side.
    const at = Math.ceil(Date.now() / 1000) + 40;
    const main = container('main', `while [ $(date +%s) -lt ${at} ]; do sleep 0.2; done; echo main done`);
    await jobs.runJob(ns, 'flood', { restartPolicy: 'Never', grace: 30, containers: [main, ...['a', 'b', 'c', 'd'].map((n) => sidecar(`flood-${n}`, flood))] });
    const slowJobs = Array.from({ length: 5 }, (_, i) => `slow-${i}`);
    for (const name of slowJobs) await jobs.runJob(ns, name, { restartPolicy: 'Never', grace: 30, containers: [main, sidecar('proxy', slow)] });
    for (const name of ['flood', ...slowJobs]) assert.equal((await jobs.finishedJob(ns, name, 180_000)).type, 'Complete', name);
    const peak = await agentPeak();
    t.diagnostic(`agent peak RSS ${mib(peak)} (limit ${limit})`);
    const flooded = await jobs.onlyPod(ns, 'flood');
    for (const n of ['a', 'b', 'c', 'd']) {
      const lines = timestampedLogs(ns, flooded.metadata!.name!, `flood-${n}`);
      const hook = firstLine(lines, /^flooded$/);
      const term = firstLine(lines, /^got SIGTERM$/);
      assert.ok(hook && term && hook.atMs <= term.atMs, `flood-${n}: the hook ran to its end before SIGTERM:\n${showLines(lines)}`);
    }
    const events = await jobs.podEvents(flooded);
    assert.ok(events.some((e) => e.startsWith(`Warning ${EVENT_REASONS.failedPreStopHook}`) && /more than 65536 bytes of output/.test(e)), events.join('\n'));
    for (const name of slowJobs) {
      const pod = await jobs.onlyPod(ns, name);
      const lines = timestampedLogs(ns, pod.metadata!.name!, 'proxy');
      const started = firstLine(lines, /^hook started$/);
      const ended = firstLine(lines, /^hook ended$/);
      const term = firstLine(lines, /^got SIGTERM$/);
      assert.ok(started && ended && term && ended.atMs - started.atMs >= 19_000 && term.atMs >= ended.atMs, `${name}: the 20 s hook ran to its end, then SIGTERM:\n${showLines(lines)}`);
    }
    const after = await health();
    assert.deepEqual(after.oomKilled, [], 'no part OOM-killed');
    const agent = (await agentPod()).metadata!.name!;
    assert.equal(after.restarts[agent], before.restarts[agent], 'the agent did not restart');
  });
});
