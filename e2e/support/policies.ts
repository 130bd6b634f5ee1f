// Sidecar policies at the size budget: a tenant's, built to cost matching most (the e2e test of the
// budgets, the matching benchmark), and any policy filled up to the budget (the benchmark's thousand).
import type { PolicyScope } from '../../common/policy-store.ts';
import { MAX_POLICY_SPEC_CHARS, parsePolicy, specChars } from '../../rules/policies.ts';

interface PolicyObject {
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: { podSelector?: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] }; [field: string]: unknown };
}

/**
 * The policy with NotIn expressions added to its podSelector, on labels no Pod has values of, until
 * it holds the budget's characters (`extra` more): it costs what the largest policy costs, and picks
 * the same Pods.
 */
export function filledToBudget<T extends PolicyObject>(policy: T, scope: PolicyScope, extra = 0): T {
  // Parsed as its namespace would (it is given one when created).
  const parsed = parsePolicy({ ...policy, metadata: { namespace: 'any', ...policy.metadata } }, scope);
  if (!parsed.valid) throw new Error(`not a valid policy: ${parsed.reason}`);
  // Labels of one character each, and values of 63 (a label value's most), at most 64 to an expression.
  const budget = MAX_POLICY_SPEC_CHARS - specChars(parsed.policy) + extra;
  const expressions = Math.ceil(budget / (1 + 64 * 63));
  const left = budget - expressions;
  const values = Array.from({ length: Math.ceil(left / 63) }, (_, i) => `v${i}`.padEnd(63, 'x'));
  values[values.length - 1] = values[values.length - 1]!.slice(0, left - 63 * (values.length - 1));
  const filler = Array.from({ length: expressions }, (_, i) => ({ key: String.fromCharCode(0x61 + i), operator: 'NotIn', values: values.filter((_, j) => j % expressions === i) }));
  const selector = policy.spec.podSelector ?? {};
  return { ...policy, spec: { ...policy.spec, podSelector: { ...selector, matchExpressions: [...(selector.matchExpressions ?? []), ...filler] } } };
}

/** A tenant's SidecarPolicy of 16 entries whose image patterns cost a matcher most, filled to the budget (`extra` characters over it). */
export function policyAtBudget(name: string, extra = 0): PolicyObject {
  // A long piece after a star that an image of many `a`s nearly holds: a matcher that backtracks tries it at every offset.
  const containers = Array.from({ length: 16 }, (_, i) => ({ name: 'c*', image: `*${'a'.repeat(251)}b${i.toString(16)}` }));
  const policy = { apiVersion: 'sidecar-terminator.dev/v1alpha1', kind: 'SidecarPolicy', metadata: { name }, spec: { mode: 'Enforce', containers } };
  return filledToBudget(policy, 'namespaced', extra);
}
