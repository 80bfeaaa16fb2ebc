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

{{/*
The container's in-place restarts (JSON list; the twin of container_restart_rules()) on a target that
restarts in place (its row's restartsInPlace: the Indexed Job): a Restart rule on the codes whose
action is files/contract.json's inPlaceRestart; empty elsewhere, or where the Kubernetes version
(kube_version, else the cluster's as helm reads it) lacks container restart rules.
*/}}
{{- define "jax-training.containerRestartRules" -}}
{{- $since := (.Files.Get "files/kubernetes-versions.json" | fromJson).containerRestartRules -}}
{{- $version := .Values.kube_version | default .Capabilities.KubeVersion.Version -}}
{{- if and (include "jax-training.target" . | fromJson).restartsInPlace (semverCompare (printf ">=%s-0" $since) $version) -}}
{{- $action := (.Files.Get "files/contract.json" | fromJson).inPlaceRestart -}}
{{- $codes := list -}}
{{- range (.Files.Get "files/exit-codes.json" | fromJson).exit_codes -}}
{{- if eq .action $action }}{{ $codes = append $codes (int64 .code) }}{{ end -}}
{{- end -}}
{{- include "jax-training.json" (list (dict "action" "Restart" "exitCodes" (dict "operator" "In" "values" $codes))) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}
