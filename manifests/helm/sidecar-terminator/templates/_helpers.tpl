{{/*
The app's name (nameOverride, default the chart's): the app.kubernetes.io/name label of every
object and of the Pod selectors.
*/}}
{{- define "sidecar-terminator.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name (fullnameOverride, default the app's name): the same whatever the
release's name, as the chart is installed once per cluster and its cluster-wide objects (and one
agent per node) must not be doubled by a second release name.
*/}}
{{- define "sidecar-terminator.fullname" -}}
{{- .Values.fullnameOverride | default (include "sidecar-terminator.name" .) | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/*
The namespace of every namespaced object (namespaceOverride, default the release's).
*/}}
{{- define "sidecar-terminator.namespace" -}}
{{ .Values.namespaceOverride | default .Release.Namespace }}
{{- end }}

{{/*
commonLabels, refused where they would overwrite one of the chart's own labels (which selectors,
the controller's --agent-pod-selector and Helm's ownership rely on).
*/}}
{{- define "sidecar-terminator.commonLabels" -}}
{{- range $key, $_ := .Values.commonLabels }}
{{- if or (hasPrefix "app.kubernetes.io/" $key) (hasPrefix "helm.sh/" $key) }}
{{- fail (printf "commonLabels: %s is one of the chart's own labels (app.kubernetes.io/*, helm.sh/*)" $key) }}
{{- end }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The labels of every object: the kustomize base's name and part-of, Helm's own, and commonLabels.
*/}}
{{- define "sidecar-terminator.labels" -}}
app.kubernetes.io/name: {{ include "sidecar-terminator.name" . }}
app.kubernetes.io/part-of: sidecar-terminator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{ include "sidecar-terminator.releaseLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- include "sidecar-terminator.commonLabels" . }}
{{- end }}

{{/*
The release's instance and version labels, on every object and Pod.
*/}}
{{- define "sidecar-terminator.releaseLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
A component's Pod selector: (list $ "agent") or (list $ "controller"). The selectors of a
Deployment and a DaemonSet cannot change on upgrade: keep these two labels as they are.
*/}}
{{- define "sidecar-terminator.selector" -}}
app.kubernetes.io/name: {{ include "sidecar-terminator.name" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/*
A component's Pod labels: its selector, the release's labels, commonLabels and its podLabels value.
(list $ "agent") or (list $ "controller").
*/}}
{{- define "sidecar-terminator.podLabels" -}}
{{- $ := index . 0 }}
{{- include "sidecar-terminator.selector" . }}
{{ include "sidecar-terminator.releaseLabels" $ }}
{{- include "sidecar-terminator.commonLabels" $ }}
{{- with (get $.Values (index . 1)).podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The labels of a component's objects: (list $ "agent") or (list $ "controller").
*/}}
{{- define "sidecar-terminator.componentLabels" -}}
app.kubernetes.io/component: {{ index . 1 }}
{{ include "sidecar-terminator.labels" (index . 0) }}
{{- end }}

{{/*
The image of both workloads: repository@digest, or repository:tag (default: the chart's appVersion).
*/}}
{{- define "sidecar-terminator.image" -}}
{{- $repository := required "image.repository is empty: leave it unset for the released image (ghcr.io/sidecar-terminator/sidecar-terminator), or name where you pushed yours (npm run image; docs/images.md), e.g. --set image.repository=registry.example.com/platform/sidecar-terminator" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{ $repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
Flags as args items (`- --name=value`), each only when its value differs from the program's own
default, so that the default values render the kustomize base's args exactly. A whole number read
from YAML (a float64) is passed as one, a fraction (a rate) as it is. The defaults are
agent/config.ts's and crr/config.ts's; test/manifests-helm.test.ts checks values.yaml against them.
(list (list "name" value programDefault) ...)
*/}}
{{- define "sidecar-terminator.flags" -}}
{{- range . }}
{{- $value := index . 1 }}
{{- if and (kindIs "float64" $value) (eq $value (floor $value)) }}{{ $value = int64 $value }}{{ end }}
{{- if ne (toString $value) (toString (index . 2)) }}
- --{{ index . 0 }}={{ $value }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The namespace of the controller's Lease (and of the Role that lets it use it).
*/}}
{{- define "sidecar-terminator.leaseNamespace" -}}
{{ .Values.controller.leaseNamespace | default (include "sidecar-terminator.namespace" .) }}
{{- end }}


{{/*
The agent's ServiceAccount: its object, the DaemonSet, every binding of the agent's roles and the
agent policy's match all take the name from here, so the create permission never goes without the
policy that confines it.
*/}}
{{- define "sidecar-terminator.agentServiceAccount" -}}
{{ include "sidecar-terminator.fullname" . }}-agent
{{- end }}

{{/*
The agent's runtime socket: (list hostPath pathUnderHostRunDir). The path under /host/var/run is
one the agent looks for (agent/runtime/discover.ts), so it finds the socket without a flag.
*/}}
{{- define "sidecar-terminator.runtimeSocket" -}}
{{- $presets := dict
    "containerd" (list "/run/containerd/containerd.sock" "containerd/containerd.sock")
    "k3s" (list "/run/k3s/containerd/containerd.sock" "k3s/containerd/containerd.sock")
    "microk8s" (list "/var/snap/microk8s/common/run/containerd.sock" "containerd.sock")
    "crio" (list "/run/crio/crio.sock" "crio/crio.sock")
    "cri-dockerd" (list "/run/cri-dockerd.sock" "cri-dockerd.sock")
    "docker" (list "/run/docker.sock" "docker.sock") }}
{{- $preset := get $presets .Values.agent.runtime }}
{{- if not $preset }}
{{- fail (printf "agent.runtime %q: one of containerd, k3s, microk8s, crio, cri-dockerd, docker (or set agent.hostRunPath)" .Values.agent.runtime) }}
{{- end }}
{{- list (.Values.agent.runtimeSocketHostPath | default (index $preset 0)) (index $preset 1) | toJson }}
{{- end }}

{{/*
A ServiceMonitor's or PodMonitor's endpoint: (list <its values> "service") or (list <its values> "pod"),
the discovery role whose meta labels name the component.
*/}}
{{- define "sidecar-terminator.scrapeEndpoint" -}}
{{- $values := index . 0 -}}
port: metrics
path: /metrics
interval: {{ $values.interval }}
{{- with $values.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
relabelings:
  # Which component a series came from, and on which node an agent runs: for ad-hoc queries
  # (neither the alerts nor the dashboard need these labels).
  - sourceLabels: [__meta_kubernetes_{{ index . 1 }}_label_app_kubernetes_io_component]
    targetLabel: component
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
  {{- with $values.relabelings }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $values.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- /*
"true" when the admission policies are installed: admissionPolicies.enabled auto (the default)
where the API server, or helm template's --api-versions, serves ValidatingAdmissionPolicy v1
(Kubernetes 1.30+); true or false whatever it serves.
*/ -}}
{{- define "sidecar-terminator.admissionPolicies" -}}
{{- $wanted := toString .Values.admissionPolicies.enabled -}}
{{- if not (has $wanted (list "auto" "true" "false")) -}}
{{- fail (printf "admissionPolicies.enabled is %q: auto, true or false" $wanted) -}}
{{- end -}}
{{- if or (eq $wanted "true") (and (eq $wanted "auto") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")) -}}
true
{{- end -}}
{{- end -}}
