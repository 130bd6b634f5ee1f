// Our parts' health while a test attacks them: restarts, OOM kills, memory limits and peak RSS.
import type { V1Pod } from '@kubernetes/client-node';
import { clients } from './cluster.ts';
import { NAMESPACE, podMetric } from './deploy.ts';
import { sleep } from './wait.ts';

/** The limit the deployed manifests give a part's container. */
export function memoryLimit(pod: V1Pod): string {
  return pod.spec?.containers[0]?.resources?.limits?.memory ?? 'none';
}

/** Restarts of every container of our parts' Pods, and whether any was OOM-killed. */
export async function health(): Promise<{ restarts: Record<string, number>; oomKilled: string[] }> {
  const pods = (await clients().core.listNamespacedPod({ namespace: NAMESPACE })).items;
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
export function peakRss(pod: () => Promise<V1Pod>, port: number): () => Promise<number> {
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

const MiB = 1024 * 1024;
export const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;
