{{/* The container's environment (the twin of container_env() in generator/engines/kubernetes/render.py). */}}

{{/* The container's env (JSON list): PYTHONUNBUFFERED where the engine does not set it, our JAX_*
variables where it does not set those, the coordinator Service's address where the target has one,
the gang's attempt and a lost peer's wait where the controller restarts it as a whole, the pod's
UID where the container restarts in place, JAX_LOCAL_DEVICE_COUNT (every target), the bucket's
credentials from outputs.secret, then the user's env. */}}
{{- define "jax-training.containerEnv" -}}
{{- $env := list -}}
{{- $contract := .Files.Get "files/contract.json" | fromJson -}}
{{- if (include "jax-training.target" . | fromJson).unbuffered -}}
{{- $env = append $env (dict "name" $contract.unbufferedEnv "value" "1") -}}
{{- end -}}
{{- $env = concat $env (include "jax-training.processEnv" . | fromJsonArray) -}}
{{- with (include "jax-training.target" . | fromJson).coordinatorEnv -}}
{{- $env = append $env (dict "name" . "value" (printf "%s:%d" (include "jax-training.coordinatorHost" $) (int64 $.Values.coordinator_port))) -}}
{{- end -}}
{{- with (include "jax-training.target" . | fromJson).attemptField -}}
{{- $env = append $env (dict "name" $contract.attemptEnv "valueFrom" (dict "fieldRef" (dict "fieldPath" .))) -}}
{{- $env = append $env (dict "name" $contract.peerLostWaitEnv "value" ($contract.peerLostWaitSeconds | toString)) -}}
{{- end -}}
{{- if include "jax-training.containerRestartRules" . | fromJsonArray -}}
{{- $env = append $env (dict "name" $contract.podUidEnv "valueFrom" (dict "fieldRef" (dict "fieldPath" $contract.podUidField))) -}}
{{- end -}}
{{- $deviceCount := $contract.localDeviceCountEnv -}}
{{- $env = append $env (dict "name" $deviceCount "value" (int64 .Values.local_device_count | toString)) -}}
{{- with .Values.outputs.secret -}}
{{- $secret := . -}}
{{- range $key := $contract.bucketCredentialsEnv -}}
{{- $env = append $env (dict "name" $key "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" $key))) -}}
{{- end -}}
{{- end -}}
{{- include "jax-training.json" (concat $env (.Values.env | default list)) -}}
{{- end -}}

{{/*
The launcher's variables (JAX_*, named by the row's processEnv) on the targets that render them
(JSON list); the process id is the Job's completion index. The JAXJob operator and a TrainJob's runtime inject their own variables instead.
*/}}
{{- define "jax-training.processEnv" -}}
{{- $names := (include "jax-training.target" . | fromJson).processEnv -}}
{{- if not $names -}}
[]
{{- else -}}
{{- include "jax-training.json" (list
  (dict "name" $names.coordinator
        "value" (printf "%s:%d" (include "jax-training.coordinatorHost" .) (int64 .Values.coordinator_port)))
  (dict "name" $names.numProcesses "value" (int64 .Values.hosts_count | toString))
  (dict "name" $names.processId
        "valueFrom" (dict "fieldRef" (dict "fieldPath" (.Files.Get "files/contract.json" | fromJson).completionIndexField)))) -}}
{{- end -}}
{{- end -}}
