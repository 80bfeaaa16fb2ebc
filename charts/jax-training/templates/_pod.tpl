{{/* The pod template of every workload and the objects' metadata (the twin of _pod.j2). */}}

{{/*
The pod template of every target; call with (dict "root" $ ["subdomain" NAME] ["patch" true]).
patch: the pod template of a TrainJob's runtime patch, whose runtime makes the pod: only the fields a
patch may carry, and of the container its name and what it mounts (the TrainJob's trainer sets its
image, command, args, env and resources). Every scalar goes through jax-training.json.
*/}}
{{- define "jax-training.podTemplate" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $patch := .patch -}}
{{- $resources := include "jax-training.containerResources" $root | fromJson -}}
{{- $tolerations := include "jax-training.tolerations" $root | fromJsonArray -}}
{{- $annotations := include "jax-training.podAnnotations" $root | fromJson -}}
{{- $shipped := include "jax-training.shipped" $root }}
metadata:
  labels: {{ include "jax-training.labels" (dict "root" $root "component" "worker") }}
  {{- if $annotations }}
  annotations: {{ include "jax-training.json" $annotations }}
  {{- end }}
spec:
  {{- if not $patch }}
  restartPolicy: Never
  {{- end }}
  terminationGracePeriodSeconds: {{ int64 $v.termination_grace_period_seconds }}
  {{- if .subdomain }}
  subdomain: {{ include "jax-training.json" .subdomain }}
  {{- end }}
  {{- if not $patch }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  {{- end }}
  {{- if $v.service_account_name }}
  serviceAccountName: {{ include "jax-training.json" $v.service_account_name }}
  {{- end }}
  {{- if and $v.priority_class_name (not $patch) }}
  priorityClassName: {{ include "jax-training.json" $v.priority_class_name }}
  {{- end }}
  securityContext: {{ include "jax-training.podSecurityContext" $root }}
  {{- if $v.image.pull_secrets }}
  imagePullSecrets: {{ include "jax-training.pullSecrets" $root }}
  {{- end }}
  {{- if $v.node_selector }}
  nodeSelector: {{ include "jax-training.json" $v.node_selector }}
  {{- end }}
  {{- if $v.affinity }}
  affinity: {{ include "jax-training.json" $v.affinity }}
  {{- end }}
  {{- if $tolerations }}
  tolerations: {{ include "jax-training.json" $tolerations }}
  {{- end }}
  {{- if and $shipped (not $patch) }}
  initContainers: {{ include "jax-training.shippedInitContainers" $root }}
  {{- end }}
  containers:
    - name: {{ include "jax-training.containerName" $root | include "jax-training.json" }}
      {{- if not $patch }}
      image: {{ include "jax-training.image" $root | include "jax-training.json" }}
      imagePullPolicy: {{ include "jax-training.imagePullPolicy" $root | include "jax-training.json" }}
      command: {{ include "jax-training.command" $root }}
      args: {{ include "jax-training.args" $root }}
      {{- if $v.program.dir }}
      workingDir: "/jax-training/run/program"
      {{- end }}
      env:
        {{- $env := include "jax-training.containerEnv" $root | fromJsonArray }}
        {{- if $shipped }}{{ $env = concat (include "jax-training.shippedEnv" $root | fromJsonArray) $env }}{{ end }}
        {{- range $item := $env }}
        - {{ include "jax-training.json" $item }}
        {{- end }}
      ports:
        - name: {{ include "jax-training.coordinatorPortName" $root | include "jax-training.json" }}
          containerPort: {{ int64 $v.coordinator_port }}
          protocol: TCP
        {{- if $v.metrics.port }}
        - {{ include "jax-training.metricsPort" $root }}
        {{- end }}
      {{- if $resources }}
      resources: {{ include "jax-training.json" $resources }}
      {{- end }}
      {{- $restartRules := include "jax-training.containerRestartRules" $root | fromJsonArray }}
      {{- if $restartRules }}
      restartPolicy: Never
      restartPolicyRules: {{ include "jax-training.json" $restartRules }}
      {{- end }}
      {{- end }}
      securityContext: {{ include "jax-training.containerSecurityContext" $root }}
      {{- if $shipped }}
      volumeMounts: {{ concat (include "jax-training.volumeMounts" $root | fromJsonArray) (include "jax-training.shippedMounts" $root | fromJsonArray) | include "jax-training.json" }}
  volumes: {{ concat (include "jax-training.volumes" $root | fromJsonArray) (include "jax-training.shippedVolumes" $root | fromJsonArray) | include "jax-training.json" }}
      {{- else }}
      volumeMounts: {{ include "jax-training.volumeMounts" $root }}
  volumes: {{ include "jax-training.volumes" $root }}
      {{- end }}
{{- end -}}

{{/* The trainer's metrics port (JSON), named for a PodMonitor (the twin of metrics_port()). */}}
{{- define "jax-training.metricsPort" -}}
{{- include "jax-training.json" (dict "name" (.Files.Get "files/contract.json" | fromJson).metricsPortName "containerPort" (int64 .Values.metrics.port) "protocol" "TCP") -}}
{{- end -}}

{{/* The pods' annotations (JSON): annotation-based scrape discovery's when the metrics port is on, then
the annotations variable, which wins over them, then Kueue's topology request (the twin of
pod_annotations()). */}}
{{- define "jax-training.podAnnotations" -}}
{{- $v := .Values -}}
{{- $scrape := dict -}}
{{- if $v.metrics.port -}}
{{- $scrape = dict "prometheus.io/scrape" "true" "prometheus.io/port" (int64 $v.metrics.port | toString) "prometheus.io/path" (.Files.Get "files/contract.json" | fromJson).metricsPath -}}
{{- end -}}
{{- $annotations := merge (deepCopy ($v.annotations | default dict)) $scrape -}}
{{- include "jax-training.json" (mergeOverwrite $annotations (include "jax-training.kueuePodAnnotations" . | fromJson)) -}}
{{- end -}}

{{/* Object metadata (name, namespace, labels, annotations); call with (dict "root" $ "labels" DICT
["annotations" DICT]): those annotations win over the annotations variable. */}}
{{- define "jax-training.metadata" -}}
metadata:
  name: {{ .name | default (include "jax-training.name" .root) | include "jax-training.json" }}
  namespace: {{ include "jax-training.namespace" .root | include "jax-training.json" }}
  labels: {{ include "jax-training.json" .labels }}
  {{- $annotations := merge (dict) (.annotations | default dict) .root.Values.annotations }}
  {{- if $annotations }}
  annotations: {{ include "jax-training.json" $annotations }}
  {{- end }}
{{- end -}}
