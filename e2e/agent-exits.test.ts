// e2e group: serial — it scales the controller to zero, and grants and takes back the agent's permissions.
// The agent acting on main containers' exits it sees in containerd (the fast path), with the
// controller scaled to zero: only the agent can then create the request, so a Job that completes
// shows it did. Also the admission policy that keeps each agent to its own node's Pods. Before 1.30
// nothing can confine an agent to its node: there it must create nothing, even when granted the
// permission by mistake, and the controller creates every request.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { apiAs, requestsPath } from './support/api-as.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import * as jobs from './support/jobs.ts';
import { container, finishedAt, podEvents, requestsFor, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { AGENT, CONTROLLER, NAMESPACE, agentPod, crash, deployProject, noControllerLeft, podMetric } from './support/deploy.ts';
import { kubectl } from './support/kubectl.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const { core } = clients();
let namespace: string;

const agentMetric = async (series: string) => podMetric(await agentPod(), 9440, series);

const requestsCreatedOnExit = () => agentMetric('sidecar_terminator_agent_requests_on_exit_total{result="created"}');
const fastPathState = async (state: string) => (await agentMetric(`sidecar_terminator_agent_fast_path{state="${state}"}`)) === 1;

/** Restarts the agent, so it checks again what it may do at once (it does at start, then after 10 s and longer). */
/** `ready` false: an agent that reports not ready (not confined) is waited for only until it runs. */
async function restartAgent({ ready = true } = {}): Promise<void> {
  const before = (await agentPod()).metadata?.name;
  kubectl('-n', NAMESPACE, 'rollout', 'restart', `daemonset/${AGENT}`);
  if (ready) {
    kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=120s');
    return;
  }
  await waitFor(async () => {
    const pod = await agentPod().catch(() => undefined);
    return pod && pod.metadata?.name !== before && pod.status?.phase === 'Running' && pod.status.podIP;
  }, { description: 'a new agent Pod running', timeoutMs: 120_000 });
}

/** A Job whose main exits at once, and the wait until its main has exited with its sidecar running. */
async function mainExited(name: string) {
  await jobs.runJob(namespace, name, { restartPolicy: 'Never', containers: [container('main', 'sleep 1'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
  return waitFor(async () => {
    const pod = await jobs.onlyPod(namespace, name).catch(() => undefined);
    return pod && containerStatus(pod, 'main')?.state?.terminated && containerStatus(pod, 'proxy')?.state?.running ? pod : undefined;
  }, { description: `the main of ${name} exited, its sidecar running`, timeoutMs: 120_000 });
}

/** A main exited, ten times the agent's usual exit → request later: no request, the sidecar still running, none created on exit. */
async function nothingCreated(name: string): Promise<void> {
  const pod = await mainExited(name);
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const requests = await requestsFor(pod);
  assert.deepEqual(requests.map((r) => r.metadata.name), [], `requests for ${pod.metadata!.name}: ${JSON.stringify(requests.map((r) => r.metadata))}`);
  const proxy = containerStatus(await jobs.onlyPod(namespace, name), 'proxy');
  assert.ok(proxy?.state?.running, `the sidecar is no longer running: ${JSON.stringify(proxy)}`);
  assert.equal(await requestsCreatedOnExit(), 0);
}

const features = versionFeatures();

describe('the agent, on main containers exiting in the runtime', () => {
  before(async () => {
    await deployProject();
    kubectl('-n', NAMESPACE, 'scale', `deployment/${CONTROLLER}`, '--replicas=0');
    await noControllerLeft();
    namespace = await createTestNamespace(core, 'agent-exits');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
    await deployProject(); // the controller back, and its leader elected
  });

  it(`R50: reports its fast path as the cluster allows it (${features.admissionPolicies ? 'enabled' : 'no-permission'} on ${clusterEnv().k8sVersion})`, async () => {
    const want = features.admissionPolicies ? 'enabled' : 'no-permission';
    await waitFor(() => fastPathState(want), { description: `sidecar_terminator_agent_fast_path{state="${want}"} 1`, timeoutMs: 30_000 });
  });

  if (!features.admissionPolicies) {
    it('before 1.30 it creates no request: with the controller down, the sidecar runs on', async () => {
      await nothingCreated('waits');
    });

    it("its token cannot create requests at all (manifests/base grants no create)", async () => {
      const { status, body } = await apiAs({ user: `system:serviceaccount:${NAMESPACE}:${AGENT}` }, 'POST', requestsPath(namespace, { dryRun: true }), {
        apiVersion: 'sidecar-terminator.dev/v1alpha1',
        kind: 'ContainerRecreateRequest',
        metadata: { name: 'create-check', namespace, labels: { 'crr.sidecar-terminator.dev/node-name': clusterEnv().nodeName } },
        spec: { podName: 'p', containers: [{ name: 'c' }] },
      });
      assert.equal(status, 403, JSON.stringify(body));
    });

    it('R50: granted create without the policies (applied on an old cluster by mistake), it still creates nothing', async () => {
      kubectl('apply', '-f', new URL('../manifests/policies/rbac-agent-requests.yaml', import.meta.url).pathname);
      try {
        await restartAgent({ ready: false });
        await waitFor(() => fastPathState('not-confined'), { description: 'sidecar_terminator_agent_fast_path{state="not-confined"} 1', timeoutMs: 30_000 });
        const logs = kubectl('-n', NAMESPACE, 'logs', (await agentPod()).metadata!.name!);
        assert.match(logs, /would let this agent create requests for any node/);
        // Not confined is not quiet: the agent reports not ready, and /readyz says why.
        const readyz = await fetch(`http://${(await agentPod()).status!.podIP}:9440/readyz`);
        assert.equal(readyz.status, 503);
        assert.match(await readyz.text(), /^not confined to its node/);
        await nothingCreated('granted');
      } finally {
        kubectl('delete', '--ignore-not-found', '-f', new URL('../manifests/policies/rbac-agent-requests.yaml', import.meta.url).pathname);
        await restartAgent();
      }
    });

    it('the controller, back, creates the requests and both Jobs complete', async () => {
      kubectl('-n', NAMESPACE, 'scale', `deployment/${CONTROLLER}`, '--replicas=1');
      for (const name of ['waits', 'granted']) {
        const { type } = await jobs.finishedJob(namespace, name);
        assert.equal(type, 'Complete');
        const [request] = await requestsFor(await jobs.onlyPod(namespace, name));
        assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
      }
      assert.ok(await fastPathState('no-permission'));
    });
    return;
  }

  it('R43: Never, main exits 0: the agent creates the request, the Job completes without the controller', async () => {
    const before = await requestsCreatedOnExit();
    await jobs.runJob(namespace, 'alone', { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
    const { job, type } = await jobs.finishedJob(namespace, 'alone');
    const pod = await jobs.onlyPod(namespace, 'alone');
    const [request] = await requestsFor(pod);
    console.log(`# ${jobs.timeline('agent alone, Never', job, pod, 'main', 'proxy', request)}`);
    assert.equal(type, 'Complete');
    assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0);
    assert.equal(request?.metadata.labels?.['crr.sidecar-terminator.dev/node-name'], pod.spec?.nodeName);
    assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
    assert.equal(await requestsCreatedOnExit(), before + 1);
    const ev = await podEvents(pod);
    assert.ok(ev.some((e) => e.startsWith('Normal StoppingSidecars') && e.includes(request!.metadata.name!)), ev.join('\n'));
  });

  it('OnFailure, main fails once: nothing until the restarted main succeeds', async () => {
    const once = 'if [ -f /work/failed-once ]; then sleep 1; exit 0; else touch /work/failed-once; sleep 1; exit 1; fi';
    await jobs.runJob(namespace, 'retry', {
      restartPolicy: 'OnFailure',
      backoffLimit: 6,
      volumes: [{ name: 'work', emptyDir: {} }],
      containers: [
        container('main', once, { volumeMounts: [{ name: 'work', mountPath: '/work' }] }),
        container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] }),
      ],
    });
    const { type } = await jobs.finishedJob(namespace, 'retry');
    const pod = await jobs.onlyPod(namespace, 'retry');
    const requests = await requestsFor(pod);
    assert.equal(type, 'Complete');
    assert.equal(containerStatus(pod, 'main')?.restartCount, 1);
    assert.equal(containerStatus(pod, 'proxy')?.restartCount, 0);
    assert.equal(requests.length, 1);
    // Created after the main's second, successful run ended (API times have 1 s resolution).
    assert.ok(new Date(requests[0]!.metadata.creationTimestamp!).getTime() >= finishedAt(pod, 'main')!.getTime());
  });

  it('the agent dies after sending a stop, before recording it: the next agent stops again (no hook to repeat), and the Job completes', async () => {
    // A stop without a hook is sent beside the isKilled write. To hold the agent in that gap, an
    // admission policy refuses every status write in this namespace; the sidecar takes 15 s to exit
    // on SIGTERM (exit 0: with the controller down, nothing would excuse a sidecar's kill), and
    // the agent is killed inside them, so the next agent finds it still running.
    const refuse = await refuseStatusWrites(namespace);
    try {
      await jobs.runJob(namespace, 'gap', {
        restartPolicy: 'Never', grace: 30,
        containers: [container('main', 'sleep 1'), container('proxy', "trap 'sleep 15; exit 0' TERM; while true; do sleep 1 & wait $!; done", { env: [SIDECAR_MARK] })],
      });
      const pod = await waitFor(async () => {
        const p = await jobs.onlyPod(namespace, 'gap').catch(() => undefined);
        return p && (await podEvents(p)).some((e) => e.startsWith('Normal Killing: Stopping container proxy')) ? p : undefined;
      }, { description: 'the agent sent the stop (its Killing event)', timeoutMs: 60_000 });
      const [unrecorded] = await requestsFor(pod);
      assert.ok(unrecorded, 'the agent created the request');
      assert.equal(unrecorded.status?.containerRecreateStates?.[0]?.isKilled ?? false, false, 'isKilled not recorded: the policy refused the write');
      await crash(await agentPod());
      refuse.allow();
      const { type } = await jobs.finishedJob(namespace, 'gap', 90_000);
      assert.equal(type, 'Complete');
      const done = await jobs.onlyPod(namespace, 'gap');
      assert.equal(containerStatus(done, 'proxy')?.state?.terminated?.exitCode, 0);
      assert.equal(containerStatus(done, 'proxy')?.restartCount, 0);
      const killing = (await podEvents(done)).filter((e) => e.startsWith('Normal Killing: Stopping container proxy'));
      assert.equal(killing.length, 2, `the stop sent again by the next agent, once: ${killing.join('; ')}`);
      const [request] = await requestsFor(done);
      assert.equal(request?.status?.phase, 'Completed');
      assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(request?.status));
    } finally {
      refuse.remove();
    }
  });

  describe('admission (R32): an agent creates requests only for its own node', () => {
    const node = () => clusterEnv().nodeName;
    /** A server-side dry-run create, impersonating the agent with `nodeName` in its token's extra info. */
    async function createAsAgent(nodeName: string, labelNode: string): Promise<{ status: number; message: string }> {
      const { status, body } = await apiAs(
        { user: `system:serviceaccount:${NAMESPACE}:${AGENT}`, extra: { 'authentication.kubernetes.io/node-name': nodeName } },
        'POST',
        requestsPath(namespace, { dryRun: true }),
        {
          apiVersion: 'sidecar-terminator.dev/v1alpha1',
          kind: 'ContainerRecreateRequest',
          metadata: { name: 'admission-check', namespace, labels: { 'crr.sidecar-terminator.dev/node-name': labelNode } },
          spec: { podName: 'p', containers: [{ name: 'c' }] },
        },
      );
      return { status, message: body.message ?? '' };
    }
    it('allowed for its own node', async () => assert.equal((await createAsAgent(node(), node())).status, 201));
    for (const [title, tokenNode, labelNode] of [['another node', () => node(), () => 'other-node'], ['no node in its token', () => '', () => node()]] as const) {
      it(`denied for ${title}`, async () => {
        const { status, message } = await createAsAgent(tokenNode(), labelNode());
        assert.equal(status, 422);
        assert.match(message, /may create and update requests only for Pods on its own node/);
      });
    }
  });
});

/**
 * An admission policy that refuses every request status write in `namespace`; resolves once it is
 * enforced (a probe request's status write is refused). allow() lifts it; remove() also deletes the policy.
 */
async function refuseStatusWrites(namespace: string): Promise<{ allow: () => void; remove: () => void }> {
  const name = `e2e-refuse-status-${namespace}`;
  const dir = mkdtempSync(join(tmpdir(), 'refuse-status-'));
  const file = (base: string, body: unknown) => {
    const path = join(dir, `${base}.json`);
    writeFileSync(path, JSON.stringify(body));
    return path;
  };
  const policy = file('policy', {
    apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: { resourceRules: [{ apiGroups: ['sidecar-terminator.dev'], apiVersions: ['*'], operations: ['UPDATE'], resources: ['containerrecreaterequests/status'] }] },
      validations: [{ expression: 'false', message: 'e2e: request status writes are refused in this namespace' }],
    },
  });
  const binding = file('binding', {
    apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name },
    spec: { policyName: name, validationActions: ['Deny'], matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } },
  });
  // A request no agent acts on (no node label): only its status write is tried.
  const probe = file('probe', {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest', metadata: { name: 'status-probe', namespace },
    spec: { podName: 'none', containers: [{ name: 'none' }] },
  });
  kubectl('apply', '-f', policy, '-f', binding, '-f', probe);
  await waitFor(() => {
    try {
      kubectl('-n', namespace, 'patch', 'containerrecreaterequests', 'status-probe', '--subresource=status', '--type=merge', '-p', '{"status":{"message":"probe"}}');
      return false;
    } catch (err) {
      return /request status writes are refused/.test(String((err as { stderr?: unknown }).stderr));
    }
  }, { description: 'the policy refusing status writes is enforced', timeoutMs: 30_000 });
  return {
    allow: () => { kubectl('delete', '--ignore-not-found', '-f', binding); },
    remove: () => {
      kubectl('delete', '--ignore-not-found', '-f', binding, '-f', policy, '-f', probe);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
