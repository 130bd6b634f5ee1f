// A Pod the controller cannot read (the API server serves it over the client's answer cap) is left
// out of its cache, so nothing is done for its sidecars. Its owner hears why, once per Pod, on the
// Pod itself: the log is the operator's, not theirs.
import type { EventRecorder } from '../common/events.ts';
import type { UnreadableObject } from '../common/kube/api.ts';
import { MAX_ANSWER_BYTES } from '../common/kube/client.ts';
import { EVENT_REASONS } from '../api/names.ts';

/** Pods remembered as warned at most: past it, the memory starts over (a Pod may be warned twice). */
export const MAX_WARNED_PODS = 10_000;

export const UNREADABLE_POD_MESSAGE = `sidecar-terminator cannot read this Pod: the API server serves it as more than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB ` +
  '(JSON writes each <, > and & as six bytes). Its sidecars are not stopped for it: make its env, args or annotations smaller.';

export class UnreadablePodWarnings {
  readonly #events: Pick<EventRecorder, 'emit'>;
  /** The uids warned. */
  readonly #warned = new Set<string>();

  constructor(events: Pick<EventRecorder, 'emit'>) {
    this.#events = events;
  }

  /** Warns on the Pod, unless it was warned already or its answer did not say who it is. */
  warn({ namespace, name, uid }: UnreadableObject): void {
    if (!namespace || !name || !uid || this.#warned.has(uid)) return;
    if (this.#warned.size >= MAX_WARNED_PODS) this.#warned.clear();
    this.#warned.add(uid);
    this.#events.emit({ namespace, name, uid }, { type: 'Warning', reason: EVENT_REASONS.podUnreadable, message: UNREADABLE_POD_MESSAGE });
  }
}
