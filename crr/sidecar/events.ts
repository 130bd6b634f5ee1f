// Events a decision asks the I/O layer to emit on the Pod.

export interface PodEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /**
   * Stable identity of what the event reports. Decisions are recomputed on every reconcile, so the
   * I/O layer emits an event at most once per Pod and key (e.g. a small per-Pod set of keys).
   */
  key: string;
}

export function normal(reason: string, key: string, message: string): PodEvent {
  return { type: 'Normal', reason, message, key };
}

export function warning(reason: string, key: string, message: string): PodEvent {
  return { type: 'Warning', reason, message, key };
}

/** `"a"`, `"a" and "b"`, `"a", "b" and "c"`: names as operators read them in messages. */
export function quoteList(names: readonly string[]): string {
  const quoted = names.map((n) => `"${n}"`);
  if (quoted.length <= 1) return quoted.join('');
  return `${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}`;
}
