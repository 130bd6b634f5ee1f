// The names users, dashboards and both parts see on Pods and nodes: the sidecar markers, our
// annotations and condition, the virtual-node label, our requests' names and the table of event
// reasons. Shared by the agent, the controller, the rules and the tests: one place, no typos.

/** `true` (any case): the container is a sidecar stopped through a ContainerRecreateRequest on real nodes. */
export const ENV_TERMINATE_WHEN_JOB_EXIT = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT';
/** A non-empty image: the container's image is swapped for it on virtual nodes. */
export const ENV_TERMINATE_WITH_IMAGE = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE';
/** `true` (any case), only together with ENV_TERMINATE_WHEN_JOB_EXIT: its exit code does not decide the phase. */
export const ENV_IGNORE_EXIT_CODE = 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE';

/** Comma-separated container names treated as if they had ENV_TERMINATE_WHEN_JOB_EXIT=true. */
export const ANNOTATION_SIDECARS = 'sidecar-terminator.dev/sidecars';
/** Comma-separated sidecar names treated as if they had ENV_IGNORE_EXIT_CODE=true. */
export const ANNOTATION_IGNORE_EXIT_CODE = 'sidecar-terminator.dev/ignore-exit-code';
/** Comma-separated sidecar names stopped only once every other sidecar has exited (proxies others flush through). */
export const ANNOTATION_STOP_LAST = 'sidecar-terminator.dev/stop-last';
/** Comma-separated container names the Pod's author keeps main containers: no marker or policy makes them sidecars. */
export const ANNOTATION_MAINS = 'sidecar-terminator.dev/mains';

/** Pod condition set together with a phase patch (rules R19, R23, R24 in docs/design.md). */
export const CONDITION_SIDECAR_TERMINATED = 'SidecarTerminated';
/** Kubelet's Pod condition while it starts every container of the Pod over in place (a RestartAllContainers rule). */
export const CONDITION_ALL_CONTAINERS_RESTARTING = 'AllContainersRestarting';
/** Kubelet's mark on a static Pod's mirror. */
export const ANNOTATION_MIRROR_POD = 'kubernetes.io/config.mirror';

/** Node label that marks a virtual node (virtual-kubelet). */
export const VIRTUAL_NODE_LABEL_KEY = 'type';
export const VIRTUAL_NODE_LABEL_VALUE = 'virtual-kubelet';

// The ContainerRecreateRequest's group, kind and labels live in container-recreate-request.ts.

/** First attempt: `sidecar-termination-<pod uid>`; attempt n >= 2 adds `-<n>`. */
export const REQUEST_NAME_PREFIX = 'sidecar-termination-';

/** Event reasons, so dashboards and tests can match on them. */
export const EVENT_REASONS = {
  unknownContainer: 'SidecarAnnotationUnknownContainer',
  markerIneffective: 'SidecarMarkerIneffective',
  notStoppable: 'SidecarNotStoppable',
  stopping: 'StoppingSidecars',
  retrying: 'RetryingSidecarTermination',
  replacingImage: 'ReplacingSidecarImage',
  phaseSet: 'SidecarTerminated',
  restartLoop: 'SidecarRestartLoop',
  sidecarFailedPod: 'SidecarFailedPod',
  /** A sidecar whose own restartPolicy (or rule) restarts it after any exit: stopping it cannot end the Pod, so it is not stopped. */
  sidecarRestartsItself: 'SidecarRestartsItself',
  /** A sidecar that has not started (image pull or config error) while the mains are done. */
  sidecarNotStarted: 'SidecarNotStarted',
  /** Every container of the Pod is marked as a sidecar: the Pod is left alone. */
  noMainContainer: 'SidecarNoMainContainer',
  /** The agent stops a container. */
  killing: 'Killing',
  failedPreStopHook: 'FailedPreStopHook',
  /** A cluster policy's stop command failed or did not finish within the grace period (R54); the stop goes on. */
  failedStopCommand: 'FailedStopCommand',
  /** A preStop hook the agent does not run (tcpSocket, a kind unknown to it, HTTP hooks turned off); the stop goes on. */
  preStopHookNotRun: 'PreStopHookNotRun',
  /** A request that does not match its Pod (runtime labels, node, uid) was refused; nothing was executed. */
  requestRefused: 'RequestRefused',
  /** The Pod is bound to a node the API server does not have: looked at again slowly, not in a loop. */
  nodeNotFound: 'SidecarNodeNotFound',
  /** The API refused a request the controller built (e.g. invalid); it is not retried in a loop. */
  requestRejected: 'SidecarTerminationRequestRejected',
  /** An Audit sidecar policy would have stopped sidecars of this Pod now; nothing was stopped. */
  policyAudit: 'SidecarPolicyAudit',
  /** A well-known sidecar nobody marked keeps the Pod running after its other containers are done. */
  unmarkedSidecarHoldsPod: 'UnmarkedSidecarHoldingPod',
  /** The API server serves the Pod as more than the controller reads (or not as JSON): it is left alone. */
  podUnreadable: 'SidecarTerminatorCannotReadPod',
  /** A container's image is longer than any image reference: a policy's image pattern was not tried on it (R54). */
  policyImageTooLong: 'SidecarPolicyImageTooLong',
} as const;
