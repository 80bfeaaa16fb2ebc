{{/* The target table: files/targets.json, written from generator/targets.py by make generate. */}}

{{/* The facts of the Kubernetes targets (JSON), a row each; hostname and coordinator are printf
formats of (name, index) and (name). A target without a row renders no Kubernetes objects. */}}
{{- define "jax-training.targets" -}}
{{- .Files.Get "files/targets.json" -}}
{{- end -}}

{{/* "true" when the target renders Kubernetes objects (it has a row), "" when it does not. */}}
{{- define "jax-training.kubernetes" -}}
{{- if hasKey (include "jax-training.targets" . | fromJson) .Values.target }}true{{ end -}}
{{- end -}}

{{/* This release's row (a dict); stops the render for a target without one (checks.yaml asks
for it on every render), naming the targets the chart renders. */}}
{{- define "jax-training.target" -}}
{{- $targets := include "jax-training.targets" . | fromJson -}}
{{- $row := get $targets .Values.target -}}
{{- if not $row -}}
{{- fail (printf "target %s renders no Kubernetes objects: render it with `jaxgen render FILE --target %s`, or set target to one of %s"
  .Values.target .Values.target (keys $targets | sortAlpha | join ", ")) -}}
{{- end -}}
{{- include "jax-training.json" $row -}}
{{- end -}}

{{/* The trainer's container: ours, or the one a runtime runs it in (the row's container). */}}
{{- define "jax-training.containerName" -}}
{{- (include "jax-training.target" . | fromJson).container -}}
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
