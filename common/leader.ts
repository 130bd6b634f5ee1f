// Leader election on a coordination.k8s.io/v1 Lease, in the manner of client-go: the holder renews
// the Lease every retry period; a candidate takes it over once it has seen no renewal for a whole
// lease duration (measured on its own clock, so clock skew between nodes does not matter).
import * as k8s from '@kubernetes/client-node';
import type { Logger } from './log.ts';
import { errorMessage, statusCode } from './log.ts';

export interface LeaderElectionOptions {
  kubeConfig: k8s.KubeConfig;
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
  private readonly api: k8s.CoordinationV1Api;
  private readonly o: Required<LeaderElectionOptions>;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private observed: { record: string; atMs: number } | undefined;
  private lastRenewMs = 0;

  constructor(options: LeaderElectionOptions) {
    this.o = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2, ...options };
    this.api = options.kubeConfig.makeApiClient(k8s.CoordinationV1Api);
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
      const lease = await this.api.readNamespacedLease({ namespace: this.o.namespace, name: this.o.name });
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1 };
      await this.api.replaceNamespacedLease({ namespace: this.o.namespace, name: this.o.name, body: lease });
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
    const now = new k8s.V1MicroTime();
    let lease: k8s.V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
      await this.api.createNamespacedLease({
        namespace,
        body: { metadata: { name, namespace }, spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 } },
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
    await this.api.replaceNamespacedLease({ namespace, name, body: lease });
    return true;
  }
}
