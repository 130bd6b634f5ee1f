import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EnvVar } from '@kubernetes/client-node';
import type { NodeKind, Sidecar } from './classify.ts';
import { classify, isStoppableOn, mayNeedSidecarTermination, notStoppableWarning } from './classify.ts';
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_SIDECARS,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  EVENT_REASONS,
} from '../api/names.ts';
import { IGNORE_EXIT_CODE, main, makePod, WHEN_JOB_EXIT, withImage } from '../test/support/pods.ts';
import { parseNameList, projectPod } from './projection.ts';

const classifyOne = (env: V1EnvVar[], annotations: Record<string, string> = {}) =>
  classify(projectPod(makePod({ containers: [{ name: 'c', env }, main('app')], annotations })));

describe('classify: R1–R3 marker table (docs/design.md), one container', () => {
  const rows: Array<{ row: string; env: V1EnvVar[]; annotations?: Record<string, string>; want: Omit<Sidecar, 'tier' | 'markedBy'> | undefined }> = [
    { row: 'no marker: main', env: [], want: undefined },
    { row: 'WHEN_JOB_EXIT=true', env: [WHEN_JOB_EXIT], want: { name: 'c', viaRequest: true, ignoreExitCode: false } },
    {
      row: 'WHEN_JOB_EXIT=True (letter case)',
      env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'True' }],
      want: { name: 'c', viaRequest: true, ignoreExitCode: false },
    },
    { row: 'WHEN_JOB_EXIT=false: main', env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'false' }], want: undefined },
    {
      row: 'WHEN_JOB_EXIT via valueFrom: main',
      env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
      want: undefined,
    },
    { row: 'WITH_IMAGE', env: [withImage('exit0:1')], want: { name: 'c', viaRequest: false, swapImage: 'exit0:1', ignoreExitCode: false } },
    {
      row: 'both markers',
      env: [WHEN_JOB_EXIT, withImage('exit0:1')],
      want: { name: 'c', viaRequest: true, swapImage: 'exit0:1', ignoreExitCode: false },
    },
    {
      row: 'IGNORE_EXIT_CODE with WHEN_JOB_EXIT',
      env: [WHEN_JOB_EXIT, IGNORE_EXIT_CODE],
      want: { name: 'c', viaRequest: true, ignoreExitCode: true },
    },
    {
      row: 'IGNORE_EXIT_CODE=TRUE (letter case)',
      env: [WHEN_JOB_EXIT, { name: ENV_IGNORE_EXIT_CODE, value: 'TRUE' }],
      want: { name: 'c', viaRequest: true, ignoreExitCode: true },
    },
    { row: 'IGNORE_EXIT_CODE alone does not make a sidecar', env: [IGNORE_EXIT_CODE], want: undefined },
    {
      row: 'IGNORE_EXIT_CODE with WITH_IMAGE only does not count',
      env: [withImage('exit0:1'), IGNORE_EXIT_CODE],
      want: { name: 'c', viaRequest: false, swapImage: 'exit0:1', ignoreExitCode: false },
    },
    {
      row: 'sidecars annotation, no env',
      env: [],
      annotations: { [ANNOTATION_SIDECARS]: 'c' },
      want: { name: 'c', viaRequest: true, ignoreExitCode: false },
    },
    {
      row: 'sidecars annotation + env IGNORE_EXIT_CODE',
      env: [IGNORE_EXIT_CODE],
      annotations: { [ANNOTATION_SIDECARS]: 'c' },
      want: { name: 'c', viaRequest: true, ignoreExitCode: true },
    },
    {
      row: 'sidecars + ignore-exit-code annotations',
      env: [],
      annotations: { [ANNOTATION_SIDECARS]: 'c', [ANNOTATION_IGNORE_EXIT_CODE]: 'c' },
      want: { name: 'c', viaRequest: true, ignoreExitCode: true },
    },
    {
      row: 'env sidecar + ignore-exit-code annotation',
      env: [WHEN_JOB_EXIT],
      annotations: { [ANNOTATION_IGNORE_EXIT_CODE]: 'c' },
      want: { name: 'c', viaRequest: true, ignoreExitCode: true },
    },
    {
      row: 'ignore-exit-code annotation on a main does not make a sidecar',
      env: [],
      annotations: { [ANNOTATION_IGNORE_EXIT_CODE]: 'c' },
      want: undefined,
    },
    {
      row: 'ignore-exit-code annotation on an image-only sidecar does not count',
      env: [withImage('exit0:1')],
      annotations: { [ANNOTATION_IGNORE_EXIT_CODE]: 'c' },
      want: { name: 'c', viaRequest: false, swapImage: 'exit0:1', ignoreExitCode: false },
    },
  ];
  for (const r of rows) {
    it(r.row, () => {
      const result = classifyOne(r.env, r.annotations);
      // Named by the env when an env marker (other than IGNORE_EXIT_CODE) makes it one.
      const markedBy = r.env.some((e) => e.name !== ENV_IGNORE_EXIT_CODE) ? 'env' : 'annotation';
      assert.deepEqual(result.sidecars[0], r.want && { ...r.want, tier: 0, markedBy });
      assert.deepEqual(result.mains, r.want ? ['app'] : ['c', 'app']);
    });
  }
});

describe('classify: annotations', () => {
  it('parses comma-separated names, trimming spaces and dropping empty entries', () => {
    const names = (value: string | undefined) => parseNameList(value).names;
    assert.deepEqual(names(' a, b ,,c , a '), ['a', 'b', 'c']);
    assert.deepEqual(names(''), []);
    assert.deepEqual(names(undefined), []);
    assert.deepEqual(names(' , '), []);
  });

  it('marks several containers from one annotation', () => {
    const pod = makePod({
      containers: [main('app'), main('istio-proxy'), main('cloud-sql-proxy')],
      annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy , cloud-sql-proxy' },
    });
    const result = classify(projectPod(pod));
    assert.deepEqual(result.sidecars.map((s) => s.name), ['istio-proxy', 'cloud-sql-proxy']);
    assert.deepEqual(result.mains, ['app']);
    assert.deepEqual(result.warnings, []);
  });

  for (const annotation of [ANNOTATION_SIDECARS, ANNOTATION_IGNORE_EXIT_CODE]) {
    it(`R4: ${annotation} naming an unknown container: a Warning, no throw, the rest still applies`, () => {
      const pod = makePod({
        containers: [main('app'), { name: 'proxy', env: [WHEN_JOB_EXIT] }],
        annotations: { [annotation]: 'proxy, typo-proxy' },
      });
      const result = classify(projectPod(pod));
      assert.deepEqual(result.sidecars.map((s) => s.name), ['proxy']);
      assert.equal(result.warnings.length, 1);
      const [w] = result.warnings;
      assert.equal(w?.type, 'Warning');
      assert.equal(w?.reason, EVENT_REASONS.unknownContainer);
      assert.match(w?.message ?? '', /"typo-proxy".*not a container of this Pod/);
      assert.match(w?.message ?? '', new RegExp(annotation));
    });
  }

  it('R4: an annotation naming an init container (native sidecar) says it is never stopped', () => {
    const pod = makePod({
      containers: [main('app')],
      initContainers: [{ name: 'native-proxy', image: 'p', restartPolicy: 'Always' }],
      annotations: { [ANNOTATION_SIDECARS]: 'native-proxy' },
    });
    const result = classify(projectPod(pod));
    assert.deepEqual(result.sidecars, []);
    assert.match(result.warnings[0]?.message ?? '', /init container.*kubelet/);
  });

  it('R3: warns when ignore-exit-code is set where it cannot count', () => {
    const pod = makePod({
      containers: [
        { name: 'env-only', env: [IGNORE_EXIT_CODE] },
        { name: 'image-only', env: [withImage('exit0:1'), IGNORE_EXIT_CODE] },
        { name: 'annotated-main' },
        { name: 'fine', env: [WHEN_JOB_EXIT, IGNORE_EXIT_CODE] },
      ],
      annotations: { [ANNOTATION_IGNORE_EXIT_CODE]: 'annotated-main' },
    });
    const result = classify(projectPod(pod));
    // One Warning per Pod, naming every container where the marker was set in vain.
    assert.deepEqual(result.warnings.map((w) => [w.reason, w.key]), [[EVENT_REASONS.markerIneffective, EVENT_REASONS.markerIneffective]]);
    assert.match(result.warnings[0]?.message ?? '', /Containers "env-only", "image-only" and "annotated-main" are marked/);
    assert.match(result.warnings[0]?.message ?? '', new RegExp(`${ENV_TERMINATE_WHEN_JOB_EXIT}=true`));
  });

  it('never classifies init containers, even with the env', () => {
    const pod = makePod({
      containers: [main('app')],
      initContainers: [
        { name: 'native-proxy', image: 'p', restartPolicy: 'Always', env: [WHEN_JOB_EXIT] },
        { name: 'setup', image: 's', env: [WHEN_JOB_EXIT] },
      ],
    });
    const result = classify(projectPod(pod));
    assert.deepEqual(result.sidecars, []);
    assert.deepEqual(result.mains, ['app']);
  });
});

describe('classify (R5): what can be acted on where', () => {
  const requestOnly: Sidecar = { name: 's', viaRequest: true, ignoreExitCode: false, tier: 0, markedBy: 'env' };
  const imageOnly: Sidecar = { name: 's', viaRequest: false, swapImage: 'exit0:1', ignoreExitCode: false, tier: 0, markedBy: 'env' };
  const both: Sidecar = { name: 's', viaRequest: true, swapImage: 'exit0:1', ignoreExitCode: false, tier: 0, markedBy: 'env' };
  const rows: Array<[string, Sidecar, NodeKind, boolean]> = [
    ['request sidecar on a real node', requestOnly, 'real', true],
    ['request sidecar on a virtual node', requestOnly, 'virtual', false],
    ['image sidecar on a real node', imageOnly, 'real', false],
    ['image sidecar on a virtual node', imageOnly, 'virtual', true],
    ['both markers on a real node (as a request sidecar)', both, 'real', true],
    ['both markers on a virtual node (as an image sidecar)', both, 'virtual', true],
    ['request sidecar on a node without an agent (R22)', requestOnly, 'agentless', false],
    ['image sidecar on a node without an agent (R22)', imageOnly, 'agentless', true],
    ['both markers on a node without an agent (as an image sidecar, R22)', both, 'agentless', true],
  ];
  for (const [name, sidecar, node, want] of rows) {
    it(name, () => assert.equal(isStoppableOn(sidecar, node), want));
  }

  it('the Warning for a sidecar nothing will stop says why and how to fix it', () => {
    const pod = projectPod(makePod({ containers: [main('app')] }));
    const onReal = notStoppableWarning(pod, [imageOnly], 'real');
    assert.equal(onReal.type, 'Warning');
    assert.equal(onReal.reason, EVENT_REASONS.notStoppable);
    assert.match(onReal.message, /virtual nodes and nodes without an agent only.*nothing will stop it.*KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true/);
    const onVirtual = notStoppableWarning(pod, [requestOnly], 'virtual');
    assert.match(onVirtual.message, /virtual nodes cannot carry out.*nothing will stop it.*WITH_IMAGE/);
    const agentless = notStoppableWarning(pod, [requestOnly], 'agentless');
    assert.match(agentless.message, /has no sidecar-terminator agent.*--agentless-node-selector.*nothing will stop it.*Set KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE on it/);
    assert.equal(new Set([onReal.key, onVirtual.key, agentless.key]).size, 3);
  });
});

describe('mayNeedSidecarTermination (R6): watch-cache pre-filter', () => {
  const rows: Array<[string, Parameters<typeof makePod>[0], boolean]> = [
    ['Never with an env sidecar', { containers: [main('a'), { name: 's', env: [WHEN_JOB_EXIT] }] }, true],
    ['OnFailure with an image sidecar', { restartPolicy: 'OnFailure', containers: [{ name: 's', env: [withImage('x')] }] }, true],
    ['annotation only', { containers: [main('a'), main('s')], annotations: { [ANNOTATION_SIDECARS]: 's' } }, true],
    ['no marker', { containers: [main('a')] }, false],
    ['Always with the env', { restartPolicy: 'Always', containers: [{ name: 's', env: [WHEN_JOB_EXIT] }] }, false],
  ];
  for (const [name, spec, want] of rows) {
    it(name, () => assert.equal(mayNeedSidecarTermination(projectPod(makePod(spec))), want));
  }
});
