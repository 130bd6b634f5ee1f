// Events a decision asks the I/O layer to emit on the Pod.
import type { PodEvent } from '../common/events.ts';

/** An event on the Pod (what the recorder sends) that a decision carries, with its key. */
export interface DecisionEvent extends PodEvent {
  /**
   * Stable identity of what the event reports. Decisions are recomputed on every reconcile, so the
   * I/O layer emits an event at most once per Pod and key (see EmittedEvents).
   */
  key: string;
}

export function normal(reason: string, key: string, message: string): DecisionEvent {
  return { type: 'Normal', reason, message, key };
}

export function warning(reason: string, key: string, message: string): DecisionEvent {
  return { type: 'Warning', reason, message, key };
}

/** Names quoted in one message at most; the rest are counted, so a message stays short whatever the input. */
export const MAX_QUOTED_NAMES = 5;
/** A container name has at most 63 characters; anything longer is cut in messages. */
const MAX_QUOTED_CHARS = 63;

/** A name as it appears in a message: cut when longer than any container name can be. */
export function clip(name: string, max = MAX_QUOTED_CHARS): string {
  return name.length > max ? `${name.slice(0, max)}…` : name;
}

/**
 * `"a"`, `"a" and "b"`, `"a", "b" and "c"`: names as operators read them in messages. Long lists
 * show the first few and `and N more`; `total` counts names that were not even kept.
 */
export function quoteList(names: readonly string[], total = names.length): string {
  return joinSample(names.map((n) => `"${clip(n)}"`), total);
}

/** Already formatted items, joined as quoteList joins names. */
export function joinSample(items: readonly string[], total = items.length): string {
  const shown = items.slice(0, MAX_QUOTED_NAMES);
  const more = Math.max(0, total - shown.length);
  if (more > 0) return `${shown.join(', ')} and ${more} more`;
  if (shown.length <= 1) return shown.join('');
  return `${shown.slice(0, -1).join(', ')} and ${shown.at(-1)}`;
}

/** Keys kept per Pod at most: decisions carry a handful, so only a pathological history reaches it. */
export const MAX_KEYS_PER_POD = 128;

/**
 * The event keys already emitted, per Pod key (namespace/name) and uid: a Pod recreated under the
 * same name starts afresh. Forget a Pod when it leaves the cache, or the map grows with every Pod.
 */
export class EmittedEvents {
  private readonly byPod = new Map<string, { uid: string; keys: Set<string> }>();

  /** The events not emitted yet for this Pod; they count as emitted from now on. */
  take(podKey: string, uid: string, events: readonly DecisionEvent[]): DecisionEvent[] {
    return events.filter((event) => this.first(podKey, uid, event.key));
  }

  /** Whether this key is new for the Pod (an event, or a count made once per Pod); it is not from now on. */
  first(podKey: string, uid: string, key: string): boolean {
    let seen = this.byPod.get(podKey);
    if (seen?.uid !== uid) this.byPod.set(podKey, (seen = { uid, keys: new Set() }));
    if (seen.keys.has(key)) return false;
    seen.keys.add(key);
    // A Set iterates in insertion order: the oldest key goes first.
    if (seen.keys.size > MAX_KEYS_PER_POD) seen.keys.delete(seen.keys.values().next().value as string);
    return true;
  }

  forget(podKey: string): void {
    this.byPod.delete(podKey);
  }

  /** How many Pods are remembered (for tests and debugging). */
  size(): number {
    return this.byPod.size;
  }
}
