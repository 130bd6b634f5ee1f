// e2e group: serial — it re-applies the deployment with the agent kept off the node.
// Rule R22 (docs/design.md) on the real cluster: a real node where no agent runs (as on GKE Autopilot
// or EKS Fargate, where the DaemonSet cannot land). The kubectl deployment of e2e/support/deploy.ts
// is re-applied with the agent kept off the node (a nodeSelector no node matches) and the controller
// given --agentless-node-selector and --agentless-after-seconds; everything is restored afterwards
// (the plain overlay applied again: kubectl apply removes what the agentless one added).
// - Named by the selector: a Job's sidecar with ..._WITH_IMAGE is swapped at once, no request, the
//   Job completes; one with only the request marker gets one Warning saying what to add; one whose
//   ..._WITH_IMAGE names an image not in --agentless-swap-images (an image no admission saw at the
//   Pod's creation) keeps its image, and gets one Warning naming the image and the flag, one warn
//   log line and one count in the refused-swaps metric. The controller runs with the flag's default:
//   the cluster's quick-exit image is tagged with the released quick-exit image's repository, which
//   the default allows.
// - Not named, and no agent Pod on any node: past the wait the node still counts as real (a watch
//   that sees no agent anywhere proves nothing of a node): a request, no swap, and the controller
//   says what is wrong.
// - An install whose controller's agent selector matches no agent (an overlay relabelled the agent):
//   past the wait, no image is swapped on the node where the agent runs; the agent carries out the
//   request, and the controller says what is wrong.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { EVENT_REASONS } from '../api/names.ts';
import { clients, clusterEnv } from './support/cluster.ts';
import { RELEASED_QUICK_EXIT_IMAGE } from '../rules/requests.ts';
import { AGENT, CONTROLLER, CONTROLLER_METRICS_PORT, NAMESPACE, controllerLeader, ctr, deployProject, podMetric } from './support/deploy.ts';
import { BUSYBOX, PAUSE, container, finishedJob, onlyPod, requestsFor, runJob, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';

/** The quick-exit image the cluster imports (e2e/cluster/up.sh). */
const CLUSTER_QUICK_EXIT = 'sidecar-terminator.local/quick-exit:1';
/** The same image under the released repository, the one --agentless-swap-images allows by default. */
const QUICK_EXIT = `${RELEASED_QUICK_EXIT_IMAGE}:e2e`;
const WITH_IMAGE = { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: QUICK_EXIT };
const AGENTLESS_LABEL = 'sidecar-terminator.dev/e2e-agentless';
type Variant = 'no-agent' | 'stale-selector';
/**
 * The controller's --agentless-after-seconds. With no agent: long enough that the selector's first
 * Job (about 20 s after the controller starts) is swapped well inside it, short for a test. With the
 * stale selector, nothing is looked at before the wait is over: shorter still.
 */
const AGENTLESS_AFTER_SECONDS: Record<Variant, number> = { 'no-agent': 45, 'stale-selector': 10 };

/** The controller's agent selector as an overlay that relabelled the agent leaves it: matching none. */
const STALE_AGENT_SELECTOR = 'app.kubernetes.io/name=sidecar-terminator-relabelled,app.kubernetes.io/component=agent';

/**
 * The e2e overlay with the controller's agentless flags, and either the agent kept off every node or
 * the controller's agent selector matching no agent.
 */
function writeAgentlessOverlay(variant: Variant): string {
  const dir = join(clusterEnv().clusterDir, `agentless-overlay-${variant}`);
  mkdirSync(dir, { recursive: true });
  const agentPatch = variant === 'no-agent' ? `
  - target: {kind: DaemonSet, name: ${AGENT}}
    patch: |-
      - op: add
        path: /spec/template/spec/nodeSelector/sidecar-terminator.dev~1e2e-no-agent
        value: "true"` : '';
  const selectorPatch = variant === 'stale-selector' ? `
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --agent-pod-selector=${STALE_AGENT_SELECTOR}` : '';
  writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../overlay
patches:${agentPatch}
  - target: {kind: Deployment, name: ${CONTROLLER}}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --agentless-after-seconds=${AGENTLESS_AFTER_SECONDS[variant]}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --agentless-node-selector=${AGENTLESS_LABEL}=true${selectorPatch}
`);
  return dir;
}

/** Applies the variant and waits for a leader running it; returns when its container started. */
async function applyAgentless(variant: Variant): Promise<{ leader: V1Pod; startedMs: number }> {
  kubectl('apply', '-k', writeAgentlessOverlay(variant));
  kubectl('-n', NAMESPACE, 'rollout', 'status', `deployment/${CONTROLLER}`, '--timeout=180s');
  kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=180s');
  const leader = await waitFor(async () => {
    const l = await controllerLeader(90_000);
    const args = l.spec!.containers[0]!.args!;
    return args.includes(`--agentless-after-seconds=${AGENTLESS_AFTER_SECONDS[variant]}`) && args.some((a) => a.includes(STALE_AGENT_SELECTOR)) === (variant === 'stale-selector') ? l : undefined;
  }, { description: `a leader with the ${variant} flags`, timeoutMs: 120_000 });
  return { leader, startedMs: new Date(leader.status!.containerStatuses![0]!.state!.running!.startedAt!).getTime() };
}

/** Resolves 10 s after the variant's agentless wait, counted from its leader's start, is over. */
const pastTheWait = (variant: Variant, startedMs: number) =>
  new Promise((r) => setTimeout(r, Math.max(0, startedMs + (AGENTLESS_AFTER_SECONDS[variant] + 10) * 1000 - Date.now())));

/** The leader's log says that no agent Pod matches its selector. */
function saysNoAgentMatches(leader: V1Pod): boolean {
  return kubectl('-n', NAMESPACE, 'logs', leader.metadata!.name!).includes('no agent Pod matches --agent-pod-selector');
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
  let leader: V1Pod;

  before(async () => {
    await deployProject(); // the plain overlay exists and is applied
    ctr(['images', 'tag', '--force', CLUSTER_QUICK_EXIT, QUICK_EXIT]);
    ({ leader, startedMs: controllerStartedMs } = await applyAgentless('no-agent'));
    assert.ok(!leader.spec!.containers[0]!.args!.some((a) => a.startsWith('--agentless-swap-images')), 'the flag\'s default');
    await waitFor(async () => (await clients().core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/component=agent' })).items.length === 0,
      { description: `no agent Pod left in ${NAMESPACE}`, timeoutMs: 120_000 });
    namespace = await createTestNamespace(clients().core, 'agentless');
  });

  after(async () => {
    const steps: [string, () => unknown][] = [
      ['node label', () => kubectl('label', 'node', node, `${AGENTLESS_LABEL}-`)],
      ['test namespace', () => namespace && deleteTestNamespace(clients().core, namespace)],
      ['quick-exit tag', () => ctr(['images', 'rm', QUICK_EXIT])],
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

  /** Runs a marked Job, and returns its Pod once its main is done, with the SidecarNotStoppable Warning it got. */
  async function notStoppable(job: string, env: { name: string; value: string }[]): Promise<{ pod: V1Pod; warning: CoreV1Event }> {
    await runMarkedJob(namespace!, job, env);
    const pod = await waitFor(async () => {
      const p = await onlyPod(namespace!, job);
      return p.status?.containerStatuses?.find((s) => s.name === 'main')?.state?.terminated ? p : undefined;
    }, { description: `the main container of Job ${job} done`, timeoutMs: 60_000 });
    const warning = await waitFor(async () => (await eventsOf(pod, EVENT_REASONS.notStoppable))[0],
      { description: `a ${EVENT_REASONS.notStoppable} Warning`, timeoutMs: 30_000 });
    return { pod, warning };
  }

  it('named by --agentless-node-selector: the quick-exit image the flag allows by default is swapped in at once, no request, the Job completes', async () => {
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
    const waitSeconds = AGENTLESS_AFTER_SECONDS['no-agent'];
    assert.ok(eventTimeMs(swap) < controllerStartedMs + waitSeconds * 1000,
      `swapped ${eventTimeMs(swap) - controllerStartedMs} ms after the controller started, before the ${waitSeconds} s wait`);
  });

  it('named by the selector, a sidecar with only the request marker: one Warning saying to add ..._WITH_IMAGE', async () => {
    const { pod, warning } = await notStoppable('warned', [SIDECAR_MARK]);
    assert.equal(warning.type, 'Warning');
    assert.match(warning.message ?? '', new RegExp(`"proxy".*node "${node}" has no sidecar-terminator agent.*Set ${WITH_IMAGE.name} on it`));
    assert.equal(warning.count ?? 1, 1, 'sent once');
    assert.deepEqual(await requestsFor(pod), []);
    await clients().batch.deleteNamespacedJob({ namespace: namespace!, name: 'warned', propagationPolicy: 'Background' });
  });

  it('named by the selector, ..._WITH_IMAGE naming an image the operator does not allow: not swapped, one Warning naming it', async () => {
    const { pod, warning } = await notStoppable('unlisted', [SIDECAR_MARK, { name: WITH_IMAGE.name, value: PAUSE }]);
    assert.match(warning.message ?? '', new RegExp(`"proxy" names ${PAUSE.replace(/[.]/g, '\\.')}: not an image the operator allows.*--agentless-swap-images: ${RELEASED_QUICK_EXIT_IMAGE.replace(/[.]/g, '\\.')}\\)`));
    assert.equal(warning.count ?? 1, 1, 'sent once');
    const now = await clients().core.readNamespacedPod({ namespace: namespace!, name: pod.metadata!.name! });
    assert.equal(now.spec?.containers.find((c) => c.name === 'proxy')?.image, BUSYBOX, 'not swapped');
    assert.deepEqual(await eventsOf(now, EVENT_REASONS.replacingImage), []);
    // One Pod refused: counted and logged once, however often the controller decides it again.
    const leader = await controllerLeader();
    assert.equal(await podMetric(leader, CONTROLLER_METRICS_PORT, 'sidecar_terminator_controller_image_swaps_refused_total'), 1);
    const logged = kubectl('-n', NAMESPACE, 'logs', leader.metadata!.name!).split('\n').filter((l) => l.includes('image swap refused'));
    assert.equal(logged.length, 1, logged.join('\n'));
    await clients().batch.deleteNamespacedJob({ namespace: namespace!, name: 'unlisted', propagationPolicy: 'Background' });
  });

  it('not named, no agent Pod on any node: past the wait the node is still real (a request, no swap), and the controller says what is wrong', async () => {
    kubectl('label', 'node', node, `${AGENTLESS_LABEL}-`);
    await pastTheWait('no-agent', controllerStartedMs);
    await runMarkedJob(namespace!, 'no-agent', [SIDECAR_MARK, WITH_IMAGE]);
    const pod = await waitFor(async () => {
      const p = await onlyPod(namespace!, 'no-agent');
      return (await requestsFor(p)).length > 0 ? p : undefined;
    }, { description: 'a request for the Job\'s sidecar', timeoutMs: 60_000 });
    // The controller would have swapped within a resync of the request: give it that long.
    await new Promise((r) => setTimeout(r, 15_000));
    const now = await clients().core.readNamespacedPod({ namespace: namespace!, name: pod.metadata!.name! });
    assert.notEqual(now.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT, 'not swapped');
    assert.deepEqual(await eventsOf(now, EVENT_REASONS.replacingImage), []);
    assert.ok(saysNoAgentMatches(leader), 'the controller logs that no agent Pod matches its selector');
    await clients().batch.deleteNamespacedJob({ namespace: namespace!, name: 'no-agent', propagationPolicy: 'Background' });
  });

  it('an agent selector that matches no agent (an overlay relabelled the agent): past the wait, no swap on the node where the agent runs; the request stops the sidecar, and the controller says what is wrong', async () => {
    const { leader: relabelled, startedMs } = await applyAgentless('stale-selector');
    await pastTheWait('stale-selector', startedMs);
    await runMarkedJob(namespace!, 'relabelled', [SIDECAR_MARK, WITH_IMAGE]);
    const { type } = await finishedJob(namespace!, 'relabelled');
    assert.equal(type, 'Complete');
    const pod = await onlyPod(namespace!, 'relabelled');
    assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, BUSYBOX, 'not swapped');
    assert.deepEqual(await eventsOf(pod, EVENT_REASONS.replacingImage), []);
    assert.ok((await requestsFor(pod)).length >= 1, 'the agent carried out a request');
    assert.ok(saysNoAgentMatches(relabelled), 'the controller logs that no agent Pod matches its selector');
  });
});
