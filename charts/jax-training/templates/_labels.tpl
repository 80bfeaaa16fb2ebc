{{/* Labels of every object (the twin of labels() in generator/engines/kubernetes/render.py). */}}

{{/* helm.sh/chart label value. */}}
{{- define "jax-training.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc (int (.Files.Get "files/contract.json" | fromJson).dnsLabelMax) | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels (JSON); call with (dict "root" $ "component" "worker"). */}}
{{- define "jax-training.selectorLabels" -}}
{{- $contract := .root.Files.Get "files/contract.json" | fromJson -}}
{{- include "jax-training.json" (dict
  $contract.nameLabel .root.Chart.Name
  $contract.instanceLabel (include "jax-training.name" .root)
  "app.kubernetes.io/component" .component) -}}
{{- end -}}

{{/*
Labels (JSON); call with (dict "root" $ "component" C ["queue" true] ["chart" true]).
The user's labels come first so they can never override the ones selectors rely on.
queue adds the Kueue queue and priority labels (top-level workload objects), chart adds helm.sh/chart.
*/}}
{{- define "jax-training.labels" -}}
{{- $v := .root.Values -}}
{{- $labels := deepCopy ($v.labels | default dict) -}}
{{- $labels = mergeOverwrite $labels (include "jax-training.selectorLabels" . | fromJson) -}}
{{- $_ := set $labels "app.kubernetes.io/version" (include "jax-training.imageTag" .root | trunc (int (.root.Files.Get "files/contract.json" | fromJson).dnsLabelMax) | trimAll "-_.") -}}{{/* a label value: <= 63, alphanumeric ends */}}
{{- $_ = set $labels "app.kubernetes.io/managed-by" .root.Release.Service -}}
{{- if and .queue $v.queue_name -}}
{{- $contract := .root.Files.Get "files/contract.json" | fromJson -}}
{{- $_ = set $labels $contract.queueLabel $v.queue_name -}}
{{- if $v.kueue.priority_class -}}
{{- $_ = set $labels $contract.priorityLabel $v.kueue.priority_class -}}
{{- end -}}
{{- end -}}
{{- if .chart -}}
{{- $_ = set $labels "helm.sh/chart" (include "jax-training.chart" .root) -}}
{{- end -}}
{{- include "jax-training.json" $labels -}}
{{- end -}}
