// The programs' one reading of the clock. Whatever times or dates something takes a Clock, which
// its tests replace with one they move themselves; the rules never read it (their time is passed in).

/** Milliseconds: since the epoch for `now`, from an arbitrary start for `elapsedNow`. */
export type Clock = () => number;

/** The wall clock, as the API server's timestamps count: deadlines, ages, dates. */
export function now(): number {
  return Date.now();
}

/** A clock that never jumps back (NTP, a manual set): for durations and rates alone, never dates. */
export function elapsedNow(): number {
  return performance.now();
}
