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

{{/* Tolerations (JSON list): the user's, plus the GPU resource's toleration on GPU pods, plus those of a
lost node's taints for failure.node_lost_seconds, less those whose key a user toleration names with the
NoExecute effect or none (policy.py's node_lost_tolerations). */}}
{{- define "jax-training.tolerations" -}}
{{- $contract := .Files.Get "files/contract.json" | fromJson -}}
{{- $tolerations := deepCopy (.Values.tolerations | default list) -}}
{{- if eq .Values.accelerator "gpu" -}}
{{- $tolerations = append $tolerations (dict "key" $contract.gpuResource "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- $named := list -}}
{{- range (.Values.tolerations | default list) -}}
{{- if has (.effect | default "") (list "" $contract.nodeLostEffect) -}}
{{- $named = append $named (.key | default "") -}}
{{- end -}}
{{- end -}}
{{- range $contract.nodeLostTaints -}}
{{- if not (has . $named) -}}
{{- $tolerations = append $tolerations (dict "key" . "operator" "Exists" "effect" $contract.nodeLostEffect "tolerationSeconds" (int64 $.Values.failure.node_lost_seconds)) -}}
{{- end -}}
{{- end -}}
{{- include "jax-training.json" $tolerations -}}
{{- end -}}
