// The API server's clock, as this process can know it: the Date header of each answer says the
// server's time (to the second) when it answered, somewhere between our sending and our receiving.
// Deadlines counted from what the API server stamped (a request's creationTimestamp) are compared
// with this clock, so that a node whose clock runs ahead or behind neither ends requests early nor
// holds them too long.
//
// Each answer bounds the offset (server minus local) to [date - received, date + 1 s - sent]; the
// bounds of successive answers are intersected, which narrows the offset to well under a second
// while the clocks keep their offset; answers that contradict it (a clock stepped) start over.
import type { Clock } from '../clock.ts';
import { now } from '../clock.ts';

/** Offsets this small are taken as none: within what one answer can tell. */
const NEGLIGIBLE_MS = 1_000;

export class ServerClock {
  #lo = -Infinity;
  #hi = Infinity;
  #offsetMs = 0;
  readonly #localNow: Clock;

  constructor(localNow: Clock = now) {
    this.#localNow = localNow;
  }

  /** An answer sent at `sentAtMs` and received at `receivedAtMs` (local), with its Date header. */
  observe(date: string | undefined, sentAtMs: number, receivedAtMs: number): void {
    const serverMs = date ? Date.parse(date) : NaN;
    if (Number.isNaN(serverMs) || receivedAtMs < sentAtMs) return;
    const lo = serverMs - receivedAtMs;
    const hi = serverMs + 1_000 - sentAtMs;
    if (lo > this.#hi || hi < this.#lo) {
      this.#lo = lo;
      this.#hi = hi;
    } else {
      this.#lo = Math.max(this.#lo, lo);
      this.#hi = Math.min(this.#hi, hi);
    }
    const mid = (this.#lo + this.#hi) / 2;
    this.#offsetMs = this.#lo <= 0 && this.#hi >= 0 ? 0 : Math.abs(mid) < NEGLIGIBLE_MS ? 0 : Math.round(mid);
  }

  /** The API server's time now, as far as its answers tell (the local time until one has). */
  now(): number {
    return this.#localNow() + this.#offsetMs;
  }

  /** Server minus local, in ms (0 while none can be told). */
  offsetMs(): number {
    return this.#offsetMs;
  }
}
