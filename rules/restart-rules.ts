// A container's restart rules (restartPolicyRules, 1.34+) as kubelet matches them against an exit
// code: read by the projection (which rules restart the whole Pod) and by the main-done rules.

export interface RestartRuleProjection {
  action: string;
  /** `In` or `NotIn`; absent when the rule has no exit codes (kubelet never matches it). */
  operator?: string;
  values: number[];
}

/**
 * The first rule whose exit codes match: `In` the code is listed, `NotIn` it is not. A rule with
 * another operator or without exit codes matches nothing (kubelet skips it).
 */
export function matchingRule(rules: readonly RestartRuleProjection[], exitCode: number): RestartRuleProjection | undefined {
  return rules.find((r) => (r.operator === 'In' ? r.values.includes(exitCode) : r.operator === 'NotIn' && !r.values.includes(exitCode)));
}
