{{/* The target table: files/targets.json, written from generator/targets.py by make sync-schema. */}}

{{/* The facts of the Kubernetes targets (JSON), a row each; hostname and coordinator are printf
formats of (name, index) and (name). */}}
{{- define "jax-training.targets" -}}
{{- .Files.Get "files/targets.json" -}}
{{- end -}}

{{/* This release's row of jax-training.targets (a dict); fails for a target without one (slurm). */}}
{{- define "jax-training.target" -}}
{{- $row := get (include "jax-training.targets" . | fromJson) .Values.target -}}
{{- if not $row -}}
{{- fail (printf "target %s renders no Kubernetes objects" .Values.target) -}}
{{- end -}}
{{- include "jax-training.json" $row -}}
{{- end -}}

{{/* The trainer's container: ours, or the one a runtime runs it in (the row's runtimeContainer). */}}
{{- define "jax-training.containerName" -}}
{{- (include "jax-training.target" . | fromJson).runtimeContainer | default "jax" -}}
{{- end -}}

{{/* The container port's name: the training-operator takes a JAXJob's coordinator port from the
port named jaxjob-port (and would otherwise inject 6666). */}}
{{- define "jax-training.coordinatorPortName" -}}
{{- (include "jax-training.target" . | fromJson).portName -}}
{{- end -}}

{{/* The coordinator's port: the engine's where it picks one, else coordinator_port. */}}
{{- define "jax-training.coordinatorPort" -}}
{{- (include "jax-training.target" . | fromJson).enginePort | default .Values.coordinator_port | int64 -}}
{{- end -}}
