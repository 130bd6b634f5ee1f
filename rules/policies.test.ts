import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_MAINS, ANNOTATION_SIDECARS, ENV_TERMINATE_WHEN_JOB_EXIT, EVENT_REASONS } from '../api/names.ts';
import { classify } from './classify.ts';
import type { LabelSelector, PolicyScope, SidecarPolicy } from './policies.ts';
import { MAX_GLOB_VALUE_CHARS, MAX_POLICY_SPEC_CHARS, applyPolicies, auditedAsEnforced, globMatches, mayMatchPolicy, parsePolicy, policyMayYetMark, policyAuditEvent, precedenceOrder, selectorMatches, stopCommandsOf } from './policies.ts';
import { projectPod } from './projection.ts';
import { exited, expectKind, main, makePod, NOW, sidecar } from '../test/support/pods.ts';
import { decide } from './decide.ts';

const policy = (name: string, spec: Record<string, unknown>, scope: PolicyScope = 'cluster', namespace = 'ns'): SidecarPolicy => {
  const parsed = parsePolicy({ metadata: { name, namespace }, spec: { mode: 'Enforce', ...spec } }, scope);
  assert.ok(parsed.valid, parsed.valid ? '' : parsed.reason);
  return parsed.policy;
};

const withLabels = (pod: V1Pod, labels: Record<string, string>): V1Pod => ({ ...pod, metadata: { ...pod.metadata, labels } });
const meshPod = (labels: Record<string, string> = { app: 'batch' }) =>
  withLabels(makePod({ containers: [main('app', exited(0)), main('istio-proxy', 'running', { image: 'docker.io/istio/proxyv2:1.24.0' })] }), labels);
const marked = (pod: V1Pod, policies: SidecarPolicy[], nsLabels: Record<string, string> | undefined = {}) =>
  applyPolicies(projectPod(pod), nsLabels, policies).containers.map((c) => `${c.name}:${c.policy?.policy ?? '-'}:${c.auditPolicy?.policy ?? '-'}`);

describe('R54: globMatches', () => {
  const rows: Array<[string, string, boolean]> = [
    ['istio-proxy', 'istio-proxy', true],
    ['istio-proxy', 'istio-proxy2', false],
    ['istio-*', 'istio-proxy', true],
    ['*-proxy', 'linkerd-proxy', true],
    ['*proxy*', 'a-proxy-b', true],
    ['?aprd', 'daprd', true],
    ['?aprd', 'ddaprd', false],
    ['*', '', true],
    ['', '', true],
    ['', 'x', false],
    ['docker.io/istio/proxyv2:*', 'docker.io/istio/proxyv2:1.24.0', true],
    ['a*b*c', 'aXbYbZc', true],
    ['a*b*c', 'aXbYbZ', false],
  ];
  for (const [pattern, value, want] of rows) {
    it(`${JSON.stringify(pattern)} ~ ${JSON.stringify(value)}: ${want}`, () => assert.equal(globMatches(pattern, value), want));
  }

  it('a hostile pattern of many stars against a long value is answered (no regular expression from input)', () => {
    assert.equal(globMatches(`${'*a'.repeat(128)}b`, 'a'.repeat(1024)), false);
    assert.equal(globMatches(`${'*a?'.repeat(85)}b`, 'a'.repeat(1024)), false);
  });

  it(`a value longer than any image reference (${MAX_GLOB_VALUE_CHARS} characters) matches nothing, not even "*"`, () => {
    assert.equal(globMatches('*', 'a'.repeat(MAX_GLOB_VALUE_CHARS)), true);
    assert.equal(globMatches('*', 'a'.repeat(MAX_GLOB_VALUE_CHARS + 1)), false);
  });

  it('agrees with a plain backtracking matcher on every pattern and value of a small alphabet', () => {
    // The matcher of record: try every split at each star.
    const reference = (p: string, v: string): boolean => {
      if (p === '') return v === '';
      if (p[0] === '*') return reference(p.slice(1), v) || (v !== '' && reference(p, v.slice(1)));
      return v !== '' && (p[0] === '?' || p[0] === v[0]) && reference(p.slice(1), v.slice(1));
    };
    const words = (alphabet: string, max: number): string[] => {
      const out = [''];
      for (let n = 0, from = 0; n < max; n++) {
        const to = out.length;
        for (let i = from; i < to; i++) for (const c of alphabet) out.push(out[i] + c);
        from = to;
      }
      return out;
    };
    const values = words('ab', 6);
    let checked = 0;
    for (const p of words('ab*?', 5)) {
      for (const v of values) {
        assert.equal(globMatches(p, v), reference(p, v), `${JSON.stringify(p)} ~ ${JSON.stringify(v)}`);
        checked++;
      }
    }
    assert.ok(checked > 100_000);
  });
});

describe('R54: selectorMatches', () => {
  const sel = (s: Partial<LabelSelector>): LabelSelector => ({ matchLabels: {}, matchExpressions: [], ...s });
  const labels = { app: 'batch', tier: 'etl' };
  const rows: Array<[string, LabelSelector, boolean]> = [
    ['empty selects all', sel({}), true],
    ['matchLabels equal', sel({ matchLabels: { app: 'batch' } }), true],
    ['matchLabels differ', sel({ matchLabels: { app: 'web' } }), false],
    ['In', sel({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['etl', 'ml'] }] }), true],
    ['In, absent key', sel({ matchExpressions: [{ key: 'team', operator: 'In', values: ['x'] }] }), false],
    ['NotIn, absent key', sel({ matchExpressions: [{ key: 'team', operator: 'NotIn', values: ['x'] }] }), true],
    ['NotIn', sel({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['etl'] }] }), false],
    ['Exists', sel({ matchExpressions: [{ key: 'app', operator: 'Exists', values: [] }] }), true],
    ['DoesNotExist', sel({ matchExpressions: [{ key: 'app', operator: 'DoesNotExist', values: [] }] }), false],
    ['a key named like an Object member is not found', sel({ matchExpressions: [{ key: 'constructor', operator: 'Exists', values: [] }] }), false],
  ];
  for (const [row, selector, want] of rows) it(row, () => assert.equal(selectorMatches(selector, labels), want));
});

describe('R54: parsePolicy refuses what it cannot read, with the reason', () => {
  const rows: Array<[string, unknown, PolicyScope, RegExp]> = [
    ['no spec', { metadata: { name: 'p' } }, 'cluster', /^spec: must be an object/],
    ['no containers', { metadata: { name: 'p' }, spec: {} }, 'cluster', /spec.containers: must be a list/],
    ['empty containers', { metadata: { name: 'p' }, spec: { containers: [] } }, 'cluster', /at least one entry/],
    ['an empty entry', { metadata: { name: 'p' }, spec: { containers: [{}] } }, 'cluster', /name or image is needed/],
    ['name * alone', { metadata: { name: 'p' }, spec: { containers: [{ name: '*' }] } }, 'cluster', /match every name and image/],
    ['name ** alone', { metadata: { name: 'p' }, spec: { containers: [{ name: '**' }] } }, 'cluster', /match every name and image/],
    ['name ?* alone', { metadata: { name: 'p' }, spec: { containers: [{ name: '?*' }] } }, 'cluster', /match every name and image/],
    ['image * alone', { metadata: { name: 'p' }, spec: { containers: [{ image: '*' }] } }, 'cluster', /match every name and image/],
    ['name * with image *?*', { metadata: { name: 'p' }, spec: { containers: [{ name: '*', image: '*?*' }] } }, 'cluster', /containers\[0\]: its patterns match every name and image/],
    ['too many entries', { metadata: { name: 'p' }, spec: { containers: Array(17).fill({ name: 'x' }) } }, 'cluster', /at most 16 entries/],
    ['a long pattern', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x'.repeat(257) }] } }, 'cluster', /at most 256 characters/],
    ['a tier out of range', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x', stopTier: 10 }] } }, 'cluster', /stopTier/],
    ['a bad mode', { metadata: { name: 'p' }, spec: { mode: 'DryRun', containers: [{ name: 'x' }] } }, 'cluster', /spec.mode/],
    ['a bad operator', { metadata: { name: 'p' }, spec: { podSelector: { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] }, containers: [{ name: 'x' }] } }, 'cluster', /operator/],
    ['In without values', { metadata: { name: 'p' }, spec: { podSelector: { matchExpressions: [{ key: 'a', operator: 'In' }] }, containers: [{ name: 'x' }] } }, 'cluster', /values: needed/],
    ['a namespaced policy with a namespace selector', { metadata: { name: 'p', namespace: 'ns' }, spec: { namespaceSelector: {}, containers: [{ name: 'x' }] } }, 'namespaced', /own namespace only/],
    ['a namespaced policy naming a stop command', { metadata: { name: 'p', namespace: 'ns' }, spec: { containers: [{ name: 'x', stopCommand: ['/bin/quit'] }] } }, 'namespaced', /only a ClusterSidecarPolicy may name a command/],
    ['an empty stop command', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x', stopCommand: [] }] } }, 'cluster', /stopCommand: the command is empty/],
    ['a stop command without a program', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x', stopCommand: [''] }] } }, 'cluster', /stopCommand\[0\]: must be a non-empty string/],
    ['a stop command of too many arguments', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x', stopCommand: Array(33).fill('a') }] } }, 'cluster', /at most 32 entries/],
    ['a stop command argument too long', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x', stopCommand: ['sh', 'x'.repeat(1025)] }] } }, 'cluster', /stopCommand\[1\]: at most 1024 characters/],
    ['a stop command that is not a list', { metadata: { name: 'p' }, spec: { containers: [{ name: 'x', stopCommand: 'kill 1' }] } }, 'cluster', /stopCommand: must be a list/],
    ['a policy over 8192 characters in all', { metadata: { name: 'p', namespace: 'ns' }, spec: { podSelector: { matchExpressions: Array(16).fill({ key: 'k', operator: 'In', values: Array(64).fill('v'.repeat(63)) }) }, containers: [{ name: 'x' }] } }, 'namespaced', /spec: 64529 characters .* in all, more than 8192/],
  ];
  for (const [row, object, scope, reason] of rows) {
    it(row, () => {
      const parsed = parsePolicy(object, scope);
      assert.equal(parsed.valid, false);
      assert.match(parsed.valid ? '' : parsed.reason, reason);
    });
  }
});

describe('R54: a policy\'s size in all (MAX_POLICY_SPEC_CHARS)', () => {
  it('counts selectors, patterns, images and commands, as CEL\'s size() does: 8192 characters pass, one more does not', () => {
    const spec = (last: string) => ({
      namespaceSelector: { matchLabels: { team: 'a'.repeat(60) } },
      podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['b'.repeat(63)] }] },
      containers: [{ name: 'n'.repeat(256), image: 'i'.repeat(256), swapImage: 's'.repeat(256) }, { name: 'x', stopCommand: ['sh', '-c', ...(last.match(/.{1,1000}/gu) ?? [])] }],
    });
    const fixed = 4 + 60 + 3 + 63 + 3 * 256 + 1 + 2 + 2;
    const fits = 'c'.repeat(MAX_POLICY_SPEC_CHARS - fixed);
    assert.ok(parsePolicy({ metadata: { name: 'p' }, spec: spec(fits) }, 'cluster').valid);
    const over = parsePolicy({ metadata: { name: 'p' }, spec: spec(`${fits}c`) }, 'cluster');
    assert.match(over.valid ? '' : over.reason, /8193 characters/);
    const astral = parsePolicy({ metadata: { name: 'p' }, spec: spec(`${'c'.repeat(MAX_POLICY_SPEC_CHARS - fixed - 1)}😀`) }, 'cluster');
    assert.ok(astral.valid, 'a code point is one character, as CEL counts it');
  });
});

describe('R54: which policy marks which container', () => {
  it('by name glob, by image as written or in full; the event names the policy', () => {
    assert.deepEqual(marked(meshPod(), [policy('mesh', { containers: [{ name: 'istio-*' }] })]), ['app:-:-', 'istio-proxy:ClusterSidecarPolicy/mesh:-']);
    assert.deepEqual(marked(meshPod(), [policy('mesh', { containers: [{ image: 'istio/proxyv2:*' }] })])[1], 'istio-proxy:-:-',
      'a short pattern does not match an image written in full');
    assert.deepEqual(marked(meshPod(), [policy('mesh', { containers: [{ image: 'docker.io/istio/proxyv2:*' }] })])[1], 'istio-proxy:ClusterSidecarPolicy/mesh:-');
    const short = withLabels(makePod({ containers: [main('app', exited(0)), main('proxy', 'running', { image: 'istio/proxyv2:1.24.0' })] }), {});
    assert.deepEqual(marked(short, [policy('mesh', { containers: [{ image: 'docker.io/istio/proxyv2:*' }] })])[1], 'proxy:ClusterSidecarPolicy/mesh:-', 'spelled out in full');
  });

  it('precedence: the namespace\'s own policies by name, then the cluster\'s by name; a policy of another namespace never', () => {
    const order = precedenceOrder([
      policy('b', { containers: [{ name: 'x' }] }),
      policy('z', { containers: [{ name: 'x' }] }, 'namespaced'),
      policy('a', { containers: [{ name: 'x' }] }),
      policy('m', { containers: [{ name: 'x' }] }, 'namespaced'),
    ]);
    assert.deepEqual(order.map((p) => `${p.scope}/${p.name}`), ['namespaced/m', 'namespaced/z', 'cluster/a', 'cluster/b']);
    const policies = [policy('a-cluster', { containers: [{ name: 'istio-proxy', stopTier: 1 }] }), policy('z-local', { containers: [{ name: 'istio-proxy' }] }, 'namespaced')];
    assert.deepEqual(marked(meshPod(), policies)[1], 'istio-proxy:SidecarPolicy/ns/z-local:-');
    const elsewhere = [policy('local', { containers: [{ name: 'istio-proxy' }] }, 'namespaced', 'other')];
    assert.deepEqual(marked(meshPod(), elsewhere)[1], 'istio-proxy:-:-', 'a SidecarPolicy reaches no Pod outside its namespace');
  });

  it('one rule for modes and precedence: the first matching policy decides the container, in its own mode', () => {
    // [policies (scope/name/mode), the container's Enforce marker, its Audit marker]
    const rows: Array<[string[], string, string]> = [
      [['cluster/a/Enforce'], 'ClusterSidecarPolicy/a', '-'],
      [['cluster/a/Audit'], '-', 'ClusterSidecarPolicy/a'],
      [['cluster/a/Audit', 'cluster/b/Enforce'], '-', 'ClusterSidecarPolicy/a'],
      [['cluster/b/Audit', 'cluster/a/Enforce'], 'ClusterSidecarPolicy/a', '-'],
      [['namespaced/z/Audit', 'cluster/a/Enforce'], '-', 'SidecarPolicy/ns/z'],
      [['namespaced/z/Enforce', 'cluster/a/Audit'], 'SidecarPolicy/ns/z', '-'],
      [['namespaced/b/Enforce', 'namespaced/a/Audit'], '-', 'SidecarPolicy/ns/a'],
      [['namespaced/z/Enforce/other', 'cluster/a/Audit'], '-', 'ClusterSidecarPolicy/a'],
    ];
    for (const [specs, enforce, audit] of rows) {
      const policies = specs.map((spec) => {
        const [scope, name, mode, namespace] = spec.split('/') as [PolicyScope, string, string, string | undefined];
        return policy(name, { mode, containers: [{ name: 'istio-proxy' }] }, scope, namespace);
      });
      assert.deepEqual(marked(meshPod(), policies)[1], `istio-proxy:${enforce}:${audit}`, specs.join(', '));
    }
  });

  it('a policy that names no mode is in Audit: it reports what it would do before it acts', () => {
    const parsed = parsePolicy({ metadata: { name: 'new' }, spec: { containers: [{ name: 'istio-proxy' }] } }, 'cluster');
    assert.ok(parsed.valid);
    assert.equal(parsed.policy.mode, 'Audit');
  });

  it('a catch-all pattern beside a narrowing one is kept: only an entry that matches every container is refused', () => {
    assert.deepEqual(marked(meshPod(), [policy('mesh', { containers: [{ name: 'istio-*', image: '*' }] })])[1], 'istio-proxy:ClusterSidecarPolicy/mesh:-');
    assert.deepEqual(marked(meshPod(), [policy('mesh', { containers: [{ name: '*', image: '*/istio/proxyv2:*' }] })])[1], 'istio-proxy:ClusterSidecarPolicy/mesh:-');
  });

  it('the Pod\'s author keeps a main against every policy: an explicit false in the Kruise env, or the mains annotation', () => {
    const catching = [policy('ns-audit', { mode: 'Audit', containers: [{ name: 'h43-*' }] }, 'namespaced'), policy('work', { containers: [{ name: 'h43-*' }] })];
    const pod = withLabels(makePod({
      containers: [
        main('h43-main', exited(0)),
        main('h43-work', 'running', { env: [{ name: ENV_TERMINATE_WHEN_JOB_EXIT, value: 'False' }] }),
        main('h43-named'),
        main('h43-sidecar'),
      ],
      annotations: { [ANNOTATION_MAINS]: 'h43-named,h43-main' },
    }), {});
    assert.deepEqual(marked(pod, catching), ['h43-main:-:-', 'h43-work:-:-', 'h43-named:-:-', 'h43-sidecar:-:SidecarPolicy/ns/ns-audit']);
    const enforced = classify(applyPolicies(projectPod(pod), {}, catching.slice(1)));
    assert.deepEqual(enforced.mains, ['h43-main', 'h43-work', 'h43-named']);
    assert.deepEqual(enforced.sidecars.map((s) => s.name), ['h43-sidecar']);
  });

  it('the mains annotation wins over the Pod\'s own sidecar markers too, with one Warning', () => {
    const pod = makePod({ containers: [main('app', exited(0)), sidecar('proxy'), main('shipper')], annotations: { [ANNOTATION_MAINS]: 'proxy,shipper', [ANNOTATION_SIDECARS]: 'shipper' } });
    const classified = classify(projectPod(pod));
    assert.deepEqual(classified.mains, ['app', 'proxy', 'shipper']);
    const warned = classified.warnings.filter((w) => w.reason === EVENT_REASONS.markerIneffective);
    assert.equal(warned.length, 1);
    assert.match(warned[0]!.message, /names "proxy" and "shipper", which the Pod also marks as sidecars .* They stay main containers/);
  });

  it('the Pod\'s own markers win: a container it marks is never decided by a policy', () => {
    const pod = withLabels(makePod({ containers: [main('app', exited(0)), sidecar('istio-proxy')], annotations: {} }), {});
    assert.deepEqual(marked(pod, [policy('mesh', { containers: [{ name: 'istio-proxy', ignoreExitCode: true, stopTier: 3 }] })])[1], 'istio-proxy:-:-');
    const annotated = withLabels(makePod({ containers: [main('app', exited(0)), main('istio-proxy')], annotations: { [ANNOTATION_SIDECARS]: 'istio-proxy' } }), {});
    const classified = classify(applyPolicies(projectPod(annotated), {}, [policy('mesh', { containers: [{ name: 'istio-proxy', stopTier: 3 }] })]));
    assert.deepEqual(classified.sidecars.map((s) => [s.name, s.markedBy, s.tier]), [['istio-proxy', 'annotation', 0]]);
  });

  it('selectors: Pod labels, namespace labels (unknown namespace: no match), too many Pod labels: no match', () => {
    const byPod = [policy('mesh', { podSelector: { matchLabels: { app: 'batch' } }, containers: [{ name: 'istio-proxy' }] })];
    assert.deepEqual(marked(meshPod(), byPod)[1], 'istio-proxy:ClusterSidecarPolicy/mesh:-');
    assert.deepEqual(marked(meshPod({ app: 'web' }), byPod)[1], 'istio-proxy:-:-');
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`l${i}`, 'v']));
    assert.deepEqual(marked(meshPod({ ...many, app: 'batch' }), byPod)[1], 'istio-proxy:-:-');
    const byNamespace = [policy('mesh', { namespaceSelector: { matchLabels: { mesh: 'on' } }, containers: [{ name: 'istio-proxy' }] })];
    assert.deepEqual(marked(meshPod(), byNamespace, { mesh: 'on' })[1], 'istio-proxy:ClusterSidecarPolicy/mesh:-');
    assert.deepEqual(marked(meshPod(), byNamespace, { mesh: 'off' })[1], 'istio-proxy:-:-');
    assert.deepEqual(marked(meshPod(), byNamespace, undefined)[1], 'istio-proxy:-:-');
  });

  it('Audit and Enforce are kept apart; auditedAsEnforced lays the audited ones over', () => {
    const policies = [policy('a', { mode: 'Audit', containers: [{ name: 'istio-proxy' }] })];
    const pod = applyPolicies(projectPod(meshPod()), {}, policies);
    assert.deepEqual(classify(pod).sidecars, [], 'an Audit policy makes no sidecar');
    assert.deepEqual(classify(auditedAsEnforced(pod)).sidecars.map((s) => s.markedBy), ['ClusterSidecarPolicy/a']);
    const plain = projectPod(meshPod());
    assert.equal(auditedAsEnforced(plain), plain, 'no audit marker: the same object (no second decision)');
  });

  it('the audit Event says all that enforcing would do: every sidecar in stop order, with its tier and command, and the phase', () => {
    const stops = [
      { container: 'shipper', policy: 'ClusterSidecarPolicy/logs', tier: 0, ignoreExitCode: false, stopCommand: false },
      { container: 'sql', policy: 'ClusterSidecarPolicy/sql', tier: 0, ignoreExitCode: true, stopCommand: false },
      { container: 'istio-proxy', policy: 'ClusterSidecarPolicy/mesh', tier: 1, ignoreExitCode: false, stopCommand: true },
    ];
    assert.equal(policyAuditEvent(stops, 'createRequest', 'Succeeded').message,
      'Audit: the main containers are done and the policies would now stop "shipper" (ClusterSidecarPolicy/logs, tier 0), ' +
      '"sql" (ClusterSidecarPolicy/sql, tier 0, ignore-exit-code), "istio-proxy" (ClusterSidecarPolicy/mesh, tier 1, its stop command first) ' +
      'through ContainerRecreateRequests, in that order. Then the Pod\'s phase would be set to Succeeded from the main containers, ' +
      'before the exit code of "sql" could count. Nothing was stopped: the policy is in mode Audit; set spec.mode to Enforce to act.');
    assert.doesNotMatch(policyAuditEvent(stops.slice(0, 1), 'createRequest', 'Succeeded').message, /phase/, 'no ignore-exit-code sidecar: kubelet sets the phase');
  });

  it('a cluster policy\'s stop command reaches the container it marks, from Enforce policies only; stopCommandsOf names the policy', () => {
    const quit = ['pilot-agent', 'request', 'POST', 'quitquitquit'];
    const enforced = applyPolicies(projectPod(meshPod()), {}, [policy('mesh', { containers: [{ name: 'istio-proxy', stopCommand: quit }] })]);
    assert.deepEqual([...stopCommandsOf(enforced)], [['istio-proxy', { command: quit, policy: 'ClusterSidecarPolicy/mesh' }]]);
    const audited = applyPolicies(projectPod(meshPod()), {}, [policy('mesh', { mode: 'Audit', containers: [{ name: 'istio-proxy', stopCommand: quit }] })]);
    assert.deepEqual([...stopCommandsOf(audited)], [], 'an Audit policy runs nothing');
    const istio = { container: 'istio-proxy', policy: 'ClusterSidecarPolicy/mesh', tier: 1, ignoreExitCode: false, stopCommand: true };
    assert.match(policyAuditEvent([istio], 'createRequest').message, /\(ClusterSidecarPolicy\/mesh, tier 1, its stop command first\)/);
    assert.doesNotMatch(policyAuditEvent([istio], 'swapImages').message, /stop command/, 'a swap runs no command');
    const own = withLabels(makePod({ containers: [main('app', exited(0)), sidecar('istio-proxy')] }), {});
    assert.deepEqual([...stopCommandsOf(applyPolicies(projectPod(own), {}, [policy('mesh', { containers: [{ name: 'istio-proxy', stopCommand: quit }] })]))], [],
      'the Pod\'s own marker wins, the policy\'s command with it');
  });

  it('mayMatchPolicy: by the container entries, among the policies that apply to the Pod (its namespace, its selectors)', () => {
    const pod = projectPod(meshPod());
    const mesh = (spec: Record<string, unknown>, scope: PolicyScope = 'cluster', namespace?: string) => policy('mesh', { containers: [{ name: 'istio-*' }], ...spec }, scope, namespace);
    assert.equal(mayMatchPolicy(pod, {}, [mesh({})]), true);
    assert.equal(mayMatchPolicy(pod, {}, [mesh({ containers: [{ name: 'linkerd-*' }] })]), false);
    assert.equal(mayMatchPolicy(pod, {}, [mesh({}, 'namespaced', 'other')]), false, 'another namespace\'s policy');
    assert.equal(mayMatchPolicy(pod, {}, [mesh({ podSelector: { matchLabels: { no: 'match' } } })]), false, 'a Pod its selector does not pick');
    assert.equal(mayMatchPolicy(pod, {}, [mesh({ podSelector: { matchLabels: { app: 'batch' } } })]), true);
    const meshNamespaces = mesh({ namespaceSelector: { matchLabels: { mesh: 'on' } } });
    assert.equal(mayMatchPolicy(pod, { mesh: 'on' }, [meshNamespaces]), true);
    assert.equal(mayMatchPolicy(pod, { mesh: 'off' }, [meshNamespaces]), false, 'a namespace its selector does not pick');
    assert.equal(mayMatchPolicy(pod, undefined, [meshNamespaces]), false, 'a namespace not read yet: never guessed');
  });

  it('policyMayYetMark: a Job\'s Pod not finished, whatever it marks', () => {
    assert.equal(policyMayYetMark(projectPod(meshPod())), true);
    assert.equal(policyMayYetMark(projectPod(makePod({ containers: [main('app')], restartPolicy: 'Always' }))), false, 'a service\'s Pod');
    for (const phase of ['Succeeded', 'Failed']) {
      const done = meshPod();
      assert.equal(policyMayYetMark(projectPod({ ...done, status: { ...done.status, phase } })), false, phase);
    }
  });

  it('an image longer than any reference matches no image pattern, a name entry all the same; answers follow the policy\'s next generation', () => {
    const long = projectPod(withLabels(makePod({ containers: [main('app', exited(0)), main('istio-proxy', 'running', { image: `docker.io/istio/${'x'.repeat(5000)}` })] }), {}));
    const byImage = policy('mesh', { containers: [{ image: 'docker.io/istio/*' }] });
    const byName = policy('mesh', { containers: [{ name: 'istio-*' }] });
    assert.equal(long.containers[1]!.image, '', 'not kept');
    for (let i = 0; i < 2; i++) {
      const applied = applyPolicies(long, {}, [byImage]);
      assert.deepEqual(applied.containers.map((c) => c.policy?.policy ?? '-'), ['-', '-'], `ask ${i + 1}`);
      assert.deepEqual(applied.containers.map((c) => c.imagePatternUntried ?? '-'), ['-', 'ClusterSidecarPolicy/mesh'], 'said, for a Warning');
      assert.equal(mayMatchPolicy(long, {}, [byImage]), true, 'decided, for that Warning');
      assert.deepEqual(classify(applied).warnings.map((w) => w.reason), [EVENT_REASONS.policyImageTooLong]);
      assert.match(classify(applied).warnings[0]!.message, /"istio-proxy" \(ClusterSidecarPolicy\/mesh\) is longer than any image reference \(1024 characters\)/);
      assert.deepEqual(applyPolicies(long, {}, [byName]).containers.map((c) => c.policy?.policy ?? '-'), ['-', 'ClusterSidecarPolicy/mesh']);
    }
    assert.equal(mayMatchPolicy(long, {}, [policy('mesh', { containers: [{ name: 'linkerd-*', image: '*' }] })]), false, 'an entry whose name does not match: nothing to say');
    assert.deepEqual(applyPolicies(long, {}, [policy('all', { containers: [{ name: 'istio-proxy', image: '*' }] })]).containers.map((c) => c.policy?.policy ?? '-'), ['-', '-'], 'not even "*"');
    const pod = projectPod(meshPod());
    assert.equal(mayMatchPolicy(pod, {}, [policy('mesh', { containers: [{ image: 'docker.io/istio/*' }] })]), true);
    assert.equal(mayMatchPolicy(pod, {}, [policy('mesh', { containers: [{ image: 'docker.io/linkerd/*' }] })]), false, 'a new generation is asked afresh');
  });
});

describe('R54: decisions with policy-marked sidecars', () => {
  const decideWith = (pod: V1Pod, policies: SidecarPolicy[]) => decide(applyPolicies(projectPod(pod), {}, policies), 'real', { requests: [], nowMs: NOW });

  it('a policy-marked sidecar is stopped through a request; the event names the policy; tiers come from stopTier', () => {
    const pod = withLabels(makePod({ containers: [main('app', exited(0)), main('istio-proxy'), main('shipper')] }), {});
    const decision = expectKind(decideWith(pod, [policy('mesh', { containers: [{ name: 'istio-proxy', stopTier: 1 }, { name: 'shipper' }] })]), 'createRequest');
    assert.deepEqual(decision.containers, ['shipper'], 'the proxy waits for the lower tier');
    const stopping = decision.events.find((e) => e.reason === EVENT_REASONS.stopping)!;
    assert.match(stopping.message, /"shipper" \(ClusterSidecarPolicy\/mesh\)/);
  });

  it('a policy that matches every container leaves the Pod alone with a Warning', () => {
    const pod = withLabels(makePod({ containers: [main('app', exited(0)), main('istio-proxy')] }), {});
    const decision = decideWith(pod, [policy('all', { containers: [{ name: 'app' }, { name: 'istio-*' }] })]);
    assert.equal(decision.kind, 'notHandled');
    assert.ok(decision.events.some((e) => e.reason === EVENT_REASONS.noMainContainer));
  });
});
