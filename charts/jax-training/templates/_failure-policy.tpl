{{/* How a Job answers the trainer's exit codes (files/exit-codes.json, from trainer/exit_codes.py). */}}

{{/*
podFailurePolicy (JSON) of the Indexed Job and the JobSet's (or a runtime's) child Job: permanent
codes fail the Job at once; disruptions and the "ignore" codes (stop signal, lost peer) do not count;
retryable codes count.
*/}}
{{- define "jax-training.podFailurePolicy" -}}
{{- $codes := dict "fail" list "ignore" list "retry" list -}}
{{- range (.Files.Get "files/exit-codes.json" | fromJson).exit_codes -}}
{{- $_ := set $codes .action (append (get $codes .action) (int64 .code)) -}}
{{- end -}}
{{- $on := dict -}}
{{- $container := include "jax-training.containerName" . -}}
{{- range $action := list "fail" "ignore" "retry" -}}
{{- $_ := set $on $action (dict "containerName" $container "operator" "In" "values" (get $codes $action)) -}}
{{- end -}}
{{- include "jax-training.json" (dict "rules" (list
  (dict "action" "FailJob" "onExitCodes" $on.fail)
  (dict "action" "Ignore" "onPodConditions" (list (dict "type" "DisruptionTarget" "status" "True")))
  (dict "action" "Ignore" "onExitCodes" $on.ignore)
  (dict "action" "Count" "onExitCodes" $on.retry))) -}}
{{- end -}}
