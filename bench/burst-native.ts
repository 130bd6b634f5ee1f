// Part 2's control: the same burst with the sidecar declared as a native sidecar (an init container
// with restartPolicy Always), so kubelet alone stops it. Shows how much of the burst's latency is
// the node (kubelet and containerd under 100 simultaneous exits) rather than sidecar-terminator.
import { closeSync, constants, existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { clusterEnv } from '../e2e/support/cluster.ts';
import type { Context } from './context.ts';
import { SIDECAR_SCRIPT, busybox, createJob, createNamespace, deleteNamespace, jobBody, listPods, nsToMs, runtimeContainer, sleep, statusOf } from './context.ts';
import { pool } from './kube.ts';
import type { Summary } from './stats.ts';
import { summarize } from './stats.ts';

export interface NativeBurstResult {
  method: string;
  jobs: number;
  mainFinishSpreadMs: number;
  mainToSidecarMs: Summary;
  samplesMs: number[];
  /** Sidecars not finished 30 s after their main. */
  missed: number;
}

const MISSED_AFTER_MS = 30_000;

export async function runNativeBurst(ctx: Context, jobs = 100): Promise<NativeBurstResult> {
  const dir = join(clusterEnv().clusterDir, 'bench-burst-native');
  mkdirSync(dir, { recursive: true });
  const fifo = join(dir, 'go');
  if (existsSync(fifo)) rmSync(fifo);
  execFileSync('mkfifo', ['-m', '0644', fifo]);
  const namespace = await createNamespace(ctx, 'bench-burst-native');
  const names = Array.from({ length: jobs }, (_, i) => `native-burst-${String(i).padStart(3, '0')}`);
  try {
    const t0 = Date.now();
    await pool(names, 10, async (name) => {
      await createJob(ctx, namespace, jobBody(name, {
        initContainers: [busybox('proxy', SIDECAR_SCRIPT, { restartPolicy: 'Always' })],
        containers: [busybox('main', 'cat /go/go >/dev/null', { volumeMounts: [{ name: 'go', mountPath: '/go', readOnly: true }] })],
        volumes: [{ name: 'go', hostPath: { path: dir, type: 'Directory' } }],
      }));
    });
    let pods: V1Pod[] = [];
    const running = (p: V1Pod) => ['main', 'proxy'].every((c) => statusOf(p, c)?.state?.running);
    for (let i = 0; ; i++) {
      pods = await listPods(ctx, namespace);
      const n = pods.filter(running).length;
      if (n === jobs) break;
      if (i % 10 === 0) ctx.log(`native burst: ${n}/${jobs} Pods running`);
      if (Date.now() - t0 > 420_000) throw new Error(`only ${n}/${jobs} native burst Pods running after 420 s`);
      await sleep(2000);
    }
    ctx.log(`native burst: all ${jobs} Pods running after ${((Date.now() - t0) / 1000).toFixed(0)} s; settling 15 s, then firing`);
    await sleep(15_000);
    const fireMs = Date.now();
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    for (;;) {
      await sleep(500);
      pods = await listPods(ctx, namespace);
      if (pods.filter((p) => statusOf(p, 'proxy')?.state?.terminated).length === jobs || Date.now() - fireMs > MISSED_AFTER_MS + 5_000) break;
    }
    await sleep(2000);
    pods = await listPods(ctx, namespace);
    const latencies: number[] = [];
    const mainEnds: number[] = [];
    let missed = 0;
    for (const pod of pods) {
      const main = await runtimeContainer(ctx, pod, 'main');
      const proxy = await runtimeContainer(ctx, pod, 'proxy');
      if (!main?.finishedAtNs) { missed++; continue; }
      const mainMs = nsToMs(main.finishedAtNs);
      mainEnds.push(mainMs);
      if (!proxy?.finishedAtNs || nsToMs(proxy.finishedAtNs) - mainMs > MISSED_AFTER_MS) { missed++; continue; }
      latencies.push(Math.round((nsToMs(proxy.finishedAtNs) - mainMs) * 10) / 10);
    }
    return {
      method: `${jobs} Jobs as in part 2, the sidecar an init container with restartPolicy Always (no marker: kubelet stops it), fired the same way.`,
      jobs,
      mainFinishSpreadMs: Math.round(Math.max(...mainEnds) - Math.min(...mainEnds)),
      mainToSidecarMs: summarize(latencies),
      samplesMs: latencies,
      missed,
    };
  } finally {
    await deleteNamespace(ctx, namespace);
    rmSync(dir, { recursive: true, force: true });
  }
}
