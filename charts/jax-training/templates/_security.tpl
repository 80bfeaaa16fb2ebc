{{/* The pod's and the container's security context (JSON): PodSecurity restricted, files/contract.json's runAsId. */}}

{{/* The pod's security context. */}}
{{- define "jax-training.podSecurityContext" -}}
{{- $id := int64 (.Files.Get "files/contract.json" | fromJson).runAsId -}}
{{- include "jax-training.json" (dict "runAsNonRoot" true "runAsUser" $id "runAsGroup" $id "fsGroup" $id
  "seccompProfile" (dict "type" "RuntimeDefault")) -}}
{{- end -}}

{{/* The container's security context. */}}
{{- define "jax-training.containerSecurityContext" -}}
{{- include "jax-training.json" (dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true
  "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL"))) -}}
{{- end -}}
