// Rule R22 (docs/design.md) on the real cluster: a real node where no agent runs (as on GKE Autopilot
// or EKS Fargate, where the DaemonSet cannot land). The kubectl deployment of e2e/support/deploy.ts
// is re-applied with the agent kept off the node (a nodeSelector no node matches) and the controller
// given --agentless-node-selector and --agentless-after-seconds; everything is restored afterwards
// (the plain overlay applied again: kubectl apply removes what the agentless one added).
// - Named by the selector: a Job's sidecar with ..._WITH_IMAGE is swapped at once, no request, the
//   Job completes; one with only the request marker gets one Warning saying what to add.
// - Not named, no agent Pod: within the wait the node still counts as real (a blip must not swap:
//   the controller creates a request, which nothing carries out); once no agent has run for the
//   wait, the image is swapped and the Job completes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { AGENT, CONTROLLER, NAMESPACE, controllerLeader, deployProject } from './support/deploy.ts';
import { container, finishedJob, onlyPod, requestsFor, runJob, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';

const QUICK_EXIT = 'sidecar-terminator.local/quick-exit:1';
const WITH_IMAGE = { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: QUICK_EXIT };
const AGENTLESS_LABEL = 'sidecar-terminator.dev/e2e-agentless';
/** Long enough that the selector's Jobs finish well inside it, short for a test. */
const AGENTLESS_AFTER_SECONDS = 90;

/** The e2e overlay, with the agent kept off every node and the controller's agentless flags. */
function writeAgentlessOverlay(): string {
  const dir = join(clusterEnv().clusterDir, 'agentless-overlay');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../overlay
patches:
  - target: {kind: DaemonSet, name: ${AGENT}}
    patch: |-
      - op: add
        path: /spec/template/spec/nodeSelector/sidecar-terminator.dev~1e2e-no-agent
        value: "true"
  - target: {kind: Deployment, name: ${CONTROLLER}}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --agentless-after-seconds=${AGENTLESS_AFTER_SECONDS}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --agentless-node-selector=${AGENTLESS_LABEL}=true
`);
  return dir;
}

async function eventsOf(pod: V1Pod, reason: string): Promise<CoreV1Event[]> {
  const list = await clients().core.listNamespacedEvent({ namespace: pod.metadata!.namespace!, fieldSelector: `involvedObject.uid=${pod.metadata!.uid}` });
  return list.items.filter((e) => e.reason === reason);
}

const eventTimeMs = (e: CoreV1Event) => new Date(e.firstTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp!).getTime();

/** A Job whose main sleeps 2 s beside a sidecar that runs until stopped, with `env` markers. */
const runMarkedJob = (namespace: string, name: string, env: { name: string; value: string }[]) =>
  runJob(namespace, name, { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(0), { env })] });

describe('R22: a node where no agent runs', () => {
  const node = clusterEnv().nodeName;
  let namespace: string | undefined;
  /** When the acting controller's container started: its watch of agent Pods began no earlier. */
  let controllerStartedMs = 0;

  before(async () => {
    await deployProject(); // the plain overlay exists and is applied
    kubectl('apply', '-k', writeAgentlessOverlay());
    kubectl('-n', NAMESPACE, 'rollout', 'status', `deployment/${CONTROLLER}`, '--timeout=180s');
    await waitFor(async () => (await clients().core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/component=agent' })).items.length === 0,
      { description: `no agent Pod left in ${NAMESPACE}`, timeoutMs: 120_000 });
    const leader = await controllerLeader(90_000);
    assert.ok(leader.spec!.containers[0]!.args!.includes(`--agentless-after-seconds=${AGENTLESS_AFTER_SECONDS}`), 'the leader runs with the agentless flags');
    controllerStartedMs = new Date(leader.status!.containerStatuses![0]!.state!.running!.startedAt!).getTime();
    namespace = await createTestNamespace(clients().core, 'agentless');
  });

  after(async () => {
    const steps: [string, () => unknown][] = [
      ['node label', () => kubectl('label', 'node', node, `${AGENTLESS_LABEL}-`)],
      ['test namespace', () => namespace && deleteTestNamespace(clients().core, namespace)],
    ];
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (err) {
        console.log(`# cleanup, ${what}: ${(err as Error).message}`);
      }
    }
    await deployProject(); // the agent back on the node, the controller without the agentless flags
  });

  it('named by --agentless-node-selector: the image is swapped at once, no request, the Job completes', async () => {
    kubectl('label', 'node', node, `${AGENTLESS_LABEL}=true`, '--overwrite');
    await runMarkedJob(namespace!, 'by-selector', [SIDECAR_MARK, WITH_IMAGE]);
    const { type } = await finishedJob(namespace!, 'by-selector');
    assert.equal(type, 'Complete');
    const pod = await onlyPod(namespace!, 'by-selector');
    assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT);
    assert.deepEqual(await requestsFor(pod), [], 'no request: nothing would carry it out');
    const [swap, ...more] = await eventsOf(pod, EVENT_REASONS.replacingImage);
    assert.ok(swap && more.length === 0, 'one ReplacingSidecarImage event');
    assert.match(swap.message ?? '', /node without an agent/);
    // The selector, not the absence of an agent, made the node agentless: that would take the wait.
    assert.ok(eventTimeMs(swap) < controllerStartedMs + AGENTLESS_AFTER_SECONDS * 1000,
      `swapped ${eventTimeMs(swap) - controllerStartedMs} ms after the controller started, before the ${AGENTLESS_AFTER_SECONDS} s wait`);
  });

  it('named by the selector, a sidecar with only the request marker: one Warning saying to add ..._WITH_IMAGE', async () => {
    await runMarkedJob(namespace!, 'warned', [SIDECAR_MARK]);
    const pod = await waitFor(async () => {
      const p = await onlyPod(namespace!, 'warned');
      return p.status?.containerStatuses?.find((s) => s.name === 'main')?.state?.terminated ? p : undefined;
    }, { description: 'the main container of Job warned done', timeoutMs: 60_000 });
    const warning = await waitFor(async () => (await eventsOf(pod, EVENT_REASONS.notStoppable))[0],
      { description: `a ${EVENT_REASONS.notStoppable} Warning`, timeoutMs: 30_000 });
    assert.equal(warning.type, 'Warning');
    assert.match(warning.message ?? '', new RegExp(`"proxy".*node "${node}" has no sidecar-terminator agent.*Set ${WITH_IMAGE.name} on it`));
    assert.equal(warning.count ?? 1, 1, 'sent once');
    assert.deepEqual(await requestsFor(pod), []);
    await clients().batch.deleteNamespacedJob({ namespace: namespace!, name: 'warned', propagationPolicy: 'Background' });
  });

  it('not named, no agent Pod: a request within the wait (no swap on a blip), then the swap, and the Job completes', async () => {
    kubectl('label', 'node', node, `${AGENTLESS_LABEL}-`);
    const startedMs = Date.now();
    await runMarkedJob(namespace!, 'no-agent', [SIDECAR_MARK, WITH_IMAGE]);
    const { type } = await finishedJob(namespace!, 'no-agent', (AGENTLESS_AFTER_SECONDS + 90) * 1000);
    assert.equal(type, 'Complete');
    const pod = await onlyPod(namespace!, 'no-agent');
    assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT);
    const [swap] = await eventsOf(pod, EVENT_REASONS.replacingImage);
    assert.ok(swap, 'a ReplacingSidecarImage event');
    // Event times are whole seconds.
    assert.ok(eventTimeMs(swap) >= controllerStartedMs + AGENTLESS_AFTER_SECONDS * 1000 - 1000,
      `swapped ${eventTimeMs(swap) - controllerStartedMs} ms after the controller started: not before the ${AGENTLESS_AFTER_SECONDS} s wait`);
    if (startedMs + 20_000 < controllerStartedMs + AGENTLESS_AFTER_SECONDS * 1000) {
      // The mains were done well inside the wait: the node still counted as real then (a request;
      // another after the first is not picked up in time is possible too).
      assert.ok((await requestsFor(pod)).length >= 1, 'a request made while the node still counted as real');
    }
  });
});
