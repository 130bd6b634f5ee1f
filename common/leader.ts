// Leader election on a coordination.k8s.io/v1 Lease, in the manner of client-go: the holder renews
// the Lease every retry period; a candidate takes it over once it has seen no renewal for a whole
// lease duration (measured on its own clock, so clock skew between nodes does not matter).
//
// Safety: a renewal written by a request sent at time S cannot be seen by another replica before S,
// so no other replica takes the Lease over before S + leaseDuration. The leader therefore counts
// each successful renewal from the moment its write was sent, and a watchdog timer, independent of
// the API calls (which may hang up to the client's request timeout), ends leadership at
// lastRenewSent + renewDeadline (< leaseDuration, the margin absorbing clock-rate differences).
import type { Clock } from './clock.ts';
import { now } from './clock.ts';
import type { KubeApi } from './kube/api.ts';
import { isNotFound } from './kube/errors.ts';
import { resourcePath } from './kube/paths.ts';
import type { Logger } from './log.ts';
import { errorMessage } from './log.ts';

/** The fields of a coordination.k8s.io/v1 Lease that the election reads and writes. */
interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

/** The client calls the election makes. */
export type LeaseClient = Pick<KubeApi, 'get' | 'create' | 'replace'>;

export interface LeaderElectionOptions {
  client: LeaseClient;
  namespace: string;
  name: string;
  identity: string;
  /** How long a candidate waits, from when it saw the last renewal, before taking over (default 15). */
  leaseDurationSeconds?: number;
  /** How long after the last successful renewal was sent the leader stops leading (default 10). */
  renewDeadlineSeconds?: number;
  /** How often the Lease is renewed, or its acquisition tried (default 2). */
  retryPeriodSeconds?: number;
  log: Logger;
  onStartedLeading: () => void;
  /** Called when leadership is lost; the process should stop acting (and usually exit). */
  onStoppedLeading: () => void;
  /** The clock leadership is timed by (default the system's). */
  now?: Clock;
}

/** Node's timers hold at most 2^31-1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What one acquire-or-renew round found. */
type Attempt =
  /** This replica holds the Lease; the write that made it so was sent at `sentAtMs`. */
  | { held: true; sentAtMs: number }
  /** Another replica holds the Lease and its lease duration has not passed. */
  | { held: false; holder: string };

export class LeaderElector {
  private readonly client: LeaseClient;
  private readonly o: Required<LeaderElectionOptions>;
  private leading = false;
  private stopped = false;
  /** Set once leadership was lost: the elector never leads again (the process is expected to exit). */
  private lost = false;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private observed: { record: string; atMs: number } | undefined;
  /** When the write of the last successful acquisition or renewal was sent (by the clock `now`). */
  private lastRenewSentMs = 0;

  constructor(options: LeaderElectionOptions) {
    this.o = {
      ...options,
      leaseDurationSeconds: options.leaseDurationSeconds ?? 15,
      renewDeadlineSeconds: options.renewDeadlineSeconds ?? 10,
      retryPeriodSeconds: options.retryPeriodSeconds ?? 2,
      now: options.now ?? now,
    };
    const { leaseDurationSeconds: lease, renewDeadlineSeconds: deadline, retryPeriodSeconds: retry } = this.o;
    if (![lease, deadline, retry].every((s) => Number.isFinite(s) && s > 0) || lease * 1000 > MAX_TIMER_MS) {
      throw new Error(`leader election: durations must be positive and at most ${MAX_TIMER_MS / 1000} s`);
    }
    if (!(lease > deadline && deadline > retry)) {
      throw new Error(`leader election: need leaseDuration (${lease}) > renewDeadline (${deadline}) > retryPeriod (${retry})`);
    }
    this.client = options.client;
  }

  /** Whether this replica leads; false as soon as the renew deadline has passed. */
  isLeader(): boolean {
    return this.leading && this.o.now() < this.deadlineMs();
  }

  start(): void {
    void this.tick();
  }

  /** Stops campaigning; a leader gives the Lease up so a standby takes over at once. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    if (!this.leading) return;
    this.leading = false;
    // Let a renewal in flight finish first (no longer than leadership could last anyway), so that
    // its write cannot land after the release and hold the Lease for another lease duration.
    if (this.inflight) await waitAtMost(this.inflight, this.deadlineMs() - this.o.now());
    try {
      const lease = await this.client.get<Lease>(this.leasePath());
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1 };
      await this.client.replace(this.leasePath(), lease);
      this.o.log.info('leader lease released', { lease: this.o.name });
    } catch (err) {
      this.o.log.warn('could not release the leader lease', { error: errorMessage(err) });
    }
  }

  private deadlineMs(): number {
    return this.lastRenewSentMs + this.o.renewDeadlineSeconds * 1000;
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    if (this.stopped || this.lost) return;
    const round = this.round();
    this.inflight = round;
    await round;
    this.inflight = undefined;
    if (!this.stopped && !this.lost) {
      this.timer = setTimeout(() => void this.tick(), this.o.retryPeriodSeconds * 1000);
    }
  }

  /** One acquire-or-renew round and what follows from it; never rejects. */
  private async round(): Promise<void> {
    let attempt: Attempt | undefined;
    try {
      attempt = await this.tryAcquireOrRenew();
    } catch (err) {
      this.o.log.warn('leader election: lease update failed', { error: errorMessage(err) });
    }
    if (this.stopped || this.lost) return;
    const now = this.o.now();
    if (this.leading && now >= this.deadlineMs()) {
      // The watchdog normally gets here first; a renewal that returns this late does not count.
      this.loseLeadership('the lease was not renewed in time');
      return;
    }
    if (!attempt) return;
    if (!attempt.held) {
      if (this.leading) this.loseLeadership(`the lease is held by ${attempt.holder}`);
      return;
    }
    if (now >= attempt.sentAtMs + this.o.renewDeadlineSeconds * 1000) {
      // Only when not leading yet (a leader was stopped above): another replica may already
      // consider this acquisition expired. The next round renews it and starts leading then.
      this.o.log.warn('leader election: the lease was acquired too late to act on; retrying', { lease: this.o.name });
      return;
    }
    this.lastRenewSentMs = Math.max(this.lastRenewSentMs, attempt.sentAtMs);
    this.armWatchdog();
    if (!this.leading) {
      this.leading = true;
      this.o.log.info('became leader', { lease: this.o.name, identity: this.o.identity });
      this.call(this.o.onStartedLeading, 'onStartedLeading');
    }
  }

  /** Ends leadership at lastRenewSent + renewDeadline, whatever the API calls are doing. */
  private armWatchdog(): void {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      this.watchdog = undefined;
      if (!this.leading || this.stopped || this.lost) return;
      if (this.o.now() < this.deadlineMs()) this.armWatchdog();
      else this.loseLeadership('the lease was not renewed in time');
    }, Math.max(0, this.deadlineMs() - this.o.now()));
  }

  private loseLeadership(reason: string): void {
    this.leading = false;
    this.lost = true;
    clearTimeout(this.watchdog);
    clearTimeout(this.timer);
    this.o.log.error(`lost leadership: ${reason}`, { lease: this.o.name });
    this.call(this.o.onStoppedLeading, 'onStoppedLeading');
  }

  private call(callback: () => void, name: string): void {
    try {
      callback();
    } catch (err) {
      this.o.log.error(`leader election: ${name} failed`, { error: errorMessage(err) });
    }
  }

  private async tryAcquireOrRenew(): Promise<Attempt> {
    const { namespace, name, identity, leaseDurationSeconds } = this.o;
    let lease: Lease;
    try {
      lease = await this.client.get<Lease>(this.leasePath());
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const sentAtMs = this.o.now();
      const now = microTime(new Date(sentAtMs));
      await this.client.create(resourcePath('coordination.k8s.io/v1', 'leases', namespace), {
        metadata: { name, namespace }, spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      });
      return { held: true, sentAtMs };
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity;
    const record = `${holder}|${String(spec.renewTime)}|${spec.leaseDurationSeconds}`;
    // Observed when the GET returned: the record existed no later than that, so counting from here
    // never cuts the holder's lease short.
    if (this.observed?.record !== record) this.observed = { record, atMs: this.o.now() };
    const duration = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    if (holder && holder !== identity && this.o.now() < this.observed.atMs + duration) return { held: false, holder };

    const takingOver = holder !== identity;
    const sentAtMs = this.o.now();
    const now = microTime(new Date(sentAtMs));
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: now,
      acquireTime: takingOver ? now : spec.acquireTime,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (takingOver ? 1 : 0),
    };
    // replace carries the resourceVersion: two candidates cannot both win the same round.
    await this.client.replace(this.leasePath(), lease);
    return { held: true, sentAtMs };
  }

  private leasePath(): string {
    return resourcePath('coordination.k8s.io/v1', 'leases', this.o.namespace, this.o.name);
  }
}

/** Waits for `promise`, but no longer than `ms`. */
async function waitAtMost(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  } finally {
    clearTimeout(timer);
  }
}

/** A Lease's MicroTime: RFC 3339 with exactly six fractional digits. */
function microTime(at: Date): string {
  return `${at.toISOString().slice(0, 23)}000Z`;
}
