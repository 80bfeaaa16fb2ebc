{{/* What a job queued to Kueue (queue_name set) carries (the twin of generator/engines/kubernetes/kueue.py). */}}

{{/* "true" when the target's kind is one a stock Kueue does not manage (the row's kueueOptIn) and the
values do not say the cluster's Kueue enables it, "" otherwise. */}}
{{- define "jax-training.kueueUnmanaged" -}}
{{- $v := .Values -}}
{{- if and $v.queue_name (include "jax-training.target" . | fromJson).kueueOptIn (not $v.kueue.jaxjob_integration) }}true{{ end -}}
{{- end -}}

{{/* "true" when the job object is created suspended, for Kueue to admit. */}}
{{- define "jax-training.kueueSuspended" -}}
{{- if and .Values.queue_name (not (include "jax-training.kueueUnmanaged" .)) }}true{{ end -}}
{{- end -}}

{{/* The pod template's topology request (JSON; the twin of kueue.pod_annotations()). */}}
{{- define "jax-training.kueuePodAnnotations" -}}
{{- $k := .Values.kueue -}}
{{- $annotations := dict -}}
{{- if and (include "jax-training.kueueSuspended" .) $k.topology -}}
{{- $_ := set $annotations (printf (.Files.Get "files/contract.json" | fromJson).topologyAnnotation $k.topology_mode) $k.topology -}}
{{- end -}}
{{- include "jax-training.json" $annotations -}}
{{- end -}}
