// e2e group: shared
// Attacks through a Pod's own preStop hook, tried on the real cluster: the agent runs hooks from
// its own network position and a hook's server is the Pod author's. A server that answers with
// header lines forever must not hold the stop past the grace period, and a tcpSocket hook (which
// kubelet never runs as a lifecycle hook) is not run: a Warning on the Pod says so, and the stop
// goes on (a hook run at most once per container across the agent's death:
// e2e/agent-crash.test.ts). Each test asserts what the sidecar saw and when, from its own log.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_REASONS } from '../api/names.ts';
import { clients } from './support/cluster.ts';
import { firstLine, showLines, timestampedLogs } from './support/container-logs.ts';
import { deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { SIDECAR_MARK, container, podEvents } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { containerStatus } from './support/workloads.ts';

const { core } = clients();
let namespace: string;

const MAIN = 'sleep 3; echo main done';
const PORT = 8080;

/**
 * A sidecar serving `connectionScript` on PORT for each connection (busybox nc), saying which signal
 * came and exiting 0 on it. The script's lines to /proc/1/fd/1 land in the sidecar's own log.
 */
function serving(connectionScript: string[]): string {
  const lines = ['#!/bin/sh', ...connectionScript].map((l) => `'${l}'`).join(' ');
  return [
    `printf '%s\\n' ${lines} > /tmp/conn.sh`,
    'chmod +x /tmp/conn.sh',
    `nc -ll -p ${PORT} -e /tmp/conn.sh &`,
    `trap 'echo "got SIGTERM"; exit 0' TERM`,
    'echo ready',
    'while :; do sleep 1 & wait $!; done',
  ].join('\n');
}

/** Answers a status line, then a header line every 5 s, never ending its headers. */
const DRIPPING_HEADERS = serving([
  'echo "hook connected" > /proc/1/fd/1',
  'printf "HTTP/1.1 200 OK\\r\\n"',
  'while :; do printf "X-Drip: 1\\r\\n"; sleep 5; done',
]);
/** Says that something connected. */
const CONNECTION_LOGGER = serving(['echo "tcp connected" > /proc/1/fd/1']);

describe('preStop hooks as an attack path', () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'security-hooks');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('an httpGet hook whose server drips header lines forever: SIGTERM within the grace period, the Job completes', async (t) => {
    const grace = 10;
    await jobs.runJob(namespace, 'drip', {
      restartPolicy: 'Never',
      grace,
      containers: [
        container('main', MAIN),
        container('proxy', DRIPPING_HEADERS, { env: [SIDECAR_MARK], ports: [{ containerPort: PORT }], lifecycle: { preStop: { httpGet: { port: PORT, path: '/drain' } } } }),
      ],
    });
    // Held by the hook, the Job would never finish: a minute is far past the grace period.
    const { type } = await jobs.finishedJob(namespace, 'drip', (grace + 50) * 1000);
    const pod = await jobs.onlyPod(namespace, 'drip');
    const main = timestampedLogs(namespace, pod.metadata!.name!, 'main');
    const sidecar = timestampedLogs(namespace, pod.metadata!.name!, 'proxy');
    const shown = `main:\n${showLines(main)}\nproxy:\n${showLines(sidecar)}`;
    t.diagnostic(shown);
    const mainDone = firstLine(main, /^main done$/);
    const hook = firstLine(sidecar, /^hook connected$/);
    const term = firstLine(sidecar, /^got SIGTERM$/);
    assert.ok(mainDone && hook && term, `the main's end, the hook's connection and SIGTERM are all in the logs:\n${shown}`);
    const hookToTermMs = term.atMs - hook.atMs;
    t.diagnostic(`main done → hook connected ${hook.atMs - mainDone.atMs} ms → SIGTERM ${term.atMs - mainDone.atMs} ms (grace ${grace} s)`);
    // The hook is cut at the grace period from the stop's start, as kubelet cuts it. The stop starts
    // as the hook connects; how soon that is after the main's exit is the agent's path, measured in
    // the benchmark. The logs' clock has whole milliseconds but the connection is logged by a shell
    // the sidecar starts: a second of slack.
    assert.ok(hookToTermMs >= 0, 'SIGTERM after the hook began');
    assert.ok(hookToTermMs <= (grace + 1) * 1000, `SIGTERM ${hookToTermMs} ms after the hook began, past the ${grace} s grace period`);
    assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0, 'the sidecar exited on its trap, not SIGKILL');
    assert.equal(type, 'Complete');
  });

  it('a tcpSocket hook is not run: a PreStopHookNotRun Warning on the Pod, no connection, and SIGTERM at once', async (t) => {
    await jobs.runJob(namespace, 'tcp-hook', {
      restartPolicy: 'Never',
      containers: [
        container('main', MAIN),
        container('proxy', CONNECTION_LOGGER, { env: [SIDECAR_MARK], ports: [{ containerPort: PORT }], lifecycle: { preStop: { tcpSocket: { port: PORT } } } }),
      ],
    });
    const { type } = await jobs.finishedJob(namespace, 'tcp-hook', 60_000);
    const pod = await jobs.onlyPod(namespace, 'tcp-hook');
    const main = timestampedLogs(namespace, pod.metadata!.name!, 'main');
    const sidecar = timestampedLogs(namespace, pod.metadata!.name!, 'proxy');
    const shown = `main:\n${showLines(main)}\nproxy:\n${showLines(sidecar)}`;
    t.diagnostic(shown);
    assert.equal(firstLine(sidecar, /^tcp connected$/), undefined, `the agent connected to the tcpSocket hook's port:\n${shown}`);
    const mainDone = firstLine(main, /^main done$/);
    const term = firstLine(sidecar, /^got SIGTERM$/);
    assert.ok(mainDone && term, `the main's end and SIGTERM are in the logs:\n${shown}`);
    t.diagnostic(`main done → SIGTERM ${term.atMs - mainDone.atMs} ms`);
    assert.ok(term.atMs - mainDone.atMs < 5_000, 'the stop went on at once');
    assert.equal(type, 'Complete');
    const events = await podEvents(pod);
    const warning = events.find((e) => e.startsWith(`Warning ${EVENT_REASONS.preStopHookNotRun}:`));
    assert.ok(warning, events.join('\n'));
    assert.match(warning, /container proxy not run: a tcpSocket preStop hook is not run/);
  });

});
