// e2e group: shared
// Every way kubelet starts a main again (R7), on the real kubelet: a probe kill under OnFailure, an
// image update of the running main and a resize that restarts it (whatever the restart policy),
// a container restart rule, a container policy that stops a restart, a Pod starting all its
// containers over; and a Pod with no main at all (R6). The main asks the sidecar for something on
// each run (a file the sidecar answers), and both write what they did, in order, to one journal on
// a hostPath directory the test reads: the journal outlives containers kubelet removes (a Pod that
// restarts all its containers loses their logs). Each test asserts what the sidecar saw and when,
// not only how the Job ended.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { CONDITION_SIDECAR_TERMINATED, EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { deployProject } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import * as jobs from './support/jobs.ts';
import { IGNORE_EXIT_MARK, SIDECAR_MARK, container } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';
import { containerStatus, jobPods } from './support/workloads.ts';

const { core } = clients();
let namespace: string;
const features = versionFeatures();
const version = clusterEnv().k8sVersion;
/** Per-test directories on the node (in the cluster's state directory), mounted into the Pods as /shared. */
const HOST_ROOT = `${clusterEnv().clusterDir}/restarts`;

/** Appends `<who> <what>` to the journal and prints it. */
const LOG = (who: string) => `log() { echo "${who} $*" >> /shared/journal; echo "$*"; }`;

/**
 * The sidecar: answers each request file /shared/req-N with /shared/resp-N ("served N"), and says
 * when it starts and when SIGTERM comes (then exits 0).
 */
const SIDECAR = [
  LOG('proxy'),
  'trap \'log "got SIGTERM"; exit 0\' TERM',
  'log started',
  'while :; do',
  '  for r in /shared/req-*; do',
  '    n=${r#/shared/req-}',
  '    [ -e "$r" ] && [ ! -e /shared/resp-$n ] && touch /shared/resp-$n && log "served $n"',
  '  done',
  '  sleep 0.2 & wait $!',
  'done',
].join('\n');

/**
 * The main: counts its runs (run N), does `first`, asks the sidecar to serve it and waits up to 60 s
 * (else exits 1: its sidecar is gone; a sidecar that kubelet starts after the main, on a node busy
 * with other files' Pods, may take seconds), then does `rest` (both see $n).
 */
const MAIN = (rest: string, first = '') => [
  LOG('main'),
  'n=$(( $(ls /shared | grep -c "^run-") + 1 )); touch /shared/run-$n',
  first,
  'log "run $n started"',
  'touch /shared/req-$n',
  'i=0; while [ ! -e /shared/resp-$n ]; do i=$((i+1)); if [ $i -gt 600 ]; then log "run $n not served"; exit 1; fi; sleep 0.1; done',
  'log "run $n served"',
  rest,
].join('\n');

/**
 * Runs the Job with `main` and the sidecar sharing a fresh journal; returns its Pod and journal once
 * it finished. `meanwhile` acts on the running Pod (named) once the journal shows `line`.
 */
async function run(name: string, restartPolicy: 'Never' | 'OnFailure', main: V1Container, backoffLimit = 0,
  meanwhile?: { line: string; act: (podName: string) => Promise<void> }) {
  const dir = `${HOST_ROOT}/${namespace}/${name}`;
  mkdirSync(dir, { recursive: true });
  const shared = { name: 'shared', mountPath: '/shared' };
  await jobs.runJob(namespace, name, {
    restartPolicy,
    grace: 10,
    backoffLimit,
    volumes: [{ name: 'shared', hostPath: { path: dir, type: 'Directory' } }],
    containers: [
      { ...main, volumeMounts: [shared] },
      container('proxy', SIDECAR, { env: [SIDECAR_MARK], volumeMounts: [shared] }),
    ],
  });
  if (meanwhile) {
    await waitFor(() => readFileSync(`${dir}/journal`, 'utf8').split('\n').includes(meanwhile.line) || undefined,
      { description: `"${meanwhile.line}" in the journal`, timeoutMs: 60_000 });
    await meanwhile.act((await jobs.onlyPod(namespace, name)).metadata!.name!);
  }
  const { type } = await jobs.finishedJob(namespace, name, 120_000);
  const pod = await jobs.onlyPod(namespace, name);
  const journal = readFileSync(`${dir}/journal`, 'utf8').split('\n').filter(Boolean);
  return { type, pod, journal, shown: `journal:\n${journal.join('\n')}` };
}

/** Index of `line` in the journal (-1 if absent), from `from` on. */
const at = (journal: string[], line: string, from = 0) => journal.indexOf(line, from);

/** The sidecar's SIGTERM, as the runtime timestamped its log line, and the main's last line before it. */
function sigtermAfterMainMs(pod: V1Pod, mainLine: RegExp): { ms: number; shown: string } {
  const podName = pod.metadata!.name!;
  const main = timestampedLogs(namespace, podName, 'main');
  const proxy = timestampedLogs(namespace, podName, 'proxy');
  const shown = `main:\n${showLines(main)}\nproxy:\n${showLines(proxy)}`;
  const done = firstLine(main, mainLine);
  const term = firstLine(proxy, /^got SIGTERM$/);
  assert.ok(done && term, shown);
  return { ms: term.atMs - done.atMs, shown };
}

before(async () => {
  await deployProject();
  namespace = await createTestNamespace(core, 'restarts');
});
after(async () => {
  if (!namespace) return;
  await deleteTestNamespace(core, namespace);
  rmSync(`${HOST_ROOT}/${namespace}`, { recursive: true, force: true });
});

describe('R7: mains kubelet starts again, on the real kubelet', () => {

  it('OnFailure: a main killed by its liveness probe exits 0, kubelet restarts it, and its sidecar still serves the new run', async (t) => {
    const main = container('main', MAIN([
      'if [ $n = 1 ]; then',
      // Healthy until served, then the probe fails; SIGTERM from the probe kill is answered with 0.
      '  trap \'log "run 1 got SIGTERM"; exit 0\' TERM',
      '  touch /tmp/unhealthy',
      '  while :; do sleep 1 & wait $!; done',
      'fi',
      'log done',
    ].join('\n')), {
      // Healthy unless the run says otherwise (a restarted container starts with a fresh /tmp), and a
      // slow exec on a busy node is not a failure: only run 1, once served, is killed by the probe.
      livenessProbe: { exec: { command: ['sh', '-c', '[ ! -e /tmp/unhealthy ]'] }, periodSeconds: 1, timeoutSeconds: 10, failureThreshold: 1 },
    });
    // Under OnFailure the Job controller counts the restart against backoffLimit.
    const { type, pod, journal, shown } = await run('liveness', 'OnFailure', main, 3);
    t.diagnostic(shown);
    const killed = at(journal, 'main run 1 got SIGTERM');
    assert.ok(killed > at(journal, 'proxy served 1') && killed >= 0, `the probe killed run 1 after it was served:\n${shown}`);
    // The sidecar was still there for the restarted main, and only then told to stop.
    const served2 = at(journal, 'proxy served 2', killed);
    assert.ok(served2 > killed, `the sidecar served run 2:\n${shown}`);
    const done = at(journal, 'main done', served2);
    assert.ok(done > served2, shown);
    assert.deepEqual(journal.filter((l) => l === 'proxy got SIGTERM'), ['proxy got SIGTERM'], shown);
    assert.ok(at(journal, 'proxy got SIGTERM') > done, `SIGTERM only after the restarted main was done:\n${shown}`);
    const status = containerStatus(pod, 'main');
    assert.equal(status?.restartCount, 1, 'kubelet restarted the probe-killed main once');
    // The journal shows run 1's trap answering the probe's SIGTERM (exit 0). Kubelet 1.27 reported
    // no lastState for it once the Pod had finished; where one is reported, it must say the same.
    if (status?.lastState?.terminated) assert.equal(status.lastState.terminated.exitCode, 0, 'the probe-killed run exited 0');
    const { ms, shown: logs } = sigtermAfterMainMs(pod, /^done$/);
    t.diagnostic(`restarted main done → SIGTERM seen by the sidecar: ${ms} ms`);
    assert.ok(ms >= 0 && ms < 10_000, logs);
    assert.equal(type, 'Complete');
  });

  /**
   * Kubelet kills a running container whose spec changed, or that a resize restarts, and starts it
   * again whatever its restart policy: the runtime reports an ordinary exit. Run 1 waits to be
   * killed (its SIGTERM answered with `exitOnTerm`); run 2 is served and done.
   */
  const killedAndRun = (exitOnTerm: number) => container('main', MAIN([
    'if [ $n = 1 ]; then',
    `  trap 'log "run 1 got SIGTERM"; exit ${exitOnTerm}' TERM`,
    '  while :; do sleep 1 & wait $!; done',
    'fi',
    'log done',
  ].join('\n')));
  /** The sidecar was there for run 2, and told to stop only once it was done. */
  const servedTheRestartedMain = (journal: string[], shown: string) => {
    const killed = at(journal, 'main run 1 got SIGTERM');
    assert.ok(killed > at(journal, 'proxy served 1') && killed >= 0, `run 1 was killed after it was served:\n${shown}`);
    const served2 = at(journal, 'proxy served 2', killed);
    assert.ok(served2 > killed, `the sidecar was not stopped at the exit kubelet restarts; it served run 2:\n${shown}`);
    assert.ok(at(journal, 'main done', served2) > served2, shown);
    assert.deepEqual(journal.filter((l) => l === 'proxy got SIGTERM'), ['proxy got SIGTERM'], shown);
    assert.ok(at(journal, 'proxy got SIGTERM') > at(journal, 'main done'), `SIGTERM only after the restarted main was done:\n${shown}`);
  };

  it('Never: the running main\'s image updated: kubelet kills it (exit 143) and runs it again, and its sidecar serves the new run', async (t) => {
    const { type, pod, journal, shown } = await run('image-update', 'Never', killedAndRun(143), 0, {
      line: 'proxy served 1',
      act: async (podName) => {
        await core.patchNamespacedPod({ namespace, name: podName, body: { spec: { containers: [{ name: 'main', image: jobs.PAUSE }] } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
      },
    });
    t.diagnostic(shown);
    servedTheRestartedMain(journal, shown);
    const status = containerStatus(pod, 'main');
    assert.equal(status?.restartCount, 1, 'kubelet ran the main again once, with the new image');
    assert.equal(status?.state?.terminated?.exitCode, 0);
    const { ms, shown: logs } = sigtermAfterMainMs(pod, /^done$/);
    t.diagnostic(`restarted main done → SIGTERM seen by the sidecar: ${ms} ms`);
    assert.ok(ms >= 0 && ms < 10_000, logs);
    assert.equal(type, 'Complete');
  });

  const noResize = !features.podResize && `Kubernetes ${version} has no in-place resize (InPlacePodVerticalScaling, on by default from 1.33)`;
  it('OnFailure: a resize whose policy restarts the main: killed (exit 0), run again, and its sidecar serves the new run', { skip: noResize }, async (t) => {
    const main = killedAndRun(0);
    main.resources = { requests: { memory: '64Mi' }, limits: { memory: '64Mi' } };
    main.resizePolicy = [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }];
    const { type, pod, journal, shown } = await run('resize', 'OnFailure', main, 3, {
      line: 'proxy served 1',
      act: async (podName) => {
        const resized = { spec: { containers: [{ name: 'main', resources: { requests: { memory: '80Mi' }, limits: { memory: '80Mi' } } }] } };
        kubectl('patch', 'pod', podName, '-n', namespace, '--subresource', 'resize', '--type', 'strategic', '-p', JSON.stringify(resized));
      },
    });
    t.diagnostic(shown);
    servedTheRestartedMain(journal, shown);
    assert.equal(containerStatus(pod, 'main')?.restartCount, 1, 'the resize restarted the main once');
    assert.equal(type, 'Complete');
  });

  const noRules = !features.containerRestartRules && `Kubernetes ${version} has no container restart rules (ContainerRestartRules, on by default from 1.35)`;
  const ruleRestartOn42 = { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] };

  it('Never: a main whose exit code matches a Restart rule is restarted, its sidecar serves the new run, which exits 0', { skip: noRules }, async (t) => {
    const main = container('main', MAIN('if [ $n = 1 ]; then log "run 1 exits 42"; exit 42; fi\nlog done'), ruleRestartOn42);
    const { type, pod, journal, shown } = await run('restart-rule', 'Never', main);
    t.diagnostic(shown);
    const exited42 = at(journal, 'main run 1 exits 42');
    assert.ok(exited42 >= 0, shown);
    const served2 = at(journal, 'proxy served 2', exited42);
    assert.ok(served2 > exited42, `the sidecar was not stopped at the exit kubelet restarts; it served run 2:\n${shown}`);
    assert.ok(at(journal, 'proxy got SIGTERM') > at(journal, 'main done'), shown);
    assert.equal(containerStatus(pod, 'main')?.restartCount, 1);
    assert.equal(containerStatus(pod, 'main')?.state?.terminated?.exitCode, 0);
    const { ms, shown: logs } = sigtermAfterMainMs(pod, /^done$/);
    t.diagnostic(`main done → SIGTERM seen by the sidecar: ${ms} ms`);
    assert.ok(ms >= 0 && ms < 10_000, logs);
    assert.equal(type, 'Complete');
  });

  it('OnFailure: a container policy Never (its rule not matching) stops the restart: the failed main is done, its sidecar stopped at once', { skip: noRules }, async (t) => {
    const main = container('main', MAIN('log "run $n exits 3"; exit 3'), ruleRestartOn42);
    const { type, pod, journal, shown } = await run('no-restart', 'OnFailure', main);
    t.diagnostic(shown);
    assert.deepEqual(journal.filter((l) => l.startsWith('main run') && l.endsWith('started')), ['main run 1 started'], `never restarted:\n${shown}`);
    assert.ok(at(journal, 'proxy got SIGTERM') > at(journal, 'main run 1 exits 3'), shown);
    assert.equal(containerStatus(pod, 'main')?.restartCount, 0);
    assert.equal(containerStatus(pod, 'main')?.state?.terminated?.exitCode, 3);
    const { ms, shown: logs } = sigtermAfterMainMs(pod, /^run 1 exits 3$/);
    t.diagnostic(`failed main → SIGTERM seen by the sidecar: ${ms} ms`);
    assert.ok(ms >= 0 && ms < 10_000, logs);
    assert.equal(type, 'Failed', 'the main failed and was not restarted: the Pod fails');
  });

  const noRestartAll = !features.restartAllContainers && `Kubernetes ${version} has no RestartAllContainers action (on by default from 1.36)`;
  it('a main whose exit restarts all containers: nothing is stopped until the new run is done', { skip: noRestartAll }, async (t) => {
    const main = container('main', MAIN('if [ $n = 1 ]; then log "run 1 exits 42"; exit 42; fi\nlog done'), {
      restartPolicy: 'Never',
      restartPolicyRules: [{ action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [42] } }],
    });
    const { type, pod, journal, shown } = await run('restart-all', 'Never', main);
    t.diagnostic(shown);
    const exited42 = at(journal, 'main run 1 exits 42');
    assert.ok(exited42 >= 0, shown);
    // Kubelet started the whole Pod over: the sidecar again, and it served the new run.
    const restarted = at(journal, 'proxy started', exited42);
    assert.ok(restarted > exited42, `the sidecar was started again:\n${shown}`);
    const served2 = at(journal, 'proxy served 2', restarted);
    const done = at(journal, 'main done', served2);
    assert.ok(served2 > restarted && done > served2, shown);
    assert.ok(at(journal, 'proxy got SIGTERM', done) > done, `the new sidecar was stopped after the new run:\n${shown}`);
    // The SIGTERM the first sidecar may have seen was kubelet's: no request of ours before the end.
    const requests = await jobs.requestsFor(pod);
    assert.equal(requests.length, 1, `one request, for the final run: ${requests.map((r) => r.metadata.name).join(', ')}`);
    const mainFinished = jobs.finishedAt(pod, 'main');
    const created = new Date(requests[0]!.metadata.creationTimestamp!);
    assert.ok(mainFinished && created.getTime() >= mainFinished.getTime() - 1000, `request created ${created.toISOString()}, main finished ${mainFinished?.toISOString()}`);
    assert.equal(type, 'Complete');
  });
});

describe('R57: sidecars kubelet restarts by their own restart policy (1.35+)', () => {
  const noRules = !features.containerRestartRules && `Kubernetes ${version} has no container restart policies (ContainerRestartRules, on by default from 1.35)`;

  it('a sidecar with restartPolicy Always of its own is never stopped (no loop against kubelet); one Warning names the native-sidecar fix', { skip: noRules }, async () => {
    await jobs.runJob(namespace, 'own-always', {
      restartPolicy: 'Never',
      containers: [container('main', 'sleep 2'), container('proxy', 'trap "exit 0" TERM; while true; do sleep 1; done', { env: [SIDECAR_MARK], restartPolicy: 'Always' })],
    });
    const warning = `Warning ${EVENT_REASONS.sidecarRestartsItself}:`;
    const pod = await waitFor(async () => {
      const p = await jobs.onlyPod(namespace, 'own-always');
      return containerStatus(p, 'main')?.state?.terminated && (await jobs.podEvents(p)).some((e) => e.startsWith(warning)) ? p : undefined;
    }, { description: `the main done and a ${EVENT_REASONS.sidecarRestartsItself} Warning`, timeoutMs: 60_000 });
    const events = await jobs.podEvents(pod);
    assert.match(events.find((e) => e.startsWith(warning)) ?? '', /"proxy" has a restartPolicy of its own .* native sidecar \(an init container with restartPolicy: Always/);
    // Long enough for several stops and their retries, had any been made.
    await new Promise((r) => setTimeout(r, 20_000));
    const fresh = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    assert.equal(containerStatus(fresh, 'proxy')?.restartCount, 0, 'never stopped, so never restarted');
    assert.deepEqual(await jobs.requestsFor(fresh), [], 'no request made');
    assert.ok(!(await jobs.podEvents(fresh)).some((e) => e.includes(EVENT_REASONS.retrying)), events.join('\n'));
    kubectl('-n', namespace, 'delete', 'job', 'own-always', '--wait=false');
  });

  it('a sidecar with restartPolicy OnFailure of its own that exits 143 on SIGTERM: stopped once, kubelet restarts it, the phase ends the loop', { skip: noRules }, async () => {
    await jobs.runJob(namespace, 'own-onfailure', {
      restartPolicy: 'Never',
      containers: [container('main', 'sleep 2'), container('proxy', 'trap "exit 143" TERM; while true; do sleep 1; done', { env: [SIDECAR_MARK], restartPolicy: 'OnFailure' })],
    });
    const { type } = await jobs.finishedJob(namespace, 'own-onfailure', 90_000);
    const pod = await jobs.onlyPod(namespace, 'own-onfailure');
    const events = await jobs.podEvents(pod);
    assert.equal(type, 'Complete', events.join('\n'));
    assert.equal(pod.status?.conditions?.find((c) => c.type === CONDITION_SIDECAR_TERMINATED)?.reason, 'SidecarRestartLoop');
    assert.match(events.find((e) => e.startsWith(`Warning ${EVENT_REASONS.restartLoop}:`)) ?? '', /"proxy": its own restartPolicy OnFailure/);
    assert.ok(!events.some((e) => e.includes(EVENT_REASONS.sidecarFailedPod)), `no SidecarFailedPod: kubelet restarts the sidecar\n${events.join('\n')}`);
    assert.equal((await jobs.requestsFor(pod)).length, 1, 'one stop, no retry');
  });
});

describe('R6: a Pod with no main container is not ours', () => {

  it('both containers ignore-exit-code sidecars, one working 20 s: the work is not killed, no phase is set early, one Warning', async (t) => {
    const marks = [SIDECAR_MARK, IGNORE_EXIT_MARK];
    await jobs.runJob(namespace, 'no-main', {
      restartPolicy: 'Never',
      containers: [
        container('work', 'echo "work started"; sleep 20; echo "work done"', { env: marks }),
        container('log', 'echo "log started"; sleep 24; echo "log done"', { env: marks }),
      ],
    });
    const pod = await waitFor(async () => {
      const [p] = await jobPods(core, namespace, 'no-main');
      return p && containerStatus(p, 'work')?.state?.running ? p : undefined;
    }, { description: 'the work running', timeoutMs: 60_000 });
    const warning = await waitFor(async () => (await jobs.podEvents(pod)).find((e) => e.startsWith('Warning SidecarNoMainContainer')), {
      description: 'the SidecarNoMainContainer Warning', timeoutMs: 30_000,
    });
    t.diagnostic(warning);
    // 15 s into the work: where, before, it had been killed and the Pod set Succeeded.
    const workStarted = containerStatus(pod, 'work')?.state?.running?.startedAt;
    const startedMs = workStarted ? new Date(workStarted).getTime() : Date.now();
    await new Promise((r) => setTimeout(r, Math.max(0, startedMs + 15_000 - Date.now())));
    const midway = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    assert.equal(midway.status?.phase, 'Running', 'no phase set while the work runs');
    assert.equal(containerStatus(midway, 'work')?.state?.running !== undefined, true, 'the work still runs');
    const { type } = await jobs.finishedJob(namespace, 'no-main', 60_000);
    const done = await jobs.onlyPod(namespace, 'no-main');
    const work = timestampedLogs(namespace, done.metadata!.name!, 'work');
    const started = firstLine(work, /^work started$/);
    const finished = firstLine(work, /^work done$/);
    assert.ok(started && finished && finished.atMs - started.atMs >= 19_000, `the work ran its 20 s:\n${showLines(work)}`);
    assert.equal(containerStatus(done, 'work')?.state?.terminated?.exitCode, 0);
    assert.deepEqual(await jobs.requestsFor(done), [], 'no request for a Pod that is not ours');
    assert.equal(done.status?.conditions?.find((c) => c.type === 'SidecarTerminated'), undefined, 'the phase was kubelet\'s, not ours');
    assert.equal((await jobs.podEvents(done)).filter((e) => e.startsWith('Warning SidecarNoMainContainer')).length, 1, 'one Warning');
    assert.equal(type, 'Complete');
  });
});
