{{/* The trainer image and its pull secrets (the twin of generator/images.py). */}}

{{/* The image tag: image.tag, or when empty appVersion with the accelerator's variant
(files/image-variants.json, from generator/images.py), the tags scripts/image.sh builds. */}}
{{- define "jax-training.imageTag" -}}
{{- $variants := .Files.Get "files/image-variants.json" | fromJson -}}
{{- .Values.image.tag | default (printf "%s-%s" .Chart.AppVersion (get $variants .Values.accelerator)) -}}
{{- end -}}

{{/* The image reference, repository:tag. */}}
{{- define "jax-training.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "jax-training.imageTag" .) -}}
{{- end -}}

{{/* imagePullSecrets (JSON list). */}}
{{- define "jax-training.pullSecrets" -}}
{{- $secrets := list -}}
{{- range $secret := .Values.image.pull_secrets -}}
{{- $secrets = append $secrets (dict "name" $secret) -}}
{{- end -}}
{{- include "jax-training.json" $secrets -}}
{{- end -}}
