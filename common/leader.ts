// Leader election on a coordination.k8s.io/v1 Lease, in the manner of client-go: the holder renews
// the Lease every retry period; a candidate takes it over once it has seen no renewal for a whole
// lease duration (measured on its own clock, so clock skew between nodes does not matter).
import type { KubeClient } from './kube/client.ts';
import { resourcePath } from './kube/paths.ts';
import type { Logger } from './log.ts';
import { errorMessage, statusCode } from './log.ts';

/** The fields of a coordination.k8s.io/v1 Lease that the election reads and writes. */
interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds?: number;
  renewDeadlineSeconds?: number;
  retryPeriodSeconds?: number;
  log: Logger;
  onStartedLeading: () => void;
  /** Called when leadership is lost; the process should stop acting (and usually exit). */
  onStoppedLeading: () => void;
}

export class LeaderElector {
  private readonly client: KubeClient;
  private readonly o: Required<LeaderElectionOptions>;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private observed: { record: string; atMs: number } | undefined;
  private lastRenewMs = 0;

  constructor(options: LeaderElectionOptions) {
    this.o = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2, ...options };
    this.client = options.client;
  }

  isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    void this.tick();
  }

  /** Stops campaigning; a leader gives the Lease up so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.leading) return;
    this.leading = false;
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

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      const acquired = await this.tryAcquireOrRenew();
      if (acquired) this.lastRenewMs = Date.now();
      if (acquired && !this.leading) {
        this.leading = true;
        this.o.log.info('became leader', { lease: this.o.name, identity: this.o.identity });
        this.o.onStartedLeading();
      }
    } catch (err) {
      this.o.log.warn('leader election: lease update failed', { error: errorMessage(err) });
    }
    if (this.leading && Date.now() - this.lastRenewMs > this.o.renewDeadlineSeconds * 1000) {
      this.leading = false;
      this.o.log.error('lost leadership: the lease was not renewed in time', { lease: this.o.name });
      this.o.onStoppedLeading();
      return;
    }
    if (!this.stopped) {
      this.timer = setTimeout(() => void this.tick(), this.o.retryPeriodSeconds * 1000);
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity, leaseDurationSeconds } = this.o;
    const now = microTime(new Date());
    let lease: Lease;
    try {
      lease = await this.client.get<Lease>(this.leasePath());
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
      await this.client.create(resourcePath('coordination.k8s.io/v1', 'leases', namespace), {
        metadata: { name, namespace }, spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      });
      return true;
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity;
    const record = `${holder}|${String(spec.renewTime)}|${spec.leaseDurationSeconds}`;
    if (this.observed?.record !== record) this.observed = { record, atMs: Date.now() };
    const duration = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    if (holder && holder !== identity && Date.now() < this.observed.atMs + duration) return false;

    const takingOver = holder !== identity;
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
    return true;
  }

  private leasePath(): string {
    return resourcePath('coordination.k8s.io/v1', 'leases', this.o.namespace, this.o.name);
  }
}

/** A Lease's MicroTime: RFC 3339 with exactly six fractional digits. */
function microTime(at: Date): string {
  return `${at.toISOString().slice(0, 23)}000Z`;
}
