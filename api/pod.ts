// What this project reads of the core Pod API beyond the client library's types: the lifecycle
// types the agent reads from the Pod spec (never from a request), and kubelet's defaults.

export interface ExecAction { command?: string[] }
export interface HTTPHeader { name: string; value: string }
export interface HTTPGetAction {
  path?: string;
  port: number | string;
  host?: string;
  scheme?: 'HTTP' | 'HTTPS';
  httpHeaders?: HTTPHeader[];
}
export interface TCPSocketAction { port: number | string; host?: string }
export interface Handler {
  exec?: ExecAction;
  httpGet?: HTTPGetAction;
  tcpSocket?: TCPSocketAction;
}
export interface ContainerPort { name?: string; containerPort: number; protocol?: string }

/** Kubernetes' default terminationGracePeriodSeconds, for a Pod that does not set one. */
export const DEFAULT_GRACE_SECONDS = 30;
