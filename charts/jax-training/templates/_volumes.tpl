{{/* The pod's volumes and the container's mounts: data, checkpoints, /tmp, GPU /dev/shm. */}}

{{/* The container's volume mounts (JSON list). */}}
{{- define "jax-training.volumeMounts" -}}
{{- $v := .Values -}}
{{- $data := dict "name" "data" "mountPath" $v.data.dir -}}
{{- if not $v.data.download -}}
{{- $_ := set $data "readOnly" true -}}
{{- end -}}
{{- $mounts := list $data (dict "name" (.Files.Get "files/contract.json" | fromJson).checkpointsVolume "mountPath" $v.checkpoint.dir) (dict "name" "tmp" "mountPath" "/tmp") -}}
{{- if eq $v.accelerator "gpu" -}}
{{- $mounts = append $mounts (dict "name" "dshm" "mountPath" "/dev/shm") -}}
{{- end -}}
{{- include "jax-training.json" $mounts -}}
{{- end -}}

{{/* The pod's volumes (JSON list); the checkpoints' is the outputs claim when persistence has one. */}}
{{- define "jax-training.volumes" -}}
{{- $v := .Values -}}
{{- $claim := include "jax-training.outputsClaim" . -}}
{{- $outputs := ternary (dict "persistentVolumeClaim" (dict "claimName" $claim)) $v.checkpoint.volume (ne $claim "") -}}
{{- $volumes := list (include "jax-training.volume" (list "data" $v.data.volume) | fromJson)
  (include "jax-training.volume" (list (.Files.Get "files/contract.json" | fromJson).checkpointsVolume $outputs) | fromJson)
  (dict "name" "tmp" "emptyDir" dict) -}}
{{- if eq $v.accelerator "gpu" -}}
{{- $volumes = append $volumes (dict "name" "dshm" "emptyDir" (dict "medium" "Memory" "sizeLimit" $v.shm_size)) -}}
{{- end -}}
{{- include "jax-training.json" $volumes -}}
{{- end -}}

{{/* A pod volume (JSON) from a volume source; an empty source is an emptyDir. Call with (list NAME SOURCE). */}}
{{- define "jax-training.volume" -}}
{{- $name := index . 0 -}}
{{- $source := index . 1 | default dict -}}
{{- if not $source -}}
{{- $source = dict "emptyDir" dict -}}
{{- end -}}
{{- include "jax-training.json" (mergeOverwrite (dict "name" $name) (deepCopy $source)) -}}
{{- end -}}
