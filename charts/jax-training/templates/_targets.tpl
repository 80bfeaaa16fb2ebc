{{/* The target table: each Kubernetes target's row ends its own template, as the template
jax-training.facts.<target> (written from generator/targets.py by make generate); hostname and
coordinator are printf formats of (name, index) and (name). The targets of other engines are listed
in files/contract.json; they render no Kubernetes objects. */}}

{{/* "true" when the target renders Kubernetes objects (it has a row), "" when it does not. */}}
{{- define "jax-training.kubernetes" -}}
{{- if not (has .Values.target (.Files.Get "files/contract.json" | fromJson).otherEngineTargets) }}true{{ end -}}
{{- end -}}

{{/* This release's row (JSON); stops the render for a target of another engine (checks.yaml asks
for it on every render). Go templates cannot list the defined rows: the chart's README has the table. */}}
{{- define "jax-training.target" -}}
{{- if not (include "jax-training.kubernetes" .) -}}
{{- fail (printf "target %s renders no Kubernetes objects: render it with `jaxgen render FILE --target %s`, or set target to one of the Kubernetes targets in the chart's README (helm show readme)"
  .Values.target .Values.target) -}}
{{- end -}}
{{- include (printf "jax-training.facts.%s" .Values.target) . -}}
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
