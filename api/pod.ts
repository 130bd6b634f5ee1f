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
/** Kubelet does not run it as a lifecycle handler (only as a probe); the agent refuses it too. */
export interface TCPSocketAction { port: number | string; host?: string }
export interface SleepAction { seconds: number }
/** A lifecycle handler as the Pod spec has it: kinds a later release adds arrive as other keys. */
export interface Handler {
  exec?: ExecAction;
  httpGet?: HTTPGetAction;
  tcpSocket?: TCPSocketAction;
  sleep?: SleepAction;
}
export interface ContainerPort { name?: string; containerPort: number; protocol?: string }

/** Kubernetes' default terminationGracePeriodSeconds, for a Pod that does not set one. */
export const DEFAULT_GRACE_SECONDS = 30;
