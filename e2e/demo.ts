// The demo: on the local cluster, sidecar-terminator deployed from its manifests, a Job whose
// Pod has a main container and a sidecar that never exits by itself; prints what happened, timed
// by containerd's own nanosecond clock for the containers and by the demo's watches for the rest.
import { setTimeout as sleep } from 'node:timers/promises';
import * as k8s from '@kubernetes/client-node';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { CriRuntime } from '../agent/runtime/cri.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { container, finishedJob, onlyPod, podEvents, requestsFor, runJob, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { deployProject } from './support/deploy.ts';

const NAMESPACE = 'demo';

interface Milestones { requestSeenMs?: number; jobDoneMs?: number; jobDoneSeen: Promise<void>; stop: () => void }

/** When the demo saw the first request for the Job's Pod, and the Job's end, on a watch (ms). */
async function watchMilestones(kc: k8s.KubeConfig): Promise<Milestones> {
  const jobDone = Promise.withResolvers<void>();
  const seen: Milestones = { jobDoneSeen: jobDone.promise, stop: () => undefined };
  const watch = new k8s.Watch(kc);
  const ignore = () => undefined;
  // From any version the API server's cache has (the namespace is new: nothing to replay). A watch
  // from the latest version waits for that cache to catch up; on the local 1.37 cluster (Debian's
  // etcd 3.4) it ended at once with 504 "Too large resource version", so the demo saw nothing.
  const fromCache = { resourceVersion: '0' };
  const requests = await watch.watch(`/apis/sidecar-terminator.dev/v1alpha1/namespaces/${NAMESPACE}/containerrecreaterequests`, fromCache, (type) => {
    if (type === 'ADDED') seen.requestSeenMs ??= Date.now();
  }, ignore);
  const jobs = await watch.watch(`/apis/batch/v1/namespaces/${NAMESPACE}/jobs`, fromCache, (_type, job: V1Job) => {
    if (job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')) {
      seen.jobDoneMs ??= Date.now();
      jobDone.resolve();
    }
  }, ignore);
  seen.stop = () => { requests.abort(); jobs.abort(); };
  return seen;
}

async function runtimeFinishedMs(cri: CriRuntime, pod: V1Pod, name: string): Promise<number | undefined> {
  const id = pod.status?.containerStatuses?.find((s) => s.name === name)?.containerID?.replace(/^containerd:\/\//, '');
  const status = id ? await cri.status(id) : undefined;
  return status?.finishedAtNs ? Number(status.finishedAtNs / 1000n) / 1000 : undefined;
}

async function main(): Promise<void> {
  const { core, kc } = clients();
  console.log('demo: deploying sidecar-terminator with kubectl apply -k (image built offline, about 30 s)');
  await deployProject();
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  const milestones = await watchMilestones(kc);
  console.log('demo: Job "report": main container runs 3 s; sidecar "log-shipper" loops forever (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true)');
  await runJob(NAMESPACE, 'report', {
    restartPolicy: 'Never',
    containers: [container('main', 'echo working; sleep 3; echo done'), container('log-shipper', stopOnTerm(0), { env: [SIDECAR_MARK] })],
  });
  const { type } = await finishedJob(NAMESPACE, 'report');
  // The poll can see the Job's end before the watch delivers it; the timeline wants the watch's time.
  const giveUp = new AbortController();
  await Promise.race([milestones.jobDoneSeen, sleep(10_000, undefined, { signal: giveUp.signal }).catch(() => undefined)]);
  giveUp.abort();
  milestones.stop();
  const pod = await onlyPod(NAMESPACE, 'report');
  const [request] = await requestsFor(pod);
  console.log(`demo: Job ${type}`);

  const cri = await CriRuntime.connect(clusterEnv().containerdSocket);
  const mainMs = await runtimeFinishedMs(cri, pod, 'main');
  const sidecarMs = await runtimeFinishedMs(cri, pod, 'log-shipper');
  cri.close();
  const after = (ms: number | undefined) => (ms === undefined || mainMs === undefined ? '-' : `+${(ms - mainMs).toFixed(1)} ms`);
  console.log('demo: timeline (containers: containerd\'s own clock; request and Job: when the demo\'s watches saw them)');
  // In the order they happened: the agent stops the sidecar before it records the request, so the
  // request can be seen after the sidecar finished.
  const timeline: [string, number | undefined][] = [['main finished', mainMs], ['sidecar stop requested', milestones.requestSeenMs], ['sidecar finished', sidecarMs], [`Job ${type}`, milestones.jobDoneMs]];
  timeline.sort(([, a], [, b]) => (a ?? Infinity) - (b ?? Infinity));
  for (const [what, ms] of timeline) console.log(`demo:   ${what.padEnd(24)} ${after(ms)}`);
  if (request) {
    const state = request.status?.containerRecreateStates?.[0];
    console.log(`demo: ContainerRecreateRequest ${request.metadata.name}: ${request.status?.phase}, ${state?.name} ${state?.phase} (exit code ${state?.exitCode})`);
  }
  for (const e of await podEvents(pod)) console.log(`demo: event ${e}`);
  if (type !== 'Complete') process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
