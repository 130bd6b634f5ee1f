// The client-side limit on requests to the API server, as client-go's (--kube-api-qps,
// --kube-api-burst): a token bucket that holds `burst` tokens and gains `qps` a second; each request
// sent, each retry too, takes one. The API server's own fairness (API Priority and Fairness) still
// applies; this only keeps one process that loops from sending more than its share in the first place.
import type { Clock } from '../clock.ts';
import { elapsedNow } from '../clock.ts';

export interface ApiRateLimit {
  /** Tokens gained a second; not above 0: no limit (client-go's negative QPS). */
  qps: number;
  /** Tokens held at most: how many requests may leave at once after a quiet spell. */
  burst: number;
}

export class TokenBucket {
  private readonly qps: number;
  private readonly burst: number;
  private readonly now: Clock;
  /** Below 0 while requests wait: they are owed tokens, first come first served. */
  private tokens: number;
  private lastMs: number;

  constructor(limit: ApiRateLimit, now: Clock = elapsedNow) {
    if (!(limit.qps > 0) || !Number.isFinite(limit.qps)) throw new Error(`a token bucket needs a positive rate, got ${limit.qps}`);
    if (!Number.isInteger(limit.burst) || limit.burst < 1) throw new Error(`a token bucket holds at least 1 token, got ${limit.burst}`);
    this.qps = limit.qps;
    this.burst = limit.burst;
    this.now = now;
    this.tokens = limit.burst;
    this.lastMs = now();
  }

  /**
   * Takes a token and says how long to wait until it is ours (0: at once). A token is reserved at
   * once even when the wait is long, so that later callers queue behind it (client-go's limiter
   * orders its waiters the same way).
   */
  reserve(): number {
    const nowMs = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.lastMs) * this.qps) / 1000);
    this.lastMs = nowMs;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1000) / this.qps;
  }
}
