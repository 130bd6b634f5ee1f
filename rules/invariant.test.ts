// The phase invariant, attacked: no decision ever says Succeeded unless every main container's
// current state is terminated with exit code 0. Mains are known here from how the Pod was generated,
// independently of classify().
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container, V1EnvVar, V1Pod } from '@kubernetes/client-node';
import type { NodeKind } from './classify.ts';
import { ANNOTATION_IGNORE_EXIT_CODE, ANNOTATION_SIDECARS, ENV_IGNORE_EXIT_CODE, ENV_TERMINATE_WHEN_JOB_EXIT, ENV_TERMINATE_WITH_IMAGE } from '../api/names.ts';
import type { Decision, PhasePatchCause } from './decision.ts';
import type { ContainerSpec, StateSpec } from '../test/support/pods.ts';
import { decideFor, exited, main, makePod, request, sidecar, IGNORE_EXIT_CODE } from '../test/support/pods.ts';
import { warning } from './events.ts';
import { guardedPhase, phasePatch } from './phase.ts';
import { projectPod } from './projection.ts';
import type { ExistingRequest } from './requests.ts';

/** Small deterministic PRNG (mulberry32), so a failure is reproducible from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Role = 'main' | 'envSidecar' | 'imageSidecar' | 'bothSidecar' | 'annotatedSidecar';

interface Generated {
  pod: V1Pod;
  mains: string[];
  node: NodeKind;
  requests: ExistingRequest[];
}

function generate(seed: number): Generated {
  const r = rng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(r() * items.length)] as T;
  const chance = (p: number) => r() < p;
  const trueish = () => pick(['true', 'TRUE', 'True', 'tRuE']);
  // Env that must NOT make a main a sidecar.
  const decoys = (): V1EnvVar[] =>
    pick([
      [],
      [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'false' }],
      [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
      [{ name: ENV_TERMINATE_WITH_IMAGE, value: '' }],
      [{ name: ENV_TERMINATE_WITH_IMAGE, valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
      [{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }],
      [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'true' }, { name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'no' }],
    ]);
  const state = (): StateSpec => pick<StateSpec>(['running', 'waiting', exited(0), exited(0), exited(0), exited(1), exited(2), exited(137), exited(143), exited(128), 'noStatus']);

  const count = Math.floor(r() * 6);
  const containers: ContainerSpec[] = [];
  const mains: string[] = [];
  const annotated: string[] = [];
  const ignoreAnnotated: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `c${i}`;
    const role = pick<Role>(['main', 'main', 'envSidecar', 'imageSidecar', 'bothSidecar', 'annotatedSidecar']);
    const s = state();
    const extra = {
      restarts: Math.floor(r() * 3),
      ...(chance(0.15) ? { id: null } : {}),
      ...(chance(0.2) ? { image: 'exit0:1' } : {}),
      // Finished long ago (past the start timeout), just now, or at an unknown time.
      finishedAgoMs: pick([10_000, 500_000, 500_000, null]),
      waitingReason: pick(['ContainerCreating', 'ErrImagePull', 'CrashLoopBackOff']),
    };
    const ignoreEnv = chance(0.4) ? [{ name: ENV_IGNORE_EXIT_CODE, value: trueish() }] : [];
    if (chance(0.3)) ignoreAnnotated.push(name);
    if (role === 'main') {
      mains.push(name);
      containers.push(main(name, s, { ...extra, env: decoys() }));
    } else if (role === 'envSidecar') {
      containers.push({ name, state: s, ...extra, env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: trueish() }, ...ignoreEnv] });
    } else if (role === 'imageSidecar') {
      containers.push({ name, state: s, ...extra, env: [{ name: ENV_TERMINATE_WITH_IMAGE, value: 'exit0:1' }, ...ignoreEnv] });
    } else if (role === 'bothSidecar') {
      containers.push(sidecar(name, s, [{ name: ENV_TERMINATE_WITH_IMAGE, value: 'exit0:1' }, ...ignoreEnv], extra));
    } else {
      annotated.push(name);
      containers.push({ name, state: s, ...extra, env: ignoreEnv });
    }
  }
  // Duplicated status entries: a running or failed copy must not hide behind a succeeded one.
  const pod = makePod({
    containers,
    restartPolicy: pick(['Never', 'Never', 'OnFailure', 'OnFailure', 'Always']),
    phase: pick(['Running', 'Running', 'Running', 'Pending', 'Succeeded', 'Failed', 'Unknown']),
    deleting: chance(0.05),
    annotations: {
      ...(annotated.length || chance(0.2) ? { [ANNOTATION_SIDECARS]: [...annotated, ...(chance(0.2) ? ['ghost'] : [])].join(' , ') } : {}),
      ...(ignoreAnnotated.length ? { [ANNOTATION_IGNORE_EXIT_CODE]: ignoreAnnotated.join(',') } : {}),
    },
  });
  if (chance(0.1) && pod.status?.containerStatuses?.length) {
    const copy = structuredClone(pod.status.containerStatuses[0]);
    if (copy) {
      copy.state = pick([{ running: {} }, { terminated: { exitCode: 1 } }, { waiting: {} }]);
      pod.status.containerStatuses.push(copy);
    }
  }
  const requests = Array.from({ length: Math.floor(r() * 3) }, (_, i) =>
    request({
      attempt: i + 1,
      // Forged: our name, another node or Pod in the labels, or none.
      ...(chance(0.15) ? { labels: pick([null, { nodeName: 'node-2' }, { podUid: 'other' }]) } : {}),
      completed: chance(0.7),
      completedAgoMs: Math.floor(r() * 100_000),
      containers: containers.filter(() => chance(0.5)).map((c) => ({
        name: c.name,
        statusContext: { containerID: `containerd://${c.name}-id`, restartCount: Math.floor(r() * 3) },
        state: { phase: 'Succeeded' as const, ...(chance(0.7) ? { exitCode: pick([0, 1, 137, 143]) } : {}) },
      })),
    }),
  );
  return { pod, mains, node: pick<NodeKind>(['real', 'virtual', 'agentless']), requests };
}

/** Ground truth from the raw Pod: there is a main, and every status entry of every main terminated with exit 0. */
function mainsTrulySucceeded(pod: V1Pod, mains: readonly string[]): boolean {
  const statuses = pod.status?.containerStatuses ?? [];
  return mains.length > 0 && mains.every((name) => {
    const own = statuses.filter((s) => s.name === name);
    return own.length > 0 && own.every((s) => s.state?.terminated?.exitCode === 0 && !s.state.running && !s.state.waiting);
  });
}

function assertInvariant(decision: Decision, g: Generated, seed: number): void {
  const said = JSON.stringify(decision);
  if (!said.includes('Succeeded')) return;
  // Only a patchPhase may carry a phase; and where it says Succeeded, the mains must have succeeded.
  if (decision.kind === 'patchPhase') {
    assert.equal(decision.statusPatch.status.phase, decision.phase, `seed ${seed}`);
    if (decision.phase === 'Succeeded') {
      assert.ok(mainsTrulySucceeded(g.pod, g.mains), `seed ${seed}: Succeeded with mains ${g.mains.join(',')} not all exit 0`);
    }
  } else {
    // Other decisions may mention a request's container phase "Succeeded", never a Pod phase.
    assert.ok(!('phase' in decision), `seed ${seed}`);
  }
}

describe('invariant (R26): never Succeeded unless every main terminated with exit 0', () => {
  it('holds over 60000 generated Pods, nodes and request histories', () => {
    let succeeded = 0;
    let failed = 0;
    const byCause = new Map<PhasePatchCause, { succeeded: number; failed: number }>();
    for (let seed = 1; seed <= 60_000; seed++) {
      const g = generate(seed);
      const decision = decideFor(g.pod, g.node, g.requests);
      assertInvariant(decision, g, seed);
      if (decision.kind === 'patchPhase') {
        if (decision.phase === 'Succeeded') succeeded++;
        else failed++;
        const counts = byCause.get(decision.cause) ?? { succeeded: 0, failed: 0 };
        counts[decision.phase === 'Succeeded' ? 'succeeded' : 'failed']++;
        byCause.set(decision.cause, counts);
      }
    }
    // The attack must actually reach both outcomes, by every cause, or it proves nothing.
    assert.ok(succeeded > 100, `only ${succeeded} Succeeded patches generated`);
    assert.ok(failed > 100, `only ${failed} Failed patches generated`);
    for (const cause of ['ignoreExitCode', 'restartLoop', 'sidecarNotStarted'] as const) {
      const counts = byCause.get(cause);
      assert.ok(counts && counts.succeeded > 10, `${cause}: ${JSON.stringify(counts)}`);
      if (cause !== 'restartLoop') assert.ok(counts.failed > 10, `${cause}: ${JSON.stringify(counts)}`);
    }
  });

  it('flipping any one main of a Succeeded patch to running, waiting, failed or missing gives Failed or no patch', () => {
    let attacked = 0;
    for (let seed = 1; seed <= 200_000 && attacked < 200; seed++) {
      const g = generate(seed);
      const decision = decideFor(g.pod, g.node, g.requests);
      if (decision.kind !== 'patchPhase' || decision.phase !== 'Succeeded' || g.mains.length === 0) continue;
      attacked++;
      for (const name of g.mains) {
        for (const mutate of mutations) {
          const pod = structuredClone(g.pod);
          const statuses = pod.status?.containerStatuses ?? [];
          mutate(statuses, name);
          const after = decideFor(pod, g.node, g.requests);
          const g2 = { ...g, pod };
          assertInvariant(after, g2, seed);
          assert.ok(!(after.kind === 'patchPhase' && after.phase === 'Succeeded'), `seed ${seed}, main ${name}`);
        }
      }
    }
    assert.ok(attacked >= 100, `only ${attacked} Pods attacked`);
  });

  it('the guard itself refuses Succeeded for any Pod whose mains did not all exit 0', () => {
    for (let seed = 1; seed <= 5_000; seed++) {
      const g = generate(seed);
      const phase = guardedPhase('Succeeded', projectPod(g.pod));
      if (phase === 'Succeeded') assert.ok(mainsTrulySucceeded(g.pod, g.mains), `seed ${seed}`);
      assert.equal(guardedPhase('Failed', projectPod(g.pod)), 'Failed');
    }
  });

  it('handpicked attacks', () => {
    const cases: Array<[string, V1Pod]> = [
      ['main failed, ignore-exit-code sidecar', makePod({ containers: [main('app', exited(1)), sidecar('p', 'running', [IGNORE_EXIT_CODE])] })],
      ['main killed, OnFailure restart loop', makePod({ restartPolicy: 'OnFailure', containers: [main('app', exited(137)), sidecar('p', 'running', [], { restarts: 1 })] })],
      ['main never started', makePod({ containers: [main('app', 'waiting'), sidecar('p', 'running', [IGNORE_EXIT_CODE])] })],
      ['main status missing', makePod({ containers: [main('app', 'noStatus'), sidecar('p', 'running', [IGNORE_EXIT_CODE])] })],
      [
        'main named in the ignore-exit-code annotation',
        makePod({ containers: [main('app', exited(1)), sidecar('p', 'running', [IGNORE_EXIT_CODE])], annotations: { [ANNOTATION_IGNORE_EXIT_CODE]: 'app' } }),
      ],
      [
        'main with IGNORE_EXIT_CODE env alone',
        makePod({ containers: [main('app', exited(1), { env: [IGNORE_EXIT_CODE] }), sidecar('p', 'running', [IGNORE_EXIT_CODE])] }),
      ],
      [
        'main failed long ago, sidecar never started',
        makePod({ containers: [main('app', exited(1), { finishedAgoMs: 500_000 }), sidecar('p', 'waiting', [], { id: null, waitingReason: 'ErrImagePull' })] }),
      ],
      [
        'main failed at an unknown time, sidecar never started',
        makePod({ containers: [main('app', exited(1), { finishedAgoMs: null }), sidecar('p', 'waiting', [], { id: null })] }),
      ],
      [
        'main failed, swapped ignore-exit-code sidecar crash-looping',
        makePod({
          containers: [
            main('app', exited(1)),
            sidecar('p', 'waiting', [IGNORE_EXIT_CODE, { name: ENV_TERMINATE_WITH_IMAGE, value: 'exit0:1' }], { image: 'exit0:1', waitingReason: 'CrashLoopBackOff' }),
          ],
        }),
      ],
    ];
    const loop = [request({ containers: [{ name: 'p', statusContext: { containerID: 'containerd://p-id', restartCount: 0 }, state: { phase: 'Succeeded', exitCode: 143 } }] })];
    for (const [name, pod] of cases) {
      for (const node of ['real', 'virtual', 'agentless'] as const) {
        const decision = decideFor(pod, node, loop);
        assert.ok(!(decision.kind === 'patchPhase' && decision.phase === 'Succeeded'), `${name} (${node})`);
      }
    }
  });
});

describe('R26: no phase at all while a main will run again, or without a main', () => {
  const mainAgain = (extra: Partial<V1Container>, edit?: (pod: V1Pod) => void): V1Pod => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('p', 'running', [IGNORE_EXIT_CODE])] });
    Object.assign(pod.spec!.containers[0]!, extra);
    edit?.(pod);
    return pod;
  };
  const cases: Array<[string, V1Pod]> = [
    ['no main at all: every container an ignore-exit-code sidecar', makePod({ containers: [sidecar('a', exited(0), [IGNORE_EXIT_CODE]), sidecar('b', 'running', [IGNORE_EXIT_CODE])] })],
    ['main exited 0, its own restartPolicy Always runs it again', mainAgain({ restartPolicy: 'Always' })],
    ['main exited 0 matching a Restart rule (Never Pod)', mainAgain({ restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [0] } }] })],
    ['main exited 0 in a Pod restarting all its containers', mainAgain({}, (pod) => { pod.status!.conditions = [{ type: 'AllContainersRestarting', status: 'True' }]; })],
  ];
  for (const [name, pod] of cases) {
    it(name, () => {
      for (const node of ['real', 'virtual', 'agentless'] as const) assert.notEqual(decideFor(pod, node).kind, 'patchPhase', node);
      assert.equal(guardedPhase('Succeeded', projectPod(pod)), 'Failed');
      const patch = phasePatch(projectPod(pod), {
        cause: 'ignoreExitCode', wanted: 'Succeeded', conditionMessage: () => '', event: () => warning('r', 'r', ''), nowMs: 0, events: [],
      });
      assert.equal(patch.kind, 'notHandled');
    });
  }
});

type Mutation = (statuses: NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>, name: string) => void;

const setState =
  (state: NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number]['state']): Mutation =>
  (statuses, name) => {
    for (const s of statuses) if (s.name === name) s.state = structuredClone(state);
  };

const mutations: Mutation[] = [
  setState({ running: {} }),
  setState({ waiting: { reason: 'CrashLoopBackOff' } }),
  setState({ terminated: { exitCode: 1 } }),
  setState({ terminated: { exitCode: 143 } }),
  setState({ terminated: { exitCode: -1 } }),
  setState({}),
  (statuses, name) => {
    const i = statuses.findIndex((s) => s.name === name);
    if (i >= 0) statuses.splice(i, 1);
  },
  (statuses, name) => {
    const original = statuses.find((s) => s.name === name);
    if (original) statuses.push({ ...structuredClone(original), state: { running: {} } });
  },
];
