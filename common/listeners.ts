// Who must hear of one kind of change: subscribers, told in the order they subscribed.
export class Listeners<Args extends unknown[]> {
  private readonly listeners: ((...args: Args) => void)[] = [];

  /** Subscribes: `listener` is told of every change from now on. */
  add(listener: (...args: Args) => void): void {
    this.listeners.push(listener);
  }

  /** Tells every subscriber, in the order they subscribed. */
  tell(...args: Args): void {
    for (const listener of this.listeners) listener(...args);
  }
}
