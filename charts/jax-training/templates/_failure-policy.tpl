{{/* How a Job answers the trainer's exit codes (files/exit-codes.json, from trainer/exit_codes.py; the rules from files/contract.json). */}}

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
{{- $container := include "jax-training.containerName" . -}}
{{- $rules := list -}}
{{- range (.Files.Get "files/contract.json" | fromJson).podFailureRules -}}
{{- if hasKey $codes .match -}}
{{- $rules = append $rules (dict "action" .action "onExitCodes" (dict "containerName" $container "operator" "In" "values" (get $codes .match))) -}}
{{- else -}}
{{- $rules = append $rules (dict "action" .action "onPodConditions" (list (dict "type" .match "status" "True"))) -}}
{{- end -}}
{{- end -}}
{{- include "jax-training.json" (dict "rules" $rules) -}}
{{- end -}}
