// e2e group: serial — it takes the pattern off the request CRD, and its fat requests load both parts.
// Hostile requests, round two (issue 24, items 1 and 3), tried on the real cluster: what a
// user who may create requests and Pods in their own namespace can make our controller and agent
// pay for.
// - Dot names: a request for Pod `.` or `..` is refused by the CRD; one stored before the CRD had its
//   pattern (the pattern is taken off for the test) makes neither part read the namespace's Pod list.
// - Fat requests: six requests with ~0.6 MB of labels each, kept active on the agent's node,
//   crash neither part; their heap and RSS before and after are logged.
// Its attacks on names that load or change nothing beyond their namespace (squatted request names, a
// Pod bound to a node that does not exist) run beside other files: e2e/security-names.test.ts.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../api/container-recreate-request.ts';
import { clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { AGENT_METRICS_PORT, CONTROLLER_METRICS_PORT, agentPod, controllerLeader, deployProject, podMetric } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { container } from './support/jobs.ts';
import { kubectl, without } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { sleep, waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const LABEL = { node: 'crr.sidecar-terminator.dev/node-name', uid: 'crr.sidecar-terminator.dev/pod-uid', active: 'crr.sidecar-terminator.dev/active' };
const CRD = 'containerrecreaterequests.sidecar-terminator.dev';
const MiB = 1024 * 1024;

let ns: string;

function requestBody(name: string, podName: string, containers: string[], o: { labels?: Record<string, string>; spec?: object } = {}): object {
  return {
    apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest',
    metadata: { name, namespace: ns, ...(o.labels ? { labels: o.labels } : {}) },
    spec: { podName, containers: containers.map((c) => ({ name: c })), ...o.spec },
  };
}

const createRequest = (body: object) => custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: ns, body });

/** The sum of the API server's apiserver_request_total series carrying every one of `labels`. */
function apiserverRequests(labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const env = clusterEnv();
  // Megabytes of metrics: more than kubectl()'s output buffer.
  const text = execFileSync(join(env.k8sBinDir, 'kubectl'), ['--kubeconfig', env.kubeconfig, 'get', '--raw', '/metrics'], { encoding: 'utf8', maxBuffer: 256 * MiB });
  return text.split('\n')
    .filter((l) => l.startsWith('apiserver_request_total{') && wanted.every((w) => l.includes(w)))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** A Pod started on the cluster's node (the admin's: the attacker's namespace may let its owner create Pods). */
async function startPod(name: string, script: string): Promise<V1Pod> {
  await core.createNamespacedPod({ namespace: ns, body: {
    metadata: { name },
    spec: { nodeName: clusterEnv().nodeName, terminationGracePeriodSeconds: 5, dnsPolicy: 'Default', containers: [container('app', script)] },
  } });
  return waitFor(async () => {
    const p = await core.readNamespacedPod({ namespace: ns, name });
    return containerStatus(p, 'app')?.state?.running ? p : undefined;
  }, { description: `Pod ${name} running`, timeoutMs: 90_000 });
}

interface Footprint { rssBytes: number; heapBytes: number }

/**
 * The process's resident memory and its JavaScript heap in use, from its /metrics: the lowest of a
 * few samples, so that garbage not yet collected at one sample does not count as kept.
 */
async function footprint(pod: () => Promise<V1Pod>, port: number): Promise<Footprint> {
  let rssBytes = Infinity;
  let heapBytes = Infinity;
  for (let i = 0; i < 4; i++) {
    if (i > 0) await sleep(2_000);
    const p = await pod();
    rssBytes = Math.min(rssBytes, await podMetric(p, port, 'process_resident_memory_bytes'));
    heapBytes = Math.min(heapBytes, await podMetric(p, port, 'nodejs_heap_size_used_bytes'));
  }
  return { rssBytes, heapBytes };
}

const FAT_REQUESTS = 6;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

describe('security: hostile requests, round two (issue 24)', { timeout: 1_200_000 }, () => {
  before(async () => {
    await deployProject();
    ns = await createTestNamespace(core, 'hostile');
  });
  after(async () => {
    if (ns) await deleteTestNamespace(core, ns, { timeoutMs: 180_000 });
  });

  it('a request for Pod "." or ".." is refused by the CRD; one stored without the pattern reads no Pod list', async () => {
    for (const [i, podName] of ['.', '..', 'a/b'].entries()) {
      await assert.rejects(createRequest(requestBody(`refused-${i}`, podName, ['app'])),
        (err: unknown) => err instanceof k8s.ApiException && err.code === 422, `podName ${podName}`);
    }
    // As if stored by an older release, whose CRD had no pattern: the pattern is taken off, the
    // requests created, the CRD's own schema put back once they are gone.
    const schema = '/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/podName';
    const crd = JSON.parse(kubectl('get', 'crd', CRD, '-o', 'json')) as { spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: { podName: object } } } } } }[] } };
    const own = crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties.podName;
    const setSchema = (value: object) => kubectl('patch', 'crd', CRD, '--type=json', '-p', JSON.stringify([{ op: 'replace', path: schema, value }]));
    setSchema({ type: 'string', minLength: 1, maxLength: 253, description: 'no pattern (e2e)' });
    try {
      const labels = { [LABEL.node]: clusterEnv().nodeName, [LABEL.active]: 'true' };
      const before = apiserverRequests({ resource: 'pods', scope: 'namespace', verb: 'LIST' });
      // The API server takes a moment to serve the changed schema.
      await waitFor(async () => {
        await createRequest(requestBody('dot', '.', ['app'], { labels }));
        return true;
      }, { description: 'a request for Pod "." accepted without the pattern', timeoutMs: 30_000 });
      await createRequest(requestBody('dotdot', '..', ['app'], { labels }));
      const done = await Promise.all(['dot', 'dotdot'].map((name) => jobs.completedRequest(ns, name, 60_000)));
      for (const r of done) assert.match(r.status?.message ?? '', /not a valid Pod name|not found/, JSON.stringify(r.status));
      // The controller's resync reads every request again: still no list.
      await sleep(20_000);
      const lists = apiserverRequests({ resource: 'pods', scope: 'namespace', verb: 'LIST' }) - before;
      assert.equal(lists, 0, `namespace-wide Pod LISTs while the requests for "." and ".." were there: ${lists}`);
    } finally {
      for (const name of ['dot', 'dotdot']) kubectl('-n', ns, 'delete', '--ignore-not-found', '--wait=true', `${PLURAL}.${GROUP}`, name);
      setSchema(own);
    }
  });

  // Memory is measured here and reported, not asserted: a heap on a shared 2-core machine is too
  // noisy for a bound. What the caches keep of a request is pinned by rules/requests.test.ts.
  it('R35: 6 requests with ~0.6 MB of labels each, created active on the agent\'s node: each admitted by the controller, then taken up by the agent; both keep running, memory logged', async () => {
    // On 1.30+ an admission policy refuses such requests (e2e/security-bounds.test.ts): taken off here.
    if (versionFeatures().admissionPolicies) await without('validatingadmissionpolicybinding', 'request-metadata.sidecar-terminator.dev', fatRequests);
    else await fatRequests();
  });

  async function fatRequests() {
    const target = await startPod('target', 'while true; do sleep 1; done');
    const controller = () => controllerLeader();
    // Earlier tests may have restarted either part: what counts is a restart from here on.
    const restartsOf = async (pod: () => Promise<V1Pod>) => {
      const { metadata, status } = await pod();
      return { name: metadata!.name!, restarts: (status?.containerStatuses ?? []).reduce((sum, c) => sum + c.restartCount, 0) };
    };
    const restartsBefore = [await restartsOf(agentPod), await restartsOf(controller)];
    const footprints = async () => {
      const [agent, controllerNow] = await Promise.all([footprint(agentPod, AGENT_METRICS_PORT), footprint(controller, CONTROLLER_METRICS_PORT)]);
      return { agent, controller: controllerNow };
    };
    const start = await footprints();
    // Keys as long as the API allows (a 253-character prefix, a 63-character name), 63-character values.
    const prefix = ['a', 'b', 'c'].map((c) => c.repeat(63)).join('.') + '.' + 'd'.repeat(61);
    const fat = (n: number): Record<string, string> => {
      const labels: Record<string, string> = {};
      for (let i = 0, size = 0; size < 600_000; i++) {
        const key = `${prefix}/l-${n}-${i}-${'x'.repeat(60)}`.slice(0, prefix.length + 1 + 63);
        const value = `v${n}-${i}-${'y'.repeat(60)}`.slice(0, 63);
        labels[key] = value;
        size += key.length + value.length + 6;
      }
      return labels;
    };
    const labels = { [LABEL.node]: clusterEnv().nodeName, [LABEL.active]: 'true' };
    let bytes = 0;
    for (let n = 0; n < FAT_REQUESTS; n++) {
      const body = requestBody(`fat-${n}`, 'target', ['app'], {
        labels: { ...fat(n), ...labels },
        // The agent holds each until the container has run an hour: they stay active.
        spec: { activeDeadlineSeconds: 3600, strategy: { minStartedSeconds: 3600 } },
      });
      bytes += JSON.stringify(body).length;
      await createRequest(body);
    }
    // Each admitted by the controller and taken up by the agent (it writes a status); each read
    // until it is, one at a time (a list of them all is several MB). Created with our node and
    // active labels, each is left by the agent to the controller's admission (R35): an agent that
    // refused one first, for its missing pod-uid label, kept it from ever being admitted.
    const pending = new Set(Array.from({ length: FAT_REQUESTS }, (_, n) => `fat-${n}`));
    const waitStartMs = Date.now();
    await waitFor(async () => {
      for (const name of [...pending]) {
        const r = await jobs.readRequest(ns, name);
        if (r && r.metadata.labels?.[LABEL.uid] === target.metadata!.uid && r.status?.phase) pending.delete(name);
      }
      return pending.size === 0;
    }, { description: 'the fat requests admitted and taken up by the agent', timeoutMs: 180_000, intervalMs: 5_000 });
    console.log(`# fat requests admitted and taken up by the agent in ${Math.round((Date.now() - waitStartMs) / 1000)} s`);
    await sleep(20_000);
    const end = await footprints();
    const report = (['controller', 'agent'] as const).map((part) =>
      `${part}: heap ${mib(start[part].heapBytes)} -> ${mib(end[part].heapBytes)} (${mib(end[part].heapBytes - start[part].heapBytes)}), ` +
      `RSS ${mib(start[part].rssBytes)} -> ${mib(end[part].rssBytes)} (${mib(end[part].rssBytes - start[part].rssBytes)})`).join('; ');
    console.log(`fat requests: ${FAT_REQUESTS} created, ${mib(bytes)} in all; ${report}`);
    const restartsAfter = [await restartsOf(agentPod), await restartsOf(controller)];
    assert.deepEqual(restartsAfter, restartsBefore, `the same agent and controller Pods, not restarted under the fat requests (${report})`);
  }
});
