{{/* What a pod asks of its node: the container's resources and the pod's tolerations, GPU's included. */}}

{{/* Container resources (JSON): the user's, plus the GPU resource's limit on GPU pods (files/contract.json). */}}
{{- define "jax-training.containerResources" -}}
{{- $resources := deepCopy (.Values.resources | default dict) -}}
{{- if eq .Values.accelerator "gpu" -}}
{{- $limits := get $resources "limits" | default dict -}}
{{- $_ := set $limits (.Files.Get "files/contract.json" | fromJson).gpuResource (int64 .Values.local_device_count) -}}
{{- $_ = set $resources "limits" $limits -}}
{{- end -}}
{{- include "jax-training.json" $resources -}}
{{- end -}}

{{/* Tolerations (JSON list): the user's, plus the GPU resource's toleration on GPU pods. */}}
{{- define "jax-training.tolerations" -}}
{{- $tolerations := deepCopy (.Values.tolerations | default list) -}}
{{- if eq .Values.accelerator "gpu" -}}
{{- $tolerations = append $tolerations (dict "key" (.Files.Get "files/contract.json" | fromJson).gpuResource "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- include "jax-training.json" $tolerations -}}
{{- end -}}
