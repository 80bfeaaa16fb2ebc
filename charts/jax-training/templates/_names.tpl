{{/* Names of the objects and of the pods' hosts (the twin of generator/names.py and generator/engines/kubernetes/hosts.py). */}}

{{/* Name of every object (validated by values.schema.json: a DNS-1035 label). */}}
{{- define "jax-training.name" -}}
{{- .Values.name -}}
{{- end -}}

{{/* The objects' namespace: namespace when set, else the release's (helm --namespace), as Helm charts do. */}}
{{- define "jax-training.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The PersistentVolumeClaim mounted at checkpoint.dir by persistence ("" when off): an existing
one, else the rendered <name>-outputs. */}}
{{- define "jax-training.outputsClaim" -}}
{{- $p := .Values.persistence -}}
{{- if $p.existing_claim -}}
{{- $p.existing_claim -}}
{{- else if $p.enabled -}}
{{- printf "%s-outputs" (include "jax-training.name" .) -}}
{{- end -}}
{{- end -}}

{{/* The job object's annotations of where its outputs are (JSON; the twin of
generator/engines/kubernetes/outputs.py): <checkpoint.dir>/<name> in the containers, and with
outputs.uri the bucket's copy, s3://BUCKET/PREFIX/<name> as the trainer's bucket.job_uri spells it. */}}
{{- define "jax-training.outputsAnnotations" -}}
{{- $keys := (.Files.Get "files/contract.json" | fromJson).outputsAnnotations -}}
{{- $name := include "jax-training.name" . -}}
{{- $found := dict $keys.dir (printf "%s/%s" (regexReplaceAll "/+$" .Values.checkpoint.dir "") $name) -}}
{{- with .Values.outputs.uri -}}
{{- $bucket := regexFind "^s3://[^/]+" . -}}
{{- $_ := set $found $keys.uri (join "/" (compact (list $bucket (trimPrefix $bucket . | trimAll "/") $name))) -}}
{{- end -}}
{{- include "jax-training.json" $found -}}
{{- end -}}

{{/* DNS name of process 0 as the other pods resolve it (pod hostname . Service subdomain, or the coordinator Service). */}}
{{- define "jax-training.coordinatorHost" -}}
{{- printf (include "jax-training.target" . | fromJson).coordinator (include "jax-training.name" .) -}}
{{- end -}}

{{/* The longest pod hostname (a DNS-1123 label, at most 63 characters) the target creates. */}}
{{- define "jax-training.longestHostname" -}}
{{- printf (include "jax-training.target" . | fromJson).hostname (include "jax-training.name" .) (sub (int64 .Values.hosts_count) 1) -}}
{{- end -}}
