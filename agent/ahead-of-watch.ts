// What this agent wrote that the watch has not delivered yet, by request uid: the requests the fast
// path created (acted on at once instead of one watch event later; the API has them, so nothing is
// lost with the process), and the last status written over a version the cache still holds (writing
// from that version would only conflict: each conflict one more failed request and a retry's delay).
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';

interface Ahead {
  /** Created by this agent, until the watch delivers it. */
  created?: ContainerRecreateRequest;
  /** As this agent last wrote it, with the resourceVersion it replaced. */
  written?: { replaced: string | undefined; request: ContainerRecreateRequest };
}

export class AheadOfWatch {
  private readonly byUid = new Map<string, Ahead>();

  /** A request this agent has just created. */
  created(request: ContainerRecreateRequest): void {
    const uid = request.metadata.uid;
    if (uid) this.entry(uid).created = request;
  }

  /** A status this agent wrote over `replaced`; `request` is the object as the API answered. */
  wrote(uid: string, replaced: string | undefined, request: ContainerRecreateRequest): void {
    this.entry(uid).written = { replaced, request };
  }

  /** The Pod's requests: those of the watch cache, and those created here that the watch has not delivered yet. */
  requestsOf(namespace: string, podName: string, cached: readonly ContainerRecreateRequest[]): ContainerRecreateRequest[] {
    for (const r of cached) this.drop(r.metadata.uid!, 'created');
    const created = [...this.byUid.values()].flatMap((a) => (a.created ? [a.created] : []))
      .filter((r) => r.metadata.namespace === namespace && r.spec.podName === podName);
    return [...cached, ...created];
  }

  /** The cached request, or what this agent wrote over that very version. */
  latest(cached: ContainerRecreateRequest): ContainerRecreateRequest {
    const uid = cached.metadata.uid;
    const written = uid ? this.byUid.get(uid)?.written : undefined;
    if (!written) return cached;
    if (cached.metadata.resourceVersion === written.replaced) return written.request;
    // The watch has caught up, or someone else wrote since: the cache is the truth again.
    this.drop(uid!, 'written');
    return cached;
  }

  /** Drops what is kept of requests no longer active (completed by the controller, deleted). */
  forgetAllBut(activeUids: ReadonlySet<string>): void {
    for (const uid of this.byUid.keys()) if (!activeUids.has(uid)) this.byUid.delete(uid);
  }

  private entry(uid: string): Ahead {
    let ahead = this.byUid.get(uid);
    if (!ahead) this.byUid.set(uid, ahead = {});
    return ahead;
  }

  private drop(uid: string, part: keyof Ahead): void {
    const ahead = this.byUid.get(uid);
    if (!ahead) return;
    delete ahead[part];
    if (!ahead.created && !ahead.written) this.byUid.delete(uid);
  }
}
