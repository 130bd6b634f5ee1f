// e2e group: shared
// Leaving OpenKruise (docs/migrate-from-openkruise.md) on the local cluster. The OpenKruise chart is
// not at hand, so a stand-in plays Kruise: the test installs a CRD with Kruise's group, version,
// names and request fields (containerrecreaterequests.apps.kruise.io), and creates for a Job Pod
// what Kruise's SidecarTerminator controller creates (a request named sidecar-termination-<pod uid>,
// owned by the Pod, and its SidecarTerminator event). With both CRDs present, sidecar-terminator
// handles the Job once and leaves Kruise's object alone; the guide's checks (step 5) run as written,
// with kubectl; a request written the Kruise way is refused with the field named, and served
// without those fields.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { dump as toYaml } from 'js-yaml';
import { EVENT_REASONS } from '../api/names.ts';
import { clients } from './support/cluster.ts';
import { deployProject } from './support/deploy.ts';
import * as jobs from './support/jobs.ts';
import { kubectl } from './support/kubectl.ts';
import { createTestNamespace, deleteTestNamespace } from './support/namespace.ts';
import { waitFor } from './support/wait.ts';
import { containerStatus } from './support/workloads.ts';

const { core, kc } = clients();
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const KRUISE = { group: 'apps.kruise.io', version: 'v1alpha1', plural: 'containerrecreaterequests' };
const KRUISE_CRD = `${KRUISE.plural}.${KRUISE.group}`;
/** Kruise's event reason when its controller creates a request for a Pod's sidecars. */
const KRUISE_EVENT = 'SidecarTerminator';

/** The stand-in's CRD: Kruise's names, and its request fields as a structural schema. */
function kruiseCrd(): object {
  const int = { type: 'integer' };
  const container = {
    type: 'object',
    required: ['name'],
    properties: {
      name: { type: 'string' },
      preStop: { type: 'object', properties: { exec: { type: 'object', x_preserve: true }, httpGet: { type: 'object', x_preserve: true }, tcpSocket: { type: 'object', x_preserve: true } } },
      ports: { type: 'array', items: { type: 'object', x_preserve: true } },
      statusContext: { type: 'object', properties: { containerID: { type: 'string' }, restartCount: int } },
    },
  };
  const schema = {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        required: ['podName', 'containers'],
        properties: {
          podName: { type: 'string' },
          containers: { type: 'array', items: container },
          strategy: {
            type: 'object',
            properties: {
              failurePolicy: { type: 'string' }, orderedRecreate: { type: 'boolean' }, forceRecreate: { type: 'boolean' },
              terminationGracePeriodSeconds: int, unreadyGracePeriodSeconds: int, minStartedSeconds: int,
            },
          },
          activeDeadlineSeconds: int,
          ttlSecondsAfterFinished: int,
        },
      },
      status: { type: 'object', x_preserve: true },
    },
  };
  // x-kubernetes-preserve-unknown-fields, written short above.
  const openApi = JSON.parse(JSON.stringify(schema).replaceAll('"x_preserve":true', '"x-kubernetes-preserve-unknown-fields":true')) as object;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: KRUISE_CRD },
    spec: {
      group: KRUISE.group,
      scope: 'Namespaced',
      names: { kind: 'ContainerRecreateRequest', listKind: 'ContainerRecreateRequestList', plural: KRUISE.plural, singular: 'containerrecreaterequest', shortNames: ['crr'] },
      versions: [{ name: KRUISE.version, served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: openApi } }],
    },
  };
}

/** What Kruise's controller creates once a marked Job Pod's mains are done: its request, owned by the Pod, and an event. */
async function actAsKruise(pod: V1Pod, sidecars: string[]): Promise<void> {
  const namespace = pod.metadata!.namespace!;
  await custom.createNamespacedCustomObject({
    ...KRUISE, namespace,
    body: {
      apiVersion: `${KRUISE.group}/${KRUISE.version}`, kind: 'ContainerRecreateRequest',
      metadata: {
        name: `sidecar-termination-${pod.metadata!.uid}`,
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid!, controller: true, blockOwnerDeletion: true }],
      },
      spec: { podName: pod.metadata!.name, containers: sidecars.map((name) => ({ name })), strategy: { forceRecreate: true, failurePolicy: 'Ignore' } },
    },
  });
  await core.createNamespacedEvent({
    namespace,
    body: {
      metadata: { generateName: `${pod.metadata!.name}.` },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name, namespace, uid: pod.metadata!.uid },
      reason: KRUISE_EVENT, type: 'Normal', message: `Kruise SidecarTerminator is trying to terminate sidecar [${sidecars.join(' ')}] using crr (stand-in)`,
      source: { component: 'kruise-manager' }, firstTimestamp: new Date(), lastTimestamp: new Date(), count: 1,
    },
  });
}

/** The guide's Job (step 3), with the cluster's local busybox. */
async function migrationCheckJob(namespace: string, name: string): Promise<void> {
  await jobs.runJob(namespace, name, {
    restartPolicy: 'Never',
    containers: [
      jobs.container('main', 'sleep 5'),
      jobs.container('sidecar', jobs.stopOnTerm(0), { env: [jobs.SIDECAR_MARK] }),
    ],
  });
}

const lines = (text: string) => text.split('\n').filter(Boolean);

describe('leaving OpenKruise, with a stand-in for Kruise (docs/migrate-from-openkruise.md)', { timeout: 600_000 }, () => {
  let namespace = '';
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'st-kruise-'));
    writeFileSync(join(dir, 'crd.yaml'), toYaml(kruiseCrd()));
    kubectl('apply', '-f', join(dir, 'crd.yaml'));
    kubectl('wait', '--for=condition=Established', `crd/${KRUISE_CRD}`, '--timeout=60s');
    await deployProject();
    namespace = await createTestNamespace(core, 'migration');
  });
  after(async () => {
    if (namespace) await deleteTestNamespace(core, namespace);
    kubectl('delete', 'crd', KRUISE_CRD, '--ignore-not-found', '--wait=true');
  });

  it('while Kruise still acts on the Pod (steps 2-3): sidecar-terminator handles the Job once and leaves Kruise\'s request alone', async () => {
    await migrationCheckJob(namespace, 'both-acting');
    const pod = await waitFor(async () => {
      const p = (await core.listNamespacedPod({ namespace, labelSelector: 'job-name=both-acting' })).items[0];
      return p?.metadata?.uid && p.spec?.nodeName ? p : undefined;
    }, { description: 'the Job\'s Pod', timeoutMs: 60_000 });
    await actAsKruise(pod, ['sidecar']);
    const kruiseName = `sidecar-termination-${pod.metadata!.uid}`;
    const kruiseBefore = (await custom.getNamespacedCustomObject({ ...KRUISE, namespace, name: kruiseName })) as { metadata: { resourceVersion: string } };

    const { type } = await jobs.finishedJob(namespace, 'both-acting');
    assert.equal(type, 'Complete');
    const finished = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    const ours = await jobs.requestsFor(finished);
    assert.deepEqual(ours.map((r) => r.metadata.name), [kruiseName], 'one request of ours, under the name Kruise also uses, in our group');
    const events = await jobs.podEvents(finished);
    assert.equal(events.filter((e) => e.includes(` ${EVENT_REASONS.stopping}:`)).length, 1, events.join('\n'));
    const sidecar = containerStatus(finished, 'sidecar');
    assert.equal(sidecar?.restartCount, 0);
    assert.equal(sidecar?.state?.terminated?.exitCode, 0, JSON.stringify(sidecar?.state));

    // Kruise's object: never read into our requests, never written.
    const kruiseAfter = (await custom.getNamespacedCustomObject({ ...KRUISE, namespace, name: kruiseName })) as {
      metadata: { resourceVersion: string; labels?: object; finalizers?: string[] }; status?: object;
    };
    assert.equal(kruiseAfter.metadata.resourceVersion, kruiseBefore.metadata.resourceVersion);
    assert.equal(kruiseAfter.metadata.labels, undefined);
    assert.equal(kruiseAfter.metadata.finalizers, undefined);
    assert.equal(kruiseAfter.status, undefined);
  });

  it('after the gate is off (step 5): the guide\'s checks, with kubectl as written, show one handler', async () => {
    await migrationCheckJob(namespace, 'migration-check');
    kubectl('-n', namespace, 'wait', '--for=condition=complete', 'job/migration-check', '--timeout=180s');
    const pod = kubectl('-n', namespace, 'get', 'pods', '-l', 'job-name=migration-check', '-o', 'jsonpath={.items[0].metadata.name}');
    const podUid = kubectl('-n', namespace, 'get', 'pod', pod, '-o', 'jsonpath={.metadata.uid}');
    assert.match(podUid, /^[0-9a-f-]{36}$/);

    assert.deepEqual(lines(kubectl('-n', namespace, 'get', 'stcrr', '-l', `crr.sidecar-terminator.dev/pod-uid=${podUid}`, '-o', 'name')),
      [`containerrecreaterequest.sidecar-terminator.dev/sidecar-termination-${podUid}`]);
    assert.equal(lines(kubectl('-n', namespace, 'get', 'events', '--field-selector', `involvedObject.name=${pod},reason=StoppingSidecars`, '-o', 'name')).length, 1);
    assert.throws(() => kubectl('-n', namespace, 'get', 'containerrecreaterequests.apps.kruise.io', `sidecar-termination-${podUid}`),
      (err: unknown) => /NotFound|not found/.test(String((err as { stderr?: string }).stderr)));
    assert.deepEqual(lines(kubectl('-n', namespace, 'get', 'events', '--field-selector', `involvedObject.name=${pod},reason=${KRUISE_EVENT}`, '-o', 'name')), []);
    const statuses = lines(kubectl('-n', namespace, 'get', 'pod', pod, '-o',
      'jsonpath={range .status.containerStatuses[*]}{.name} {.restartCount} {.state.terminated.reason}{"\\n"}{end}'));
    assert.deepEqual(statuses.sort(), ['main 0 Completed', 'sidecar 0 Completed']);
    // `crr` is still Kruise's short name; ours is stcrr.
    assert.deepEqual(lines(kubectl('-n', namespace, 'get', 'crr', '-o', 'name')).filter((n) => !n.startsWith('containerrecreaterequest.apps.kruise.io/')), []);
  });

  it('a request written for Kruise: refused in our group with preStop or ports, served without them (tools that create requests)', async () => {
    const pod = await waitFor(async () => {
      const p = (await core.listNamespacedPod({ namespace, labelSelector: 'job-name=migration-check' })).items[0];
      return p?.metadata?.name ? p : undefined;
    }, { description: 'a Pod to name' });
    const dir = mkdtempSync(join(tmpdir(), 'st-tool-'));
    const request = (containers: object[]) => ({
      apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'ContainerRecreateRequest',
      metadata: { name: 'from-a-tool', namespace },
      spec: { podName: pod.metadata!.name, containers, strategy: { failurePolicy: 'Fail' }, ttlSecondsAfterFinished: 60 },
    });
    for (const [field, container] of [
      ['preStop', { name: 'sidecar', preStop: { exec: { command: ['sh', '-c', 'true'] } } }],
      ['ports', { name: 'sidecar', ports: [{ containerPort: 80 }] }],
    ] as const) {
      writeFileSync(join(dir, `${field}.yaml`), toYaml(request([container])));
      assert.throws(() => kubectl('create', '--dry-run=server', '-f', join(dir, `${field}.yaml`)),
        (err: unknown) => new RegExp(`${field}`).test(String((err as { stderr?: string }).stderr)), `kubectl create with ${field}`);
    }
    writeFileSync(join(dir, 'plain.yaml'), toYaml(request([{ name: 'sidecar' }])));
    assert.match(kubectl('create', '--dry-run=server', '-f', join(dir, 'plain.yaml')), /containerrecreaterequest\.sidecar-terminator\.dev\/from-a-tool created \(server dry run\)/);
    // The same body under Kruise's group goes to Kruise's CRD, whatever ours says.
    writeFileSync(join(dir, 'kruise.yaml'), toYaml({ ...request([{ name: 'sidecar', ports: [{ containerPort: 80 }] }]), apiVersion: `${KRUISE.group}/${KRUISE.version}` }));
    assert.match(kubectl('create', '--dry-run=server', '-f', join(dir, 'kruise.yaml')), /containerrecreaterequest\.apps\.kruise\.io\/from-a-tool created/);
  });
});
