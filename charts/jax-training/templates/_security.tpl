{{/* The pod's and the container's security context (JSON): PodSecurity restricted, uid 1000. */}}

{{/* The pod's security context. */}}
{{- define "jax-training.podSecurityContext" -}}
{{- include "jax-training.json" (dict "runAsNonRoot" true "runAsUser" 1000 "runAsGroup" 1000 "fsGroup" 1000
  "seccompProfile" (dict "type" "RuntimeDefault")) -}}
{{- end -}}

{{/* The container's security context. */}}
{{- define "jax-training.containerSecurityContext" -}}
{{- include "jax-training.json" (dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true
  "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL"))) -}}
{{- end -}}
