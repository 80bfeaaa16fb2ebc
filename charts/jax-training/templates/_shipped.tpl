{{/* Code that travels with the job: its ConfigMap, the first container that unpacks it
(shipped/pod-start.py), their volumes, the trainer container's PYTHONPATH and working directory (the twin
of generator/engines/kubernetes/shipped.py). Helm cannot read the checkout or a folder: the archives
come as base64 through --set-file image.trainer_archive=FILE and program.archive=FILE
(python -m generator.shipping trainer | program DIR). */}}

{{/* "true" when the job ships code (image.source stock, program.dir), else empty; fails without the
archive it needs (a TrainJob target is refused by the rules, templates/_rules.tpl). */}}
{{- define "jax-training.shipped" -}}
{{- $v := .Values -}}
{{- $stock := eq $v.image.source "stock" -}}
{{- if or $stock $v.program.dir -}}
{{- if and $stock (not $v.image.trainer_archive) -}}
{{- fail "$.image.trainer_archive: image.source stock needs the trainer's archive: helm --set-file image.trainer_archive=FILE, FILE from `python -m generator.shipping trainer` (jaxgen render makes it itself)" -}}
{{- end -}}
{{- range $field, $archive := dict "image.trainer_archive" $v.image.trainer_archive "program.archive" $v.program.archive -}}
{{- if and $archive (not (regexMatch "^[A-Za-z0-9+/\\s]*=*\\s*$" $archive)) -}}
{{- fail (printf "$.%s: not base64: give the file `python -m generator.shipping` writes (--set-file %s=FILE)" $field $field) -}}
{{- end -}}
{{- end -}}
{{- $limit := int (.Files.Get "files/contract.json" | fromJson).helmArchivesLimit -}}
{{- $total := add (len ($v.image.trainer_archive | default "")) (len ($v.program.archive | default "")) -}}
{{- if gt $total $limit -}}
{{- fail (printf "$.%s: the archives come to %d characters of base64, more than the %d a Helm release holds (Helm keeps it, each archive twice, in a Secret of at most 1 MiB): make program.dir smaller, render with jaxgen or scripts/prepare.sh (768 KiB packed), or build an image" (ternary "program.archive" "image.trainer_archive" (not (empty $v.program.archive))) $total $limit) -}}
{{- end -}}
{{- if and $v.program.dir (not $v.program.archive) -}}
{{- fail "$.program.archive: program.dir needs the folder's archive: helm --set-file program.archive=FILE, FILE from `python -m generator.shipping program DIR` (jaxgen render makes it itself)" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The ConfigMap's data and binaryData (JSON {"data", "binaryData"}). */}}
{{- define "jax-training.shippedContents" -}}
{{- $data := dict "pod-start.py" (.Files.Get "shipped/pod-start.py") -}}
{{- $binary := dict -}}
{{- if eq .Values.image.source "stock" -}}
{{- $_ := set $data "stock-requirements.txt" (.Files.Get "shipped/stock-requirements.txt") -}}
{{- $_ := set $binary "trainer.tar.gz" .Values.image.trainer_archive -}}
{{- end -}}
{{- if .Values.program.dir -}}
{{- $_ := set $data "sitecustomize.py" (.Files.Get "shipped/sitecustomize.py") -}}
{{- $_ := set $binary "program.tar.gz" .Values.program.archive -}}
{{- end -}}
{{- toJson (dict "data" $data "binaryData" $binary) -}}
{{- end -}}

{{/* The ConfigMap's name, after its contents (it is immutable: other code is another ConfigMap), as
generator/shipping.py's content_digest: sha256 of one key=sha256(value) line per entry, keys sorted. */}}
{{- define "jax-training.shippedName" -}}
{{- $contents := include "jax-training.shippedContents" . | fromJson -}}
{{- $entries := merge (dict) $contents.data $contents.binaryData -}}
{{- $lines := list -}}
{{- range $key := keys $entries | sortAlpha -}}
{{- $lines = append $lines (printf "%s=%s" $key (sha256sum (index $entries $key))) -}}
{{- end -}}
{{- printf "%s-shipped-%s" (include "jax-training.name" .) (join "\n" $lines | sha256sum | trunc 10) -}}
{{- end -}}

{{/* The first container (JSON list). */}}
{{- define "jax-training.shippedInitContainers" -}}
{{- $contract := .Files.Get "files/contract.json" | fromJson -}}
{{- $resources := dict -}}
{{- range $part, $amounts := include "jax-training.containerResources" . | fromJson -}}
{{- $kept := omit $amounts $contract.gpuResource -}}
{{- if $kept }}{{ $_ := set $resources $part $kept }}{{ end -}}
{{- end -}}
{{- $command := list "python" "/jax-training/shipped/pod-start.py" "/jax-training/shipped" "/jax-training/run" -}}
{{- if eq .Values.image.source "stock" }}{{ $command = concat $command .Values.image.pip_args }}{{ end -}}
{{- $container := dict "name" "pod-start" "image" (include "jax-training.image" .) "imagePullPolicy" (include "jax-training.imagePullPolicy" .) "command" $command "env" (list (dict "name" "HOME" "value" "/tmp") (dict "name" "PYTHONNOUSERSITE" "value" "1")) -}}
{{- if $resources }}{{ $_ := set $container "resources" $resources }}{{ end -}}
{{- $_ := set $container "securityContext" (include "jax-training.containerSecurityContext" . | fromJson) -}}
{{- $_ := set $container "volumeMounts" (list (dict "name" "shipped" "mountPath" "/jax-training/shipped" "readOnly" true) (dict "name" "run" "mountPath" "/jax-training/run") (dict "name" "tmp" "mountPath" "/tmp")) -}}
{{- include "jax-training.json" (list $container) -}}
{{- end -}}

{{/* The trainer container's PYTHONPATH (JSON list of one env entry). */}}
{{- define "jax-training.shippedEnv" -}}
{{- $paths := ternary (list "/jax-training/run" "/jax-training/run/packages") (list "/opt/jax-training") (eq .Values.image.source "stock") -}}
{{- if .Values.program.dir }}{{ $paths = append $paths "/jax-training/shipped" }}{{ end -}}
{{- include "jax-training.json" (list (dict "name" "PYTHONPATH" "value" (join ":" $paths))) -}}
{{- end -}}

{{/* The trainer container's mounts and the pod's volumes (JSON lists). */}}
{{- define "jax-training.shippedMounts" -}}
{{- include "jax-training.json" (list (dict "name" "shipped" "mountPath" "/jax-training/shipped" "readOnly" true) (dict "name" "run" "mountPath" "/jax-training/run")) -}}
{{- end -}}
{{- define "jax-training.shippedVolumes" -}}
{{- include "jax-training.json" (list (dict "name" "shipped" "configMap" (dict "name" (include "jax-training.shippedName" .))) (dict "name" "run" "emptyDir" dict)) -}}
{{- end -}}
