{{/* How a Job answers the trainer's exit codes (files/exit-codes.json, from trainer/exit_codes.py; the rules from files/contract.json). */}}

{{/*
podFailurePolicy (JSON) of the Indexed Job: permanent codes fail the Job at once; disruptions and
the "ignore" codes (stop signal, lost peer) do not count; retryable codes count.
*/}}
{{- define "jax-training.podFailurePolicy" -}}
{{- include "jax-training.failurePolicyOf" (dict "root" . "rules" "podFailureRules") -}}
{{- end -}}

{{/*
podFailurePolicy (JSON) of a Job a JobSet owns (ours or a runtime's): disruptions and the "ignore"
codes fail it too, and the JobSet recreates its Jobs without counting (files/contract.json).
*/}}
{{- define "jax-training.childJobFailurePolicy" -}}
{{- include "jax-training.failurePolicyOf" (dict "root" . "rules" "childJobFailureRules") -}}
{{- end -}}

{{/* The podFailurePolicy of the rules named "rules" in files/contract.json; "root" is the chart's context. */}}
{{- define "jax-training.failurePolicyOf" -}}
{{- $root := .root -}}
{{- $codes := dict "fail" list "ignore" list "retry" list -}}
{{- range ($root.Files.Get "files/exit-codes.json" | fromJson).exit_codes -}}
{{- $_ := set $codes .action (append (get $codes .action) (int64 .code)) -}}
{{- end -}}
{{- $container := include "jax-training.containerName" $root -}}
{{- $rules := list -}}
{{- range (get ($root.Files.Get "files/contract.json" | fromJson) .rules) -}}
{{- if hasKey $codes .match -}}
{{- $rules = append $rules (dict "action" .action "onExitCodes" (dict "containerName" $container "operator" "In" "values" (get $codes .match))) -}}
{{- else -}}
{{- $rules = append $rules (dict "action" .action "onPodConditions" (list (dict "type" .match "status" "True"))) -}}
{{- end -}}
{{- end -}}
{{- include "jax-training.json" (dict "rules" $rules) -}}
{{- end -}}
