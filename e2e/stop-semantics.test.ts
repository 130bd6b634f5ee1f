// e2e group: shared
// Stop semantics as kubelet's, on the real kubelet and runtime: a sidecar is stopped with its
// `lifecycle.stopSignal`, and a `sleep` preStop action runs before the signal, within the grace
// period, and a sidecar named by the stop-last annotation is stopped after the others exited. Each test
// asserts what the sidecars themselves saw and when, from their own log lines as the
// runtime timestamped them, not only that the Job completed.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANNOTATION_STOP_LAST } from '../api/names.ts';
import { CriRuntime } from '../agent/runtime/cri.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { FLUSHING_SHIPPER, SIDECAR_MARK, SIGNAL_LOGGER, container } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { containerStatus } from './support/workloads.ts';

const { core } = clients();
let namespace: string;
const features = versionFeatures();

/** The main says when it is done, as its last line: its exit, to the millisecond. */
const MAIN = 'sleep 3; echo main done';

/**
 * Whether containerd applies the stop signal kubelet gives it at creation: 2.4 does (its CRI
 * StopContainer reads the container config's stop signal); 1.6 takes only the image's.
 */
async function runtimeAppliesStopSignal(): Promise<{ ok: boolean; version: string }> {
  const runtime = await CriRuntime.connect(clusterEnv().containerdSocket);
  try {
    const { runtimeVersion } = await runtime.version();
    const [major = 0, minor = 0] = (/(\d+)\.(\d+)/.exec(runtimeVersion) ?? []).slice(1).map(Number);
    return { ok: major > 2 || (major === 2 && minor >= 4), version: runtimeVersion };
  } finally {
    runtime.close();
  }
}

/** Runs the Job and returns, once it finished, its Pod and the main's and the sidecar's log lines. */
async function run(name: string, spec: Omit<jobs.JobSpec, 'restartPolicy'>) {
  await jobs.runJob(namespace, name, { restartPolicy: 'Never', ...spec });
  const { type } = await jobs.finishedJob(namespace, name, 90_000);
  const pod = await jobs.onlyPod(namespace, name);
  const podName = pod.metadata!.name!;
  const main = timestampedLogs(namespace, podName, 'main');
  const sidecar = timestampedLogs(namespace, podName, 'proxy');
  const mainDone = firstLine(main, /^main done$/);
  assert.ok(mainDone, `the main's log:\n${showLines(main)}`);
  return { type, pod, sidecar, mainDoneMs: mainDone.atMs, shown: `main:\n${showLines(main)}\nproxy:\n${showLines(sidecar)}` };
}

describe('stop semantics as kubelet\'s', () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'stop-semantics');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  const noStopSignal = !features.stopSignal && `Kubernetes ${clusterEnv().k8sVersion} has no lifecycle.stopSignal (ContainerStopSignals, 1.33+)`;
  it('a sidecar with lifecycle.stopSignal SIGUSR1 gets SIGUSR1, not SIGTERM, right after the main\'s exit', { skip: noStopSignal }, async (t) => {
    const runtime = await runtimeAppliesStopSignal();
    if (!runtime.ok) return t.skip(`containerd ${runtime.version} is not known to apply a container's stop signal (2.4 does; 1.6 takes the image's)`);
    const grace = 10;
    const { type, pod, sidecar, mainDoneMs, shown } = await run('stop-signal', {
      grace,
      // The API takes a stop signal only from a Pod that names its OS.
      os: { name: 'linux' },
      containers: [container('main', MAIN), container('proxy', SIGNAL_LOGGER, { env: [SIDECAR_MARK], lifecycle: { stopSignal: 'SIGUSR1' } })],
    });
    t.diagnostic(shown);
    const got = sidecar.filter((l) => /^got SIG/.test(l.text));
    assert.deepEqual(got.map((l) => l.text), ['got SIGUSR1'], shown);
    const afterMainMs = got[0]!.atMs - mainDoneMs;
    t.diagnostic(`main done → SIGUSR1 seen by the sidecar: ${afterMainMs} ms`);
    assert.ok(afterMainMs >= 0 && afterMainMs < 5_000, `SIGUSR1 ${afterMainMs} ms after the main's exit`);
    assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0, 'the sidecar exited on its trap, not SIGKILL');
    assert.equal(type, 'Complete');
  });

  const noSleep = !features.sleepHook && `Kubernetes ${clusterEnv().k8sVersion} has no sleep lifecycle action (PodLifecycleSleepAction, on by default from 1.30)`;
  it('a sidecar with a 6 s sleep preStop gets SIGTERM 6 s after the main\'s exit, within the grace period', { skip: noSleep }, async (t) => {
    const grace = 15;
    const sleepSeconds = 6;
    const { type, pod, sidecar, mainDoneMs, shown } = await run('sleep-hook', {
      grace,
      containers: [container('main', MAIN), container('proxy', SIGNAL_LOGGER, { env: [SIDECAR_MARK], lifecycle: { preStop: { sleep: { seconds: sleepSeconds } } } })],
    });
    t.diagnostic(shown);
    const term = firstLine(sidecar, /^got SIGTERM$/);
    assert.ok(term, `the sidecar never logged SIGTERM:\n${shown}`);
    const afterMainMs = term.atMs - mainDoneMs;
    t.diagnostic(`main done → SIGTERM seen by the sidecar: ${afterMainMs} ms (sleep ${sleepSeconds} s, grace ${grace} s)`);
    assert.ok(afterMainMs >= sleepSeconds * 1000, `SIGTERM ${afterMainMs} ms after the main's exit: before the ${sleepSeconds} s sleep ended`);
    assert.ok(afterMainMs <= grace * 1000, `SIGTERM ${afterMainMs} ms after the main's exit: past the ${grace} s grace period`);
    assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0, 'the sidecar exited on its trap, not SIGKILL');
    assert.equal(type, 'Complete');
  });

  it('R53: a proxy named by the stop-last annotation gets SIGTERM only after the log shipper beside it flushed and exited', async (t) => {
    await jobs.runJob(namespace, 'tiers', {
      restartPolicy: 'Never',
      grace: 20,
      annotations: { [ANNOTATION_STOP_LAST]: 'proxy' },
      containers: [container('main', MAIN), container('logs', FLUSHING_SHIPPER, { env: [SIDECAR_MARK] }), container('proxy', SIGNAL_LOGGER, { env: [SIDECAR_MARK] })],
    });
    const { type } = await jobs.finishedJob(namespace, 'tiers', 90_000);
    const pod = await jobs.onlyPod(namespace, 'tiers');
    const logs = timestampedLogs(namespace, pod.metadata!.name!, 'logs');
    const proxy = timestampedLogs(namespace, pod.metadata!.name!, 'proxy');
    const shown = `logs:\n${showLines(logs)}\nproxy:\n${showLines(proxy)}`;
    t.diagnostic(shown);
    const flushed = firstLine(logs, /^flushed$/);
    const proxyTerm = firstLine(proxy, /^got SIGTERM$/);
    assert.ok(flushed && proxyTerm, `both sidecars logged their stop:\n${shown}`);
    // The runtime's own record of the shipper's exit, beside its last line.
    const logsExit = containerStatus(pod, 'logs')?.state?.terminated?.finishedAt;
    assert.ok(logsExit, 'the log shipper terminated');
    t.diagnostic(`log shipper flushed → proxy SIGTERM: ${proxyTerm.atMs - flushed.atMs} ms`);
    assert.ok(proxyTerm.atMs > flushed.atMs, `the proxy got SIGTERM before the log shipper flushed:\n${shown}`);
    // finishedAt has whole seconds.
    assert.ok(proxyTerm.atMs >= new Date(logsExit).getTime(), `the proxy got SIGTERM before the log shipper exited (${String(logsExit)})`);
    assert.equal(containerStatus(pod, 'logs')?.state?.terminated?.exitCode, 0);
    assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0);
    assert.equal(type, 'Complete');
  });
});
