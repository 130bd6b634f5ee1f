// e2e group: serial — it rolls out the agent, kills the controller's leader and freezes a node.
// Many nodes (a cluster of ST_NODES=3, e2e/cluster/lib.sh): one agent per node, each with its own
// kubelet, containerd and the agent DaemonSet's one hostPath reaching that node's socket.
// - Scoping: Jobs on every node, each request carried out by its own node's agent and no other.
// - A request labelled for another node than its Pod's: no agent stops anything for it.
// - Tokens for real: an agent's own token (a TokenRequest bound to its Pod, as kubelet makes it)
//   may create and write the status of requests for its node only; the API server denies the rest.
// - A virtual node beside real ones: one node labelled as virtual-kubelet nodes are (its real
//   kubelet stands in for a provider's, so the Job can end): the DaemonSet leaves it, the
//   controller swaps the sidecar's image there, and no agent touches its Pods.
// - A rollout of a new agent image across the nodes while stops with hooks are under way on every
//   node: every sidecar stopped once, every hook run once, no Job held up past the drain bound.
// - The controller's leader killed (SIGKILL through its node's runtime) while the mains on every
//   node end: the other replica takes over, every Job completes, one request a Pod.
// - A node going NotReady: its kubelet frozen (SIGSTOP), then its containerd, while its Pods' mains
//   end; the other nodes' Jobs complete meanwhile, no other agent and no image swap touches its
//   Pods, and when it comes back every Job there completes, each sidecar stopped once.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../api/container-recreate-request.ts';
import { STOP_DRAIN_MS } from '../../agent/main.ts';
import { apiAs, requestsPath, type Caller } from '../support/api-as.ts';
import { clients, clusterEnv } from '../support/cluster.ts';
import { AGENT, IMAGE, NAMESPACE, agentPods, controllerLeader, ctr, deployProject, killContainer, podMetric } from '../support/deploy.ts';
import * as jobs from '../support/jobs.ts';
import { SIDECAR_MARK, container, finishedAt, requestsFor, stopOnTerm } from '../support/jobs.ts';
import { kubectl } from '../support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from '../support/namespace.ts';
import { waitFor } from '../support/wait.ts';
import { containerStatus, jobCondition } from '../support/workloads.ts';

const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const nodes = clusterEnv().nodeNames;
const LABEL = { node: 'crr.sidecar-terminator.dev/node-name', uid: 'crr.sidecar-terminator.dev/pod-uid', active: 'crr.sidecar-terminator.dev/active' };
const POLICY_DENIAL = /may create and update requests only for Pods on its own node/;
const QUICK_EXIT = 'sidecar-terminator.local/quick-exit:1';
let namespace: string;

/** Each node's agent Pod, by node name (`on`: the nodes that have one; default all). */
async function agentsByNode(on: readonly string[] = nodes): Promise<Map<string, V1Pod>> {
  const byNode = new Map((await agentPods()).map((p) => [p.spec!.nodeName!, p]));
  assert.deepEqual([...byNode.keys()].sort(), [...on].sort(), `an agent Pod on each of ${on.join(', ')}`);
  return byNode;
}

/** One series of each node's agent, by node name. */
async function metricByNode(series: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [node, pod] of await agentsByNode()) out.set(node, await podMetric(pod, 9440, series));
  return out;
}
const stopsByNode = () => metricByNode('sidecar_terminator_agent_container_stops_total{result="stopped"}');
const succeededByNode = () => metricByNode('sidecar_terminator_agent_requests_completed_total{outcome="succeeded"}');

/** A Job on `node` whose main runs `mainScript` beside a sidecar that exits 0 on SIGTERM. */
function runOn(node: string, name: string, mainScript: string, sidecar: Partial<V1Container> = { env: [SIDECAR_MARK] }): Promise<void> {
  return jobs.runJob(namespace, name, { nodeName: node, restartPolicy: 'Never', containers: [container('main', mainScript), container('proxy', stopOnTerm(0), sidecar)] });
}

/** The pid of a cluster component (e2e/cluster/up.sh records them), e.g. kubelet-3. */
function componentPid(component: string): number {
  return Number(readFileSync(join(clusterEnv().clusterDir, 'run', `${component}.pid`), 'utf8').trim());
}

async function nodeReady(node: string): Promise<string | undefined> {
  return (await core.readNode({ name: node })).status?.conditions?.find((c) => c.type === 'Ready')?.status;
}

/** The Job's Pod once all its containers run. */
function running(name: string): Promise<V1Pod> {
  return waitFor(async () => {
    const pod = await jobs.onlyPod(namespace, name).catch(() => undefined);
    return pod?.status?.containerStatuses?.length && pod.status.containerStatuses.every((s) => s.state?.running) ? pod : undefined;
  }, { description: `the containers of ${name} running`, timeoutMs: 90_000 });
}

function requestBody(name: string, pod: V1Pod, node: string): object {
  return {
    apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest',
    metadata: { name, namespace, labels: { [LABEL.node]: node, [LABEL.uid]: pod.metadata!.uid!, [LABEL.active]: 'true' } },
    spec: { podName: pod.metadata!.name!, containers: [{ name: 'proxy' }] },
  };
}

describe('many nodes: each agent acts for its own node only', { skip: nodes.length < 2 && 'needs a cluster of several nodes (ST_NODES=3 bash e2e/run.sh)' }, () => {
  before(async () => {
    await deployProject();
    namespace = await createTestNamespace(core, 'nodes');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
  });

  it('R54: a cluster policy marks an unmarked sidecar on every node: each node\'s fast path decides for its own Pod, every Job completes', async () => {
    const policy = 'e2e-nodes-mesh';
    const decided = async () => {
      const [created, existed] = [
        await metricByNode('sidecar_terminator_agent_requests_on_exit_total{result="created"}'),
        await metricByNode('sidecar_terminator_agent_requests_on_exit_total{result="existed"}'),
      ];
      return new Map(nodes.map((n) => [n, created.get(n)! + existed.get(n)!]));
    };
    await custom.createClusterCustomObject({
      group: GROUP, version: VERSION, plural: 'clustersidecarpolicies',
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'ClusterSidecarPolicy', metadata: { name: policy },
        spec: { mode: 'Enforce', namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } }, containers: [{ name: 'mesh-proxy' }] } },
    });
    try {
      const before = await decided();
      const names = nodes.map((node, n) => ({ node, job: `policy-${n + 1}` }));
      await Promise.all(names.map(({ node, job }) => jobs.runJob(namespace, job, {
        nodeName: node, restartPolicy: 'Never', containers: [container('main', 'sleep 3'), container('mesh-proxy', stopOnTerm(0))],
      })));
      for (const { node, job } of names) assert.equal((await jobs.finishedJob(namespace, job)).type, 'Complete', `${job} on ${node}`);
      const after = await decided();
      for (const node of nodes) assert.ok(after.get(node)! > before.get(node)!, `the agent of ${node} decided for its policy-marked sidecar`);
    } finally {
      await custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: 'clustersidecarpolicies', name: policy });
    }
  });

  it('R34: Jobs on every node complete, each sidecar stopped by its own node\'s agent and no other', async () => {
    const [before, stopsBefore] = [await succeededByNode(), await stopsByNode()];
    const perNode = 2;
    const names = nodes.flatMap((node, n) => Array.from({ length: perNode }, (_, i) => ({ node, job: `scoped-${n + 1}-${i}` })));
    await Promise.all(names.map(({ node, job }) => runOn(node, job, 'sleep 2')));
    const agents = await agentsByNode();
    const logs = new Map([...agents].map(([node, pod]) => [node, () => kubectl('-n', NAMESPACE, 'logs', pod.metadata!.name!)]));
    const requestNames = new Map<string, string[]>(nodes.map((n) => [n, []]));
    for (const { node, job } of names) {
      const { type } = await jobs.finishedJob(namespace, job);
      assert.equal(type, 'Complete', `${job} on ${node}`);
      const pod = await jobs.onlyPod(namespace, job);
      assert.equal(pod.spec?.nodeName, node);
      assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0, `${job}: the sidecar exited 0 on SIGTERM`);
      const [request, ...more] = await requestsFor(pod);
      assert.equal(more.length, 0, `${job}: one request`);
      assert.equal(request?.metadata.labels?.[LABEL.node], node);
      assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
      requestNames.get(node)!.push(request!.metadata.name!);
    }
    const [after, stopsAfter] = [await succeededByNode(), await stopsByNode()];
    for (const node of nodes) {
      assert.equal(after.get(node)! - before.get(node)!, perNode, `the agent of ${node} carried out its node's ${perNode} requests, no more`);
      assert.equal(stopsAfter.get(node)! - stopsBefore.get(node)!, perNode, `the agent of ${node} stopped each of its node's ${perNode} sidecars once`);
      const log = logs.get(node)!();
      for (const [other, requests] of requestNames) {
        for (const name of requests) {
          if (other === node) assert.ok(log.includes(name), `the agent of ${node} logs its request ${name}`);
          else assert.ok(!log.includes(name), `the agent of ${node} never mentions ${name}, a request of ${other}`);
        }
      }
    }
  });

  it('R29: a request labelled for another node than its Pod\'s stops nothing, and the Job still completes', async () => {
    const [, podNode, labelNode] = nodes;
    assert.ok(podNode && labelNode, 'three nodes');
    await runOn(podNode, 'mislabelled', 'sleep 20');
    const pod = await running('mislabelled');
    const before = await stopsByNode();
    await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, body: requestBody('mislabelled', pod, labelNode) });
    const done = await jobs.completedRequest(namespace, 'mislabelled', 60_000);
    assert.notEqual(done.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.match(done.status?.message ?? '', /refused|does not match|runs on node/, JSON.stringify(done.status));
    const now = await jobs.onlyPod(namespace, 'mislabelled');
    assert.ok(containerStatus(now, 'proxy')?.state?.running, 'the sidecar runs on while its main does');
    assert.equal(containerStatus(now, 'proxy')?.restartCount, 0);
    assert.deepEqual(await stopsByNode(), before, 'no agent stopped anything for it');

    const { type } = await jobs.finishedJob(namespace, 'mislabelled', 120_000);
    assert.equal(type, 'Complete');
    const requests = await requestsFor(await jobs.onlyPod(namespace, 'mislabelled'));
    const ours = requests.find((r) => r.metadata.name !== 'mislabelled');
    assert.equal(ours?.metadata.labels?.[LABEL.node], podNode);
    assert.equal(ours?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(ours?.status));
  });

  it('R32, R50: an agent\'s own token may create and write status for its node\'s requests only', async () => {
    const [own, other] = nodes;
    const agent = (await agentsByNode()).get(own!)!;
    // The token kubelet projects into the agent's Pod: bound to that Pod, so the API server puts
    // the Pod's node in the user's extra info.
    const token = kubectl('-n', NAMESPACE, 'create', 'token', AGENT, '--bound-object-kind', 'Pod',
      '--bound-object-name', agent.metadata!.name!, '--bound-object-uid', agent.metadata!.uid!).trim();
    const caller: Caller = { token };
    await Promise.all([runOn(own!, 'token-own', 'sleep 30'), runOn(other!, 'token-other', 'sleep 30')]);
    const [ownPod, otherPod] = await Promise.all([running('token-own'), running('token-other')]);

    const createOwn = await apiAs(caller, 'POST', requestsPath(namespace, { dryRun: true }), requestBody('token-check', ownPod, own!));
    assert.equal(createOwn.status, 201, JSON.stringify(createOwn.body));
    const createOther = await apiAs(caller, 'POST', requestsPath(namespace, { dryRun: true }), requestBody('token-check', otherPod, other!));
    assert.equal(createOther.status, 422, JSON.stringify(createOther.body)); // a policy's denial: Invalid
    assert.match(createOther.body.message ?? '', POLICY_DENIAL);
    assert.match(createOther.body.message ?? '', new RegExp(`node "${own}"`));

    // Status writes (dry run) to the requests made for the two Jobs, once the controller or the
    // agents have made them (the mains end after 30 s; the requests exist from then).
    const [ownRequest, otherRequest] = await Promise.all([ownPod, otherPod].map((pod) => waitFor(async () => (await requestsFor(pod))[0], { description: `a request for ${pod.metadata!.name}`, timeoutMs: 90_000 })));
    const statusPath = (name: string) => `${requestsPath(namespace)}/${name}/status?dryRun=All`;
    const writeOwn = await apiAs(caller, 'PATCH', statusPath(ownRequest!.metadata.name!), { status: { message: 'written by the agent of its node' } });
    assert.equal(writeOwn.status, 200, JSON.stringify(writeOwn.body));
    const writeOther = await apiAs(caller, 'PATCH', statusPath(otherRequest!.metadata.name!), { status: { message: 'forged' } });
    assert.equal(writeOther.status, 422, JSON.stringify(writeOther.body));
    assert.match(writeOther.body.message ?? '', POLICY_DENIAL);
    for (const job of ['token-own', 'token-other']) assert.equal((await jobs.finishedJob(namespace, job)).type, 'Complete');
  });

  it('R5, R20: a virtual node beside real ones: no agent there, the controller swaps the image, no agent touches its Pods', async () => {
    const virtual = nodes.at(-1)!;
    const real = nodes.filter((n) => n !== virtual);
    kubectl('label', 'node', virtual, 'type=virtual-kubelet', '--overwrite');
    try {
      // The DaemonSet's node affinity leaves the node: its agent Pod is removed.
      await waitFor(async () => !(await agentPods()).some((p) => p.spec?.nodeName === virtual), { description: `no agent Pod on ${virtual}`, timeoutMs: 90_000 });
      const agents = await agentsByNode(real);
      const before = await Promise.all([...agents.values()].map((p) => podMetric(p, 9440, 'sidecar_terminator_agent_requests_completed_total{outcome="succeeded"}')));
      await runOn(virtual, 'on-virtual', 'sleep 2', { env: [SIDECAR_MARK, { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: QUICK_EXIT }] });
      const { type } = await jobs.finishedJob(namespace, 'on-virtual');
      assert.equal(type, 'Complete');
      const pod = await jobs.onlyPod(namespace, 'on-virtual');
      assert.equal(pod.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT, 'the sidecar\'s image swapped');
      assert.deepEqual(await requestsFor(pod), [], 'no request: no agent would carry it out');
      const after = await Promise.all([...agents.values()].map((p) => podMetric(p, 9440, 'sidecar_terminator_agent_requests_completed_total{outcome="succeeded"}')));
      assert.deepEqual(after, before, 'no agent completed a request meanwhile');
      for (const agent of agents.values()) {
        assert.ok(!kubectl('-n', NAMESPACE, 'logs', agent.metadata!.name!).includes(pod.metadata!.name!), `the agent on ${agent.spec!.nodeName} never mentions ${pod.metadata!.name}`);
      }
    } finally {
      kubectl('label', 'node', virtual, 'type-');
    }
    kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=120s');
    await agentsByNode();
  });

  it('R40, R42: a new agent image rolled out across the nodes while stops with hooks run on each: every sidecar stopped once, every hook run once', async () => {
    const perNode = 3;
    const hookSeconds = 3;
    const sidecar: Partial<V1Container> = {
      env: [SIDECAR_MARK],
      lifecycle: { preStop: { exec: { command: ['sh', '-c', `echo HOOK > /proc/1/fd/1; sleep ${hookSeconds}`] } } },
    };
    // Mains end one after another over the rollout, so stops are under way whatever node it is at.
    const runs = nodes.flatMap((node, n) => Array.from({ length: perNode }, (_, i) => ({ node, job: `rolled-${n + 1}-${i}`, mainSeconds: 4 + 3 * i + n })));
    await Promise.all(runs.map(({ node, job, mainSeconds }) => runOn(node, job, `sleep ${mainSeconds}`, sidecar)));
    await Promise.all(runs.map(({ job }) => running(job)));
    const before = new Map([...(await agentsByNode())].map(([node, pod]) => [node, pod.metadata!.name!]));

    // The same image under a new name on every node: a new agent version as a rollout sees it.
    const rolled = `${IMAGE}-rollout`;
    for (const socket of clusterEnv().containerdSockets) {
      if (!ctr(['images', 'ls', '-q'], socket).split('\n').includes(rolled)) ctr(['images', 'tag', IMAGE, rolled], socket);
    }
    const rolloutStartMs = Date.now();
    kubectl('-n', NAMESPACE, 'set', 'image', `daemonset/${AGENT}`, `agent=${rolled}`);
    kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=300s');
    const rolloutEndMs = Date.now();
    const replaced = await agentsByNode();
    for (const [node, pod] of replaced) {
      assert.notEqual(pod.metadata!.name, before.get(node), `the agent of ${node} was replaced`);
      assert.equal(pod.spec!.containers[0]!.image, rolled);
    }

    const during: string[] = [];
    for (const { node, job } of runs) {
      const { job: done, type } = await jobs.finishedJob(namespace, job, 180_000);
      assert.equal(type, 'Complete', `${job} on ${node}`);
      const pod = await jobs.onlyPod(namespace, job);
      const mainEndMs = finishedAt(pod, 'main')!.getTime();
      // Its stop under way during the rollout: the main ended within the hook's time before it, or in it.
      if (mainEndMs >= rolloutStartMs - hookSeconds * 1000 && mainEndMs <= rolloutEndMs) during.push(job);
      const proxy = containerStatus(pod, 'proxy');
      assert.equal(proxy?.state?.terminated?.exitCode, 0, `${job}: its sidecar exited 0 on SIGTERM`);
      assert.equal(proxy?.restartCount, 0);
      const log = kubectl('-n', namespace, 'logs', pod.metadata!.name!, '-c', 'proxy');
      assert.equal((log.match(/^HOOK$/gm) ?? []).length, 1, `${job}: the hook ran once:\n${log}`);
      const [request, ...more] = await requestsFor(pod);
      assert.equal(more.length, 0, `${job}: one request`);
      assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', `${job}: ${JSON.stringify(request?.status)}`);
      // Held up by the rollout at most by the drain bound (an agent replaced mid-stop resumes it).
      const mainEnd = finishedAt(pod, 'main')!.getTime();
      const jobEnd = new Date(jobCondition(done, 'Complete')!.lastTransitionTime!).getTime();
      assert.ok(jobEnd - mainEnd <= hookSeconds * 1000 + STOP_DRAIN_MS + 15_000, `${job}: Complete ${jobEnd - mainEnd} ms after its main`);
    }
    console.log(`# rollout across ${nodes.length} nodes in ${rolloutEndMs - rolloutStartMs} ms; stops under way during it: ${during.join(', ') || 'none'}`);
    assert.ok(during.length > 0, 'some stops were under way during the rollout');
    await deployProject(); // the agent's usual image back
  });

  it('R49: the controller\'s leader killed while the mains on every node end: the other replica takes over, every Job completes once', async () => {
    const leader = await controllerLeader();
    const runs = nodes.flatMap((node, n) => [0, 1, 2].map((i) => ({ node, job: `failover-${n + 1}-${i}`, mainSeconds: 3 + 2 * i })));
    await Promise.all(runs.map(({ node, job, mainSeconds }) => runOn(node, job, `sleep ${mainSeconds}`)));
    await Promise.all(runs.map(({ job }) => running(job)));
    killContainer(leader);
    for (const { node, job } of runs) {
      const { job: done, type } = await jobs.finishedJob(namespace, job, 180_000);
      assert.equal(type, 'Complete', `${job} on ${node}`);
      const pod = await jobs.onlyPod(namespace, job);
      assert.equal(containerStatus(pod, 'proxy')?.state?.terminated?.exitCode, 0, `${job}: its sidecar exited 0 on SIGTERM`);
      const [request, ...more] = await requestsFor(pod);
      assert.equal(more.length, 0, `${job}: one request`);
      assert.equal(request?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', `${job}: ${JSON.stringify(request?.status)}`);
      const mainEnd = finishedAt(pod, 'main')!.getTime();
      const jobEnd = new Date(jobCondition(done, 'Complete')!.lastTransitionTime!).getTime();
      assert.ok(jobEnd - mainEnd <= 30_000, `${job}: Complete ${jobEnd - mainEnd} ms after its main`);
    }
    const next = await controllerLeader(120_000);
    assert.ok(next.metadata!.name !== leader.metadata!.name || (next.status?.containerStatuses?.[0]?.restartCount ?? 0) > 0, 'a new leader, or the old one restarted');
  });

  it('R43: a node going NotReady (kubelet, then containerd frozen) while its mains end: nothing else touches its Pods, and all converge when it is back', async () => {
    const k = nodes.length;
    const down = nodes[k - 1]!;
    const others = nodes.slice(0, -1);
    const sidecar: Partial<V1Container> = {
      env: [SIDECAR_MARK],
      lifecycle: { preStop: { exec: { command: ['sh', '-c', 'echo HOOK > /proc/1/fd/1; sleep 1'] } } },
    };
    // `early` ends while only kubelet is frozen (its agent still sees the exit through containerd);
    // `late` ends while containerd is frozen too (nothing on the node learns of it until then).
    await runOn(down, 'down-early', 'sleep 6', sidecar);
    await runOn(down, 'down-late', 'sleep 25', sidecar);
    const [early, late] = await Promise.all([running('down-early'), running('down-late')]);
    const kubelet = componentPid(`kubelet-${k}`);
    const containerd = componentPid(`containerd-${k}`);
    const frozenAtMs = Date.now();
    process.kill(kubelet, 'SIGSTOP');
    try {
      // The early main ends meanwhile: its node's agent stops the sidecar (the request says so),
      // though no kubelet reports it. Then containerd goes too, before the late main ends.
      const [earlyRequest] = await waitFor(async () => {
        const requests = await requestsFor(early);
        return requests[0]?.status?.phase === 'Completed' ? requests : undefined;
      }, { description: 'the early Job\'s request carried out with its kubelet frozen', timeoutMs: 20_000 });
      assert.equal(earlyRequest?.status?.containerRecreateStates?.[0]?.phase, 'Succeeded', JSON.stringify(earlyRequest?.status));
      process.kill(containerd, 'SIGSTOP');
      await waitFor(async () => (await nodeReady(down)) === 'Unknown', { description: `${down} NotReady`, timeoutMs: 90_000 });
      console.log(`# ${down} NotReady ${Date.now() - frozenAtMs} ms after its kubelet froze`);
      // The rest of the cluster goes on.
      await Promise.all(others.map((node, i) => runOn(node, `beside-${i}`, 'sleep 2')));
      for (const [i] of others.entries()) assert.equal((await jobs.finishedJob(namespace, `beside-${i}`)).type, 'Complete');
      await waitFor(async () => (await jobs.onlyPod(namespace, 'down-late')).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'False',
        { description: 'the late Pod marked not ready by the node controller', timeoutMs: 60_000 });
      assert.deepEqual(await requestsFor(late), [], 'no request for a main nobody saw end');
      const lateNow = await jobs.onlyPod(namespace, 'down-late');
      assert.notEqual(lateNow.spec?.containers.find((c) => c.name === 'proxy')?.image, QUICK_EXIT, 'no image swap on a real node gone NotReady');
    } finally {
      process.kill(containerd, 'SIGCONT');
      process.kill(kubelet, 'SIGCONT');
    }
    await waitFor(async () => (await nodeReady(down)) === 'True', { description: `${down} Ready again`, timeoutMs: 90_000 });
    for (const [job, pod] of [['down-early', early], ['down-late', late]] as const) {
      assert.equal((await jobs.finishedJob(namespace, job, 180_000)).type, 'Complete', job);
      const done = await jobs.onlyPod(namespace, job);
      const proxy = containerStatus(done, 'proxy');
      assert.equal(proxy?.state?.terminated?.exitCode, 0, `${job}: its sidecar exited 0 on SIGTERM`);
      assert.equal(proxy?.restartCount, 0);
      const log = kubectl('-n', namespace, 'logs', done.metadata!.name!, '-c', 'proxy');
      assert.equal((log.match(/^HOOK$/gm) ?? []).length, 1, `${job}: the hook ran once:\n${log}`);
      const requests = await requestsFor(pod);
      assert.equal(requests.length, 1, `${job}: one request`);
      assert.equal(requests[0]?.metadata.labels?.[LABEL.node], down);
    }
    for (const [node, agent] of await agentsByNode()) {
      if (node === down) continue;
      const log = kubectl('-n', NAMESPACE, 'logs', agent.metadata!.name!);
      for (const pod of [early, late]) assert.ok(!log.includes(pod.metadata!.name!), `the agent of ${node} never mentions ${pod.metadata!.name}`);
    }
  });
});
