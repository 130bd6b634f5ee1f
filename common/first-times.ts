// What was already told, within a bound: each key is first once, and past `max` keys the oldest is
// forgotten (it may then be told again, which costs an event, never memory).
export class FirstTimes {
  private readonly seen = new Set<string>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  /** True the first time `key` is asked about (since it was last forgotten). */
  first(key: string): boolean {
    if (this.seen.has(key)) return false;
    this.seen.add(key);
    if (this.seen.size > this.max) this.seen.delete(this.seen.values().next().value!);
    return true;
  }
}
