// The DevTools protocol of a running Node process, for the benchmark's CPU profiles and heap snapshots.
// SIGUSR1 switches the process' inspector on; it listens on 127.0.0.1:9229 in the process' network
// namespace, so for a Pod's process the caller runs inside that namespace (nsenter --net=...).
import { readFileSync } from 'node:fs';

const INSPECTOR = 'http://127.0.0.1:9229';

export interface Inspector {
  /** Sends a protocol command: resolves with its result, rejects with its error. */
  call(method: string, params?: object): Promise<unknown>;
  /** Calls `handler` with the params of each `event`, e.g. HeapProfiler.addHeapSnapshotChunk. */
  on(event: string, handler: (params: unknown) => void): void;
  /** Switches the inspector off again, so that no debug port stays open in the Pod. */
  close(): Promise<void>;
}

interface Message { id?: number; method?: string; params?: unknown; result?: unknown; error?: { message: string } }

/** Switches on the inspector of `pid`, which must be a Node process (SIGUSR1 ends any other), and connects to it. */
export async function openInspector(pid: number): Promise<Inspector> {
  const ownPid = pidInItsNamespace(pid);
  process.kill(pid, 'SIGUSR1');
  const ws = new WebSocket(await debuggerUrl());
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let lastId = 0;
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (err: Error) => void }>();
  const handlers = new Map<string, (params: unknown) => void>();
  ws.onmessage = (m) => {
    const msg = JSON.parse(String(m.data)) as Message;
    if (msg.method) handlers.get(msg.method)?.(msg.params);
    if (msg.id === undefined) return;
    const call = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) call?.reject(new Error(msg.error.message));
    else call?.resolve(msg.result);
  };
  const closed = new Promise<void>((resolve) => {
    ws.onclose = () => {
      for (const call of pending.values()) call.reject(new Error('inspector connection closed'));
      resolve();
    };
  });
  const send = (method: string, params: object) => new Promise<unknown>((resolve, reject) => {
    const id = ++lastId;
    pending.set(id, { resolve, reject });
    ws.send(JSON.stringify({ id, method, params }));
  });
  const inspector: Inspector = {
    call: (method, params = {}) => send(method, params),
    on: (event, handler) => { handlers.set(event, handler); },
    async close() {
      // _debugEnd drops this session before it can answer: the socket closing is the answer.
      send('Runtime.evaluate', { expression: 'process._debugEnd()' }).catch(() => {});
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('inspector did not switch off')), 5000).unref());
      await Promise.race([closed, timeout]);
    },
  };
  // Another process' inspector may hold the port (then ours did not come up): profile none rather than that one.
  const { result } = (await inspector.call('Runtime.evaluate', { expression: 'process.pid' })) as { result: { value: number } };
  if (result.value !== ownPid) {
    ws.close();
    throw new Error(`the inspector on ${INSPECTOR} is pid ${result.value}'s, not ${ownPid}'s (pid ${pid} on the host)`);
  }
  return inspector;
}

/** The pid the process sees for itself, in its Pod's pid namespace: the last of NSpid. */
function pidInItsNamespace(pid: number): number {
  const nsPids = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]?.trim().split(/\s+/);
  return Number(nsPids?.at(-1) ?? pid);
}

/** The inspector's WebSocket address, once it has come up after the signal. */
async function debuggerUrl(): Promise<string> {
  for (let i = 0; i < 50; i++) {
    try {
      const [target] = (await (await fetch(`${INSPECTOR}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
      if (target) return target.webSocketDebuggerUrl;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('inspector did not come up');
}
