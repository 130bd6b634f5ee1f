// A tenant's SidecarPolicy at the size budget, built to cost matching most: shared by the e2e test
// of the budgets and the matching benchmark.
import { MAX_POLICY_SPEC_CHARS } from '../../rules/policies.ts';

/** 16 entries of a name pattern and a 254-character image pattern, and NotIn selectors filling the rest of the budget: `extra` characters over it. */
export function policyAtBudget(name: string, extra = 0): unknown {
  // A long piece after a star that an image of many `a`s nearly holds: a matcher that backtracks tries it at every offset.
  const containers = Array.from({ length: 16 }, (_, i) => ({ name: 'c*', image: `*${'a'.repeat(251)}b${i.toString(16)}` }));
  const keys = ['app', 'tier'];
  const used = containers.reduce((n, c) => n + c.name.length + c.image.length, 0) + keys.join('').length;
  const left = MAX_POLICY_SPEC_CHARS - used + extra;
  const values = Array.from({ length: Math.ceil(left / 63) }, (_, i) => `v${i}`.padEnd(63, 'x'));
  values[values.length - 1] = values[values.length - 1]!.slice(0, left - 63 * (values.length - 1));
  // A selector that picks every Pod whose labels are none of these values.
  const matchExpressions = keys.map((key, i) => ({ key, operator: 'NotIn', values: values.filter((_, j) => j % keys.length === i) }));
  return {
    apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy', metadata: { name },
    spec: { mode: 'Enforce', podSelector: { matchExpressions }, containers },
  };
}
