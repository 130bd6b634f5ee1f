// e2e group: serial — it installs the previous release and uninstalls.
// Upgrading and uninstalling, as docs/upgrade.md says to:
// - from the previous release (the manifests as of commit 9ddbeee, taken from git) to this one's
//   manifests/default, with a Job before and one after. 1.30+ only: the previous release did not
//   install before 1.30 (its base held the ValidatingAdmissionPolicy kinds and a CRD rule 1.27's
//   cost estimator refuses). It runs today's image, the only one there is offline: what is tested is
//   what `kubectl apply` does to the previous release's objects, and that the result works;
// - uninstalling in the documented order with a request that holds our finalizer
//   (unreadyGracePeriodSeconds on a Pod with our readiness gate) and a Job in flight: nothing hangs,
//   and the controller puts the Pod's readiness back before it goes;
// - uninstalling with the controller removed first: a namespace holding such a request hangs on our
//   finalizer until the recovery block of docs/upgrade.md, run as it stands, unblocks it and puts
//   the other Pod's readiness back; the rest of the uninstall then completes.
// Every case removes the kubectl deployment of e2e/support/deploy.ts; after() deploys it again, so
// later test files find the project as before.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { GROUP, PLURAL, READINESS_CONDITION, READINESS_FINALIZER, VERSION } from '../api/container-recreate-request.ts';
import { apiStatus, clients, clusterEnv, versionFeatures } from './support/cluster.ts';
import { AGENT, CONTROLLER, NAMESPACE, agentPod, controllerLeader, deployProject, noControllerLeft, podMetric, writeOverlay } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { container, SIDECAR_MARK, stopOnTerm } from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const ROOT = new URL('..', import.meta.url).pathname;
/** The previous release: the last commit before manifests/policies split off the base. */
const PREVIOUS = '9ddbeee';
const CRD = 'containerrecreaterequests.sidecar-terminator.dev';
const PART_OF = 'app.kubernetes.io/part-of=sidecar-terminator';
/** The reasons the controller gives our condition (crr/requests-controller.ts applyReadiness). */
const NOT_READY_REASON = 'ContainerRecreating';
const READY_AGAIN_REASON = 'ContainerRecreateFinished';
const features = versionFeatures();
const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);

type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; uid?: string } };
const key = (o: Obj) => `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;

/** `kubectl kustomize DIR`, parsed. */
function kustomize(dir: string): Obj[] {
  return (loadAll(kubectl('kustomize', dir)) as (Obj | null)[]).filter((o): o is Obj => o !== null);
}

/** `kind.group` for kubectl get, from an object of that kind. */
const resourceOf = (o: Obj) => (o.apiVersion.includes('/') ? `${o.kind.toLowerCase()}.${o.apiVersion.split('/')[0]}` : o.kind.toLowerCase());

/** The objects of these kinds on the cluster that carry the install's label. */
function liveObjects(kinds: Obj[]): Obj[] {
  const resources = [...new Set(kinds.map(resourceOf))];
  return (JSON.parse(kubectl('get', resources.join(','), '-A', '-l', PART_OF, '-o', 'json')) as { items: Obj[] }).items;
}

function json<T>(...args: string[]): T {
  return JSON.parse(kubectl(...args, '-o', 'json')) as T;
}

/** The verbs a ClusterRole grants on requests, or undefined when there is no such ClusterRole. */
function requestVerbs(clusterRole: string): string[] | undefined {
  const names = kubectl('get', 'clusterroles', '-o', 'name').split('\n');
  if (!names.includes(`clusterrole.rbac.authorization.k8s.io/${clusterRole}`)) return undefined;
  const role = json<{ rules: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[] }>('get', 'clusterrole', clusterRole);
  return role.rules.filter((r) => r.apiGroups?.includes(GROUP) && r.resources?.includes(PLURAL)).flatMap((r) => r.verbs).sort();
}

/** The admission policies and their bindings, by name, with their uids. */
function policies(): Map<string, string> {
  const list = json<{ items: Obj[] }>('get', 'validatingadmissionpolicies,validatingadmissionpolicybindings', '-l', PART_OF);
  return new Map(list.items.map((o) => [key(o), o.metadata.uid ?? '']));
}

/** Both workloads rolled out and a leader elected, as deployProject() waits for them. */
async function rolledOut(): Promise<void> {
  kubectl('wait', '--for=condition=Established', '--timeout=60s', `crd/${CRD}`);
  kubectl('-n', NAMESPACE, 'rollout', 'status', `daemonset/${AGENT}`, '--timeout=180s');
  kubectl('-n', NAMESPACE, 'rollout', 'status', `deployment/${CONTROLLER}`, '--timeout=180s');
  await controllerLeader(90_000);
}

async function ourPods(): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/name=sidecar-terminator' })).items;
}

const agentMetric = async (series: string) => podMetric(await agentPod(), 9440, series);

/** A Job whose sidecar runs until stopped; resolves once it is complete, with its request. */
async function jobCompletes(namespace: string, name: string): Promise<ContainerRecreateRequest> {
  await jobs.runJob(namespace, name, { restartPolicy: 'Never', containers: [container('main', 'sleep 2'), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
  const { type } = await jobs.finishedJob(namespace, name);
  assert.equal(type, 'Complete');
  const [request] = await jobs.requestsFor(await jobs.onlyPod(namespace, name));
  assert.ok(request, `a request for the Pod of Job ${name}`);
  assert.equal(request.status?.containerRecreateStates?.[0]?.phase, 'Succeeded');
  return request;
}

/** A Job whose main and sidecar both run until stopped: in flight for as long as the test needs. */
async function jobInFlight(namespace: string, name: string): Promise<void> {
  await jobs.runJob(namespace, name, { restartPolicy: 'Never', containers: [container('main', stopOnTerm(0)), container('proxy', stopOnTerm(0), { env: [SIDECAR_MARK] })] });
  await waitFor(async () => {
    const pod = await jobs.onlyPod(namespace, name).catch(() => undefined);
    return pod && ['main', 'proxy'].every((c) => containerStatus(pod, c)?.state?.running);
  }, { description: `Job ${name} running`, timeoutMs: 60_000 });
}

const readinessOf = (pod: V1Pod) => pod.status?.conditions?.find((c) => c.type === READINESS_CONDITION);
const podReady = (pod: V1Pod) => pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

/**
 * A Pod with our readiness gate, ready (the test sets the gate True, as its owner would), and a
 * request for it with unreadyGracePeriodSeconds long enough to stay in flight; resolves once the
 * controller has put its finalizer on the request and our condition on the Pod to False.
 */
async function requestHoldingFinalizer(namespace: string): Promise<void> {
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: 'gated' },
      spec: {
        nodeName: clusterEnv().nodeName,
        restartPolicy: 'Always',
        terminationGracePeriodSeconds: 5,
        dnsPolicy: 'Default',
        readinessGates: [{ conditionType: READINESS_CONDITION }],
        containers: [container('worker', stopOnTerm(0))],
      },
    },
  });
  await waitFor(async () => {
    await core.patchNamespacedPodStatus({
      namespace, name: 'gated',
      body: { status: { conditions: [{ type: READINESS_CONDITION, status: 'True', lastTransitionTime: new Date() }] } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
    return podReady(await core.readNamespacedPod({ namespace, name: 'gated' }));
  }, { description: `Pod ${namespace}/gated ready through its gate`, timeoutMs: 60_000 });
  await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, plural: PLURAL, namespace,
    body: {
      apiVersion: `${GROUP}/${VERSION}`, kind: 'ContainerRecreateRequest', metadata: { name: 'unready' },
      spec: { podName: 'gated', containers: [{ name: 'worker' }], strategy: { unreadyGracePeriodSeconds: 600 } },
    },
  });
  await waitFor(async () => {
    const request = await jobs.readRequest(namespace, 'unready');
    const pod = await core.readNamespacedPod({ namespace, name: 'gated' });
    const condition = readinessOf(pod);
    return request?.metadata.finalizers?.includes(READINESS_FINALIZER) && condition?.status === 'False' && condition.reason === NOT_READY_REASON && !podReady(pod);
  }, { description: `request ${namespace}/unready holding our finalizer, its Pod not ready`, timeoutMs: 60_000 });
}

/** Our condition back to True and the Pod Ready again. */
function readyAgain(namespace: string): Promise<V1Pod> {
  return waitFor(async () => {
    const pod = await core.readNamespacedPod({ namespace, name: 'gated' });
    return readinessOf(pod)?.status === 'True' && podReady(pod) ? pod : undefined;
  }, { description: `Pod ${namespace}/gated: our condition True, Ready`, timeoutMs: 60_000 });
}

/** Every request of the cluster that still carries our finalizer ("namespace/name"). */
async function heldRequests(): Promise<string[]> {
  try {
    const list = (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as { items: ContainerRecreateRequest[] };
    return list.items.filter((r) => r.metadata.finalizers?.includes(READINESS_FINALIZER)).map((r) => `${r.metadata.namespace}/${r.metadata.name}`);
  } catch (err) {
    if (apiStatus(err) === 404) return []; // the CRD is gone
    throw err;
  }
}

function crdExists(): boolean {
  return kubectl('get', 'crd', '-o', 'name').split('\n').includes(`customresourcedefinition.apiextensions.k8s.io/${CRD}`);
}

/** The block of docs/upgrade.md marked for this test: the recovery after the controller was removed first. */
function documentedRecovery(): string {
  const text = readFileSync(join(ROOT, 'docs/upgrade.md'), 'utf8');
  const marker = text.indexOf('<!-- e2e/upgrade.test.ts runs the next block as it stands -->');
  assert.ok(marker >= 0, 'docs/upgrade.md marks its recovery block');
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(marker));
  assert.ok(block?.[1], 'a sh block after the marker');
  return block[1];
}

/**
 * Runs the recovery block as a user pasting it would (bash, no -e), with the cluster's kubectl first
 * on PATH and its kubeconfig; its output, each line marked for the test log.
 */
function runRecovery(): { status: number | null; output: string } {
  const env = clusterEnv();
  const run = spawnSync('bash', ['-c', documentedRecovery()], {
    encoding: 'utf8', timeout: 60_000,
    env: { ...process.env, PATH: `${env.k8sBinDir}:${process.env.PATH ?? ''}`, KUBECONFIG: env.kubeconfig },
  });
  const output = `${run.stdout}${run.stderr}`.trim().split('\n').filter(Boolean).map((l) => `# recovery: ${l}`).join('\n');
  return { status: run.status, output };
}

/** The current deployment's overlay (written by deployProject()). */
const overlay = () => join(clusterEnv().clusterDir, 'overlay');

/** Once an uninstall is over (namespace and CRD gone, or never deleted), the project deployed again. */
async function deployAfterUninstall(): Promise<void> {
  await waitFor(async () => {
    try {
      return (await core.readNamespace({ name: NAMESPACE })).metadata?.deletionTimestamp === undefined;
    } catch (err) {
      if (apiStatus(err) === 404) return true;
      throw err;
    }
  }, { description: `namespace ${NAMESPACE} not being deleted`, timeoutMs: 120_000, intervalMs: 1000 });
  await waitFor(() => !crdExists() || json<Obj & { metadata: { deletionTimestamp?: string } }>('get', 'crd', CRD).metadata.deletionTimestamp === undefined,
    { description: `CRD ${CRD} not being deleted`, timeoutMs: 60_000, intervalMs: 1000 });
  await deployProject();
}

describe('upgrade and uninstall', () => {
  const namespaces: string[] = [];
  let previousDir: string | undefined;

  before(async () => {
    await deployProject(); // the overlay and the project image exist, whatever ran before
  });

  after(async () => {
    // Each step whatever the others did, so that the deployment comes back in any case. A test that
    // failed half-way may have left our finalizer behind: the recovery takes it off first.
    const steps: [string, () => unknown][] = [
      ['recovery', () => runRecovery()],
      ...namespaces.map((ns): [string, () => unknown] => [`namespace ${ns}`, () => deleteTestNamespace(core, ns, { timeoutMs: 60_000 })]),
      ['previous release files', () => previousDir && rmSync(previousDir, { recursive: true, force: true })],
      ['deploy', () => deployAfterUninstall()],
    ];
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (err) {
        console.log(`# cleanup, ${what}: ${(err as Error).message}`);
      }
    }
  });

  const newTestNamespace = async (prefix: string) => {
    const ns = await createTestNamespace(core, prefix);
    namespaces.push(ns);
    return ns;
  };

  it(`upgrades from the previous release (${PREVIOUS}): kubectl apply -k manifests/default over its manifests, Jobs complete before and after`, {
    skip: !features.admissionPolicies && 'the previous release installed only on 1.30+ (ValidatingAdmissionPolicy kinds and a CRD rule in its base)',
  }, async () => {
    try {
      execFileSync('git', ['-C', ROOT, 'cat-file', '-e', `${PREVIOUS}^{commit}`], { stdio: 'ignore' });
    } catch {
      assert.fail(`this test installs the manifests of commit ${PREVIOUS}: the checkout needs the git history that holds it`);
    }
    // The previous release's manifests, with the e2e overlay (image, runtime directory, resyncs).
    previousDir = join(clusterEnv().clusterDir, 'upgrade-previous');
    rmSync(previousDir, { recursive: true, force: true });
    mkdirSync(previousDir, { recursive: true });
    execFileSync('bash', ['-c', `git -C "$1" archive "$2" manifests | tar -x -C "$3"`, 'archive', ROOT, PREVIOUS, previousDir], { stdio: ['ignore', 'ignore', 'inherit'] });
    const previousOverlay = writeOverlay(join(previousDir, 'manifests/base'), join(previousDir, 'overlay'));
    const previousObjects = kustomize(previousOverlay);
    const currentObjects = kustomize(overlay());

    // The current deployment removed, the CRD too (a fresh install of the previous release), but
    // not the Namespace, which both releases declare the same. Foreground: its Pods are gone too.
    // One List: kubectl before 1.35 reads a file that starts with `{` as JSON alone (JSON documents
    // between `---` lines failed on 1.31.14: "invalid character '-' in numeric literal").
    const removed = join(previousDir, 'removed.json');
    writeFileSync(removed, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: currentObjects.filter((o) => o.kind !== 'Namespace') }));
    kubectl('delete', '--ignore-not-found', '--cascade=foreground', '--wait=true', '--timeout=180s', '-f', removed);
    await waitFor(async () => (await ourPods()).length === 0, { description: `no Pod of the current deployment left in ${NAMESPACE}`, timeoutMs: 120_000 });

    kubectl('apply', '-k', previousOverlay);
    await rolledOut();
    assert.deepEqual(requestVerbs(AGENT), ['create', 'list', 'watch'], 'the previous release grants create in the agent ClusterRole');
    assert.equal(requestVerbs(`${AGENT}-requests`), undefined);
    const policiesBefore = policies();
    assert.equal(policiesBefore.size, 4, [...policiesBefore.keys()].join(', '));
    const namespace = await newTestNamespace('upgrade');
    const earlier = await jobCompletes(namespace, 'before-upgrade');

    // The upgrade: this release's manifests/default (through the same overlay), applied over them.
    await deployProject();
    assert.deepEqual(requestVerbs(AGENT), ['list', 'watch'], 'the agent ClusterRole, updated in place, lost create');
    assert.deepEqual(requestVerbs(`${AGENT}-requests`), ['create'], 'manifests/policies grants it');
    // The previous release's policies and bindings are the same objects, updated in place; this
    // release adds the request-metadata and sidecar-policy-size policies and their bindings.
    const policiesAfter = policies();
    assert.deepEqual(new Map([...policiesAfter].filter(([name]) => policiesBefore.has(name))), policiesBefore, 'the policies and their bindings: the same objects, updated in place');
    assert.deepEqual([...policiesAfter.keys()].filter((name) => !policiesBefore.has(name)).sort(),
      ['request-metadata', 'sidecar-policy-size'].flatMap((p) => [`ValidatingAdmissionPolicy ${p}.sidecar-terminator.dev`, `ValidatingAdmissionPolicyBinding ${p}.sidecar-terminator.dev`]).sort());
    // Nothing to prune: every object of the previous release has a namesake in this one, and the
    // cluster holds exactly this release's objects.
    const currentKeys = currentObjects.map(key).sort();
    assert.deepEqual(previousObjects.map(key).filter((k) => !currentKeys.includes(k)), []);
    assert.deepEqual(liveObjects([...previousObjects, ...currentObjects]).map(key).sort(), currentKeys);
    const agent = await agentPod();
    assert.ok(agent.spec!.containers[0]!.env?.some((e) => e.name === 'POD_NAMESPACE'), 'the agent rolled to the new DaemonSet');
    await waitFor(async () => (await agentMetric('sidecar_terminator_agent_fast_path{state="enabled"}')) === 1,
      { description: "the upgraded agent's fast path enabled", timeoutMs: 60_000 });
    // The request stored under the previous CRD is still there and readable.
    const stored = await jobs.readRequest(namespace, earlier.metadata.name!);
    assert.equal(stored?.status?.phase, 'Completed');
    await jobCompletes(namespace, 'after-upgrade');
  });

  it('uninstalls in the documented order with a request holding our finalizer and a Job in flight: nothing hangs, readiness restored', async () => {
    await deployAfterUninstall(); // after the upgrade case, this is a re-apply
    const namespace = await newTestNamespace('uninstall');
    await requestHoldingFinalizer(namespace);
    await jobInFlight(namespace, 'in-flight');

    // 1. The agent.
    kubectl('-n', NAMESPACE, 'delete', 'daemonset', AGENT, '--timeout=60s');
    await waitFor(async () => !(await ourPods()).some((p) => p.metadata?.labels?.['app.kubernetes.io/component'] === 'agent'),
      { description: 'no agent Pod', timeoutMs: 60_000 });
    // 2. The requests, the controller still running: it restores readiness and takes its finalizer off.
    const started = Date.now();
    kubectl('delete', 'stcrr', '--all', '-A', '--timeout=60s');
    console.log(`# kubectl delete stcrr --all -A: ${Date.now() - started} ms`);
    const pod = await readyAgain(namespace);
    assert.equal(readinessOf(pod)?.reason, READY_AGAIN_REASON);
    assert.deepEqual(await heldRequests(), []);
    // 3. The rest, CRD and namespace included; kubectl waits for every object to be gone.
    kubectl('delete', '-k', overlay(), '--ignore-not-found', '--timeout=180s');
    assert.equal(crdExists(), false);
    assert.ok(podReady(await core.readNamespacedPod({ namespace, name: 'gated' })), 'still Ready once we are gone');
    await deleteTestNamespace(core, namespace, { timeoutMs: 60_000 });
  });

  it('uninstalls with the controller removed first: the recovery of docs/upgrade.md unblocks the namespace and restores readiness', async () => {
    await deployAfterUninstall();
    const held = await newTestNamespace('uninstall-held');
    const namespace = await newTestNamespace('uninstall-ctl');
    await requestHoldingFinalizer(held);
    await requestHoldingFinalizer(namespace);
    await jobInFlight(namespace, 'in-flight');

    kubectl('-n', NAMESPACE, 'delete', 'deployment', CONTROLLER, '--cascade=foreground', '--timeout=90s');
    await noControllerLeft();
    // Without the controller, deleting a namespace that holds such a request hangs on our finalizer.
    await core.deleteNamespace({ name: held });
    const hanging = await waitFor(async () => {
      const ns = await core.readNamespace({ name: held });
      return ns.status?.conditions?.find((c) => c.type === 'NamespaceFinalizersRemaining' && c.status === 'True' && c.message?.includes(READINESS_FINALIZER));
    }, { description: `namespace ${held} waiting on ${READINESS_FINALIZER}`, timeoutMs: 60_000 });
    console.log(`# ${held}: ${hanging.message}`);
    assert.equal(readinessOf(await core.readNamespacedPod({ namespace, name: 'gated' }))?.status, 'False', 'nobody restores readiness');
    assert.deepEqual((await heldRequests()).sort(), [`${held}/unready`, `${namespace}/unready`].sort());

    const recovery = runRecovery();
    console.log(recovery.output);
    assert.equal(recovery.status, 0, recovery.output);
    await deleteTestNamespace(core, held, { timeoutMs: 30_000 });
    const pod = await readyAgain(namespace);
    assert.equal(readinessOf(pod)?.reason, READY_AGAIN_REASON);
    assert.deepEqual(await heldRequests(), []);

    // The rest of the uninstall completes, the CRD too; then the namespace of the Job in flight goes.
    kubectl('delete', '-k', overlay(), '--ignore-not-found', '--timeout=180s');
    assert.equal(crdExists(), false);
    const remaining = await core.readNamespacedPod({ namespace, name: 'gated' });
    assert.equal(readinessOf(remaining)?.status, 'True', `no ${READINESS_CONDITION} condition of ours left False`);
    await deleteTestNamespace(core, namespace, { timeoutMs: 60_000 });
  });
});
