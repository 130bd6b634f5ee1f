// Hostile and large input: bounded requests, bounded events, bounded projections; and the exits the
// agent saw before kubelet reported them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_REQUEST_CONTAINERS } from '../api/container-recreate-request.ts';
import { ANNOTATION_IGNORE_EXIT_CODE, ANNOTATION_SIDECARS, EVENT_REASONS } from '../api/names.ts';
import type { Decision } from './decision.ts';
import type { ContainerSpec } from '../test/support/pods.ts';
import { decideFor, exited, expectKind, FAST_RETRY, IGNORE_EXIT_CODE, imageSidecar, main, makePod, reasons, request, sidecar, UID } from '../test/support/pods.ts';
import { MAX_ANNOTATION_CHARS, projectPod } from './projection.ts';
import type { ExistingRequestContainer } from './requests.ts';
import { requestName } from './requests.ts';

const names = (n: number, prefix = 's') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
const junk = (bytes: number) => {
  const parts: string[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const name = `junk-${i}`;
    parts.push(name);
    size += name.length + 1;
  }
  return parts.join(',');
};

/** No decision carries two events of one reason, nor an overlong message. */
function assertBoundedEvents(decision: Decision): void {
  const seen = new Set<string>();
  for (const event of decision.events) {
    assert.ok(!seen.has(event.reason), `two ${event.reason} events`);
    seen.add(event.reason);
    assert.ok(event.message.length <= 1024, `${event.reason}: ${event.message.length} characters`);
    assert.ok(event.key.length <= 400, `${event.reason}: key of ${event.key.length} characters`);
  }
}

describe('R15: more sidecars than one request holds', () => {
  const many = makePod({ containers: [main('app', exited(0)), ...names(200).map((n) => sidecar(n))] });

  it('the first request takes the first 64, in spec order, and says the rest follow', () => {
    const decision = expectKind(decideFor(many), 'createRequest');
    assert.deepEqual(decision.containers, names(MAX_REQUEST_CONTAINERS));
    assert.equal(decision.request.spec.containers.length, MAX_REQUEST_CONTAINERS);
    assert.match(decision.events.at(-1)?.message ?? '', /"s0", "s1", "s2", "s3", "s4" and 59 more with .* 136 more follow in the next request/);
    assertBoundedEvents(decision);
  });

  it('the next 64 follow once it completed, at once, without backoff or retry Warning', () => {
    const afterFirst = makePod({
      containers: [main('app', exited(0)), ...names(200).map((n, i) => sidecar(n, i < MAX_REQUEST_CONTAINERS ? exited(0) : 'running'))],
    });
    const first = request({ attempt: 1, containers: names(MAX_REQUEST_CONTAINERS), completedAgoMs: 0 });
    const decision = expectKind(decideFor(afterFirst, 'real', [first], { options: FAST_RETRY }), 'createRequest');
    assert.equal(decision.attempt, 2);
    assert.deepEqual(decision.containers, names(128).slice(64));
    assert.equal(decision.delayMs, 0);
    assert.equal(decision.retryOf, undefined);
    assert.deepEqual(reasons(decision), [EVENT_REASONS.stopping]);
  });

  it('one left running by the first goes first in the next, at once (it comes with never-asked ones), with a Warning', () => {
    const afterFirst = makePod({
      containers: [main('app', exited(0)), ...names(200).map((n, i) => sidecar(n, i < MAX_REQUEST_CONTAINERS && i !== 3 ? exited(0) : 'running'))],
    });
    const first = request({ attempt: 1, containers: names(MAX_REQUEST_CONTAINERS), completedAgoMs: 0 });
    const decision = expectKind(decideFor(afterFirst, 'real', [first], { options: FAST_RETRY }), 'createRequest');
    assert.deepEqual(decision.containers, ['s3', ...names(127).slice(64)]);
    assert.equal(decision.delayMs, 0);
    assert.equal(decision.retryOf, requestName(UID, 1));
    assert.deepEqual(reasons(decision), [EVENT_REASONS.retrying, EVENT_REASONS.stopping]);
  });
});

describe('bad input gives one event per Pod and reason (R4, R47)', () => {
  const rows: Array<{ name: string; pod: () => ReturnType<typeof makePod>; reason: string; match: RegExp }> = [
    {
      name: '100 KiB of junk names in the sidecars annotation',
      pod: () => makePod({ containers: [main('app', exited(0)), sidecar('proxy')], annotations: { [ANNOTATION_SIDECARS]: junk(100 * 1024) } }),
      reason: EVENT_REASONS.unknownContainer,
      match: /"junk-0", "junk-1", "junk-2", "junk-3", "junk-4" and \d+ more, which are not containers.*the rest was not read/,
    },
    {
      name: 'a name of 10,000 characters',
      pod: () => makePod({ containers: [main('app', exited(0)), sidecar('proxy')], annotations: { [ANNOTATION_IGNORE_EXIT_CODE]: `proxy,${'x'.repeat(10_000)}` } }),
      reason: EVENT_REASONS.unknownContainer,
      match: new RegExp(`names "${'x'.repeat(63)}…", which is not a container`),
    },
    {
      name: 'one 100 KiB entry without a comma',
      pod: () => makePod({ containers: [main('app', exited(0)), sidecar('proxy')], annotations: { [ANNOTATION_SIDECARS]: 'y'.repeat(100 * 1024) } }),
      reason: EVENT_REASONS.unknownContainer,
      match: new RegExp(`longer than the ${MAX_ANNOTATION_CHARS} characters`),
    },
    {
      name: '200 image-only sidecars on a real node',
      pod: () => makePod({ containers: [main('app', exited(0)), ...names(200).map((n) => imageSidecar(n, 'exit0:1'))] }),
      reason: EVENT_REASONS.notStoppable,
      match: /Sidecars "s0", "s1", "s2", "s3", "s4" and 195 more have only/,
    },
    {
      name: '200 request sidecars on a virtual node',
      pod: () => makePod({ containers: [main('app', exited(0)), ...names(200).map((n) => sidecar(n))] }),
      reason: EVENT_REASONS.notStoppable,
      match: /and 195 more are to be stopped through a ContainerRecreateRequest/,
    },
    {
      name: '200 sidecars that exited non-zero under Never',
      pod: () => makePod({ containers: [main('app', exited(0)), ...names(200).map((n) => sidecar(n, exited(1))), sidecar('last')] }),
      reason: EVENT_REASONS.sidecarFailedPod,
      match: /"s0" \(code 1\).* and 195 more exited non-zero/,
    },
    {
      name: '200 containers with an ineffective ignore-exit-code marker',
      pod: () => makePod({ containers: [main('app', exited(0)), sidecar('proxy'), ...names(200).map((n) => main(n, exited(0), { env: [IGNORE_EXIT_CODE] }))] }),
      reason: EVENT_REASONS.markerIneffective,
      match: /and 195 more are marked ignore-exit-code/,
    },
    {
      name: '200 sidecars that never started',
      pod: () => makePod({ containers: [main('app', exited(0)), ...names(200).map((n): ContainerSpec => ({ name: n, state: 'waiting', id: null, env: sidecar(n).env }))] }),
      reason: EVENT_REASONS.sidecarNotStarted,
      match: /"s4" \(ContainerCreating\) and 195 more have not started/,
    },
  ];
  for (const row of rows) {
    for (const node of ['real', 'virtual'] as const) {
      it(`${row.name} (${node} node)`, () => {
        const decision = decideFor(row.pod(), node);
        assertBoundedEvents(decision);
        if (row.reason === EVENT_REASONS.notStoppable && !row.name.includes(`${node} node`)) return;
        const event = decision.events.find((e) => e.reason === row.reason);
        assert.ok(event, `no ${row.reason} in ${reasons(decision).join(',')}`);
        assert.match(event.message, row.match);
      });
    }
  }

  it('R4, R48: the projection keeps no raw annotation, and at most a few unknown names', () => {
    const pod = projectPod(makePod({ containers: [main('app'), sidecar('proxy')], annotations: { [ANNOTATION_SIDECARS]: `proxy,${junk(100 * 1024)}`, [ANNOTATION_IGNORE_EXIT_CODE]: 'z'.repeat(10_000) } }));
    assert.ok(JSON.stringify(pod.annotations).length < 1_000, JSON.stringify(pod.annotations).slice(0, 200));
    assert.deepEqual(pod.annotations.sidecars.containers, ['proxy']);
    assert.equal(pod.annotations.sidecars.unknownSample.length, 5);
    assert.equal(pod.annotations.sidecars.truncated, true);
    assert.ok(pod.annotations.sidecars.unknownCount > 1_000 / 2);
  });

  it('a large annotation costs little time', () => {
    const annotated = makePod({ containers: [main('app', exited(0)), sidecar('proxy')], annotations: { [ANNOTATION_SIDECARS]: junk(250 * 1024) } });
    const start = performance.now();
    for (let i = 0; i < 50; i++) decideFor(annotated);
    assert.ok(performance.now() - start < 2_000, `${performance.now() - start} ms for 50 decisions`);
  });
});

describe('R16: an exit the agent saw, not yet reported by kubelet', () => {
  const running = makePod({ containers: [main('app', exited(0)), sidecar('proxy')] });
  const stopped = (over: Partial<ExistingRequestContainer> = {}): ExistingRequestContainer => ({
    name: 'proxy',
    statusContext: { containerID: 'containerd://proxy-id', restartCount: 0 },
    state: { phase: 'Succeeded', exitCode: 0 },
    ...over,
  });

  it('within 30 s of the request completing: wait for the report, a few seconds at a time, no Warning', () => {
    const decision = expectKind(decideFor(running, 'real', [request({ containers: [stopped()], completedAgoMs: 2_000 })]), 'wait');
    assert.equal(decision.reason, 'statusReportPending');
    assert.equal(decision.requeueAfterMs, 5_000);
    assert.deepEqual(decision.events, []);
  });

  it('near the end of the 30 s: look again when they are over', () => {
    const decision = expectKind(decideFor(running, 'real', [request({ containers: [stopped()], completedAgoMs: 28_000 })]), 'wait');
    assert.equal(decision.requeueAfterMs, 2_000);
  });

  const retries: Array<[string, ExistingRequestContainer, number]> = [
    ['after the 30 s', stopped(), 31_000],
    ['the request recorded another container', stopped({ statusContext: { containerID: 'containerd://older', restartCount: 0 } }), 2_000],
    ['the request recorded a failure', stopped({ state: { phase: 'Failed', message: 'runtime down' } }), 2_000],
    ['the request recorded no exit code', stopped({ state: { phase: 'Succeeded' } }), 2_000],
  ];
  for (const [name, container, ago] of retries) {
    it(`retried as today: ${name}`, () => {
      const decision = expectKind(decideFor(running, 'real', [request({ containers: [container], completedAgoMs: ago })]), 'createRequest');
      assert.equal(decision.retryOf, requestName(UID, 1));
      assert.ok(reasons(decision).includes(EVENT_REASONS.retrying));
    });
  }

  it('other sidecars are not held up by one whose report is due', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('proxy'), sidecar('log')] });
    const decision = expectKind(decideFor(pod, 'real', [request({ containers: [stopped()], completedAgoMs: 2_000 })]), 'createRequest');
    assert.deepEqual(decision.containers, ['log']);
    assert.equal(decision.retryOf, undefined);
  });
});

describe('R9: a terminal Pod gets no new request', () => {
  for (const phase of ['Succeeded', 'Failed']) {
    for (const node of ['real', 'virtual'] as const) {
      it(`${phase} (${node} node)`, () => {
        const pod = makePod({ phase, containers: [main('app', exited(0)), sidecar('proxy', 'running', [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: 'exit0:1' }])] });
        const decision = expectKind(decideFor(pod, node, [request({ containers: ['proxy'], completedAgoMs: 100_000 })]), 'wait');
        assert.equal(decision.reason, 'podTerminal');
      });
    }
  }
});
