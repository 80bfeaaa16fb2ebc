{{/* The trainer image and its pull secrets (the twin of generator/images.py). */}}

{{/* The image tag: image.tag, or when empty appVersion with the accelerator's variant
(files/image-variants.json, from generator/images.py), the tags scripts/image.sh builds. */}}
{{- define "jax-training.imageTag" -}}
{{- $variants := .Files.Get "files/image-variants.json" | fromJson -}}
{{- $stock := include "jax-training.stockDefault" . | fromJsonArray -}}
{{- if $stock -}}
{{- index $stock 1 -}}
{{- else -}}
{{- .Values.image.tag | default (printf "%s-%s" .Chart.AppVersion (get $variants .Values.accelerator)) -}}
{{- end -}}
{{- end -}}

{{/* The default stock image [repository, tag] (JSON) of a stock image left at the default repository
and tag, else []. */}}
{{- define "jax-training.stockDefault" -}}
{{- $variants := .Files.Get "files/image-variants.json" | fromJson -}}
{{- $i := .Values.image -}}
{{- if and (eq $i.source "stock") (not $i.tag) (not $i.digest) (eq $i.repository $variants.defaultRepository) -}}
{{- include "jax-training.json" (get $variants.stock .Values.accelerator) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* The image reference: repository@digest when image.digest pins it, else repository:tag. */}}
{{- define "jax-training.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- $repository := .Values.image.repository -}}
{{- range $i, $part := include "jax-training.stockDefault" . | fromJsonArray }}{{ if not $i }}{{ $repository = $part }}{{ end }}{{ end -}}
{{- printf "%s:%s" $repository (include "jax-training.imageTag" .) -}}
{{- end -}}
{{- end -}}

{{/* image.pull_policy, or where empty Kubernetes' default for the reference: Always for the tag
latest, else IfNotPresent (a digest names one image for ever). */}}
{{- define "jax-training.imagePullPolicy" -}}
{{- if .Values.image.pull_policy -}}
{{- .Values.image.pull_policy -}}
{{- else if and (not .Values.image.digest) (eq (include "jax-training.imageTag" .) "latest") -}}
Always
{{- else -}}
IfNotPresent
{{- end -}}
{{- end -}}

{{/* imagePullSecrets (JSON list). */}}
{{- define "jax-training.pullSecrets" -}}
{{- $secrets := list -}}
{{- range $secret := .Values.image.pull_secrets -}}
{{- $secrets = append $secrets (dict "name" $secret) -}}
{{- end -}}
{{- include "jax-training.json" $secrets -}}
{{- end -}}
