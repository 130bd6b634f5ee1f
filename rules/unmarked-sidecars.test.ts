// Rule R52 (docs/design.md): Pods held open by a well-known sidecar nobody marked.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANNOTATION_SIDECARS, EVENT_REASONS } from '../api/names.ts';
import { classify } from './classify.ts';
import { projectPod } from './projection.ts';
import type { PodSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, main, makePod, reasons, sidecar } from '../test/support/pods.ts';
import { mayBeHeldByUnmarkedSidecar, unmarkedHolders, wellKnownSidecar } from './unmarked-sidecars.ts';

describe('R52: well-known sidecars, by the name injectors give them or by their image', () => {
  const rows: Array<{ name: string; image: string; id: string | undefined }> = [
    { name: 'istio-proxy', image: 'anything:1', id: 'istio' },
    { name: 'envoy', image: 'docker.io/istio/proxyv2:1.24.0', id: 'istio' },
    { name: 'mesh', image: 'gcr.io/istio-release/proxyv2@sha256:0123', id: 'istio' },
    { name: 'mesh', image: 'example.com/proxyv2:1', id: undefined },
    { name: 'linkerd-proxy', image: 'x', id: 'linkerd' },
    { name: 'proxy', image: 'cr.l5d.io/linkerd/proxy:edge-24.1.1', id: 'linkerd' },
    { name: 'vault-agent', image: 'hashicorp/vault:1.18', id: 'vault' },
    { name: 'daprd', image: 'x', id: 'dapr' },
    { name: 'dapr', image: 'ghcr.io/dapr/daprio/daprd:1.14', id: 'dapr' },
    { name: 'db', image: 'gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0', id: 'cloud-sql-proxy' },
    { name: 'db', image: 'gcr.io/cloudsql-docker/gce-proxy:1.33', id: 'cloud-sql-proxy' },
    { name: 'otc-container', image: 'x', id: 'opentelemetry' },
    { name: 'collector', image: 'otel/opentelemetry-collector-contrib:0.110.0', id: 'opentelemetry' },
    { name: 'logs', image: 'fluent/fluent-bit:3.1', id: 'fluent-bit' },
    { name: 'app', image: 'busybox', id: undefined },
    { name: 'proxy', image: 'nginx:1', id: undefined },
    { name: 'logs', image: 'example.com/fluent-bit-helper:1', id: undefined },
    { name: 'Istio-Proxy', image: 'x', id: undefined },
  ];
  for (const row of rows) {
    it(`${row.name} (${row.image}): ${row.id ?? 'not one'}`, () => {
      assert.equal(wellKnownSidecar(row)?.id, row.id);
    });
  }
});

describe('R52: a Pod held open by a well-known sidecar nobody marked', () => {
  const istio = (state: PodSpec['containers'][number]['state'] = 'running') => main('istio-proxy', state);
  const rows: Array<{ name: string; pod: PodSpec; held: string[] }> = [
    { name: 'the main done, istio-proxy unmarked and running: held', pod: { containers: [main('app', exited(0)), istio()] }, held: ['istio-proxy'] },
    { name: 'the main failed under Never: held', pod: { containers: [main('app', exited(1)), istio()] }, held: ['istio-proxy'] },
    { name: 'OnFailure, the main failed (kubelet runs it again): not held', pod: { restartPolicy: 'OnFailure', containers: [main('app', exited(1)), istio()] }, held: [] },
    { name: 'the main still running: not held', pod: { containers: [main('app'), istio()] }, held: [] },
    { name: 'istio-proxy exited too: not held', pod: { containers: [main('app', exited(0)), istio(exited(0))] }, held: [] },
    { name: 'istio-proxy waiting (restarting): held', pod: { containers: [main('app', exited(0)), istio('waiting')] }, held: ['istio-proxy'] },
    { name: 'a main without status yet: not held', pod: { containers: [main('app', exited(0)), main('other', 'noStatus'), istio()] }, held: [] },
    { name: 'only well-known sidecars: nothing shows the work is over', pod: { containers: [istio(), main('linkerd-proxy')] }, held: [] },
    {
      name: 'two unmarked, a marked one beside them: both unmarked named',
      pod: { containers: [main('app', exited(0)), istio(), main('vault-agent', 'running', { image: 'hashicorp/vault:1' }), sidecar('logs')] },
      held: ['istio-proxy', 'vault-agent'],
    },
    { name: 'marked by the annotation: not held', pod: { containers: [main('app', exited(0)), istio()], annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy' } }, held: [] },
    { name: 'marked by the env: not held', pod: { containers: [main('app', exited(0)), sidecar('istio-proxy')] }, held: [] },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const pod = projectPod(makePod(row.pod));
      assert.deepEqual(unmarkedHolders(pod, classify(pod).mains).map((h) => h.container), row.held);
    });
  }

  it('decide: held, with one Warning naming the container and how to mark it, and no action', () => {
    const decision = expectKind(decideFor(makePod({ containers: [main('app', exited(0)), istio(), sidecar('logs')] })), 'notHandled');
    assert.equal(decision.reason, 'heldByUnmarkedSidecar');
    assert.deepEqual(decision.holders?.map((h) => [h.container, h.sidecar.id]), [['istio-proxy', 'istio']]);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.unmarkedSidecarHoldsPod]);
    const [event] = decision.events;
    assert.match(event!.message, /"istio-proxy" \(Istio's proxy\) still running after every other container finished/);
    assert.match(event!.message, new RegExp(`Pod annotation ${ANNOTATION_SIDECARS}`));
    assert.match(event!.message, /To stop "istio-proxy" after the other sidecars \(which may send through it\), name it in sidecar-terminator\.dev\/stop-last too\./);
  });

  it('decide: once the sidecar is marked (the annotation added to the running Pod), a request stops it', () => {
    const decision = decideFor(makePod({ containers: [main('app', exited(0)), istio()], annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy' } }));
    assert.equal(decision.kind, 'createRequest');
  });

  it('the controller keeps a Pod that may be held: restartPolicy Never or OnFailure, a well-known container', () => {
    const kept = (spec: PodSpec) => mayBeHeldByUnmarkedSidecar(projectPod(makePod(spec)));
    assert.equal(kept({ containers: [main('app'), istio()] }), true);
    assert.equal(kept({ restartPolicy: 'OnFailure', containers: [main('app'), istio()] }), true);
    assert.equal(kept({ restartPolicy: 'Always', containers: [main('app'), istio()] }), false);
    assert.equal(kept({ containers: [main('app'), main('proxy')] }), false);
  });
});
