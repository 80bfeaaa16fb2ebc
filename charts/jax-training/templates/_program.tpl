{{/* What the container runs: its command and arguments (the twin of generator/program.py). */}}

{{/* The container's command (JSON list): the user's program, or the built-in trainer. */}}
{{- define "jax-training.command" -}}
{{- include "jax-training.json" (.Values.program.command | default (list "python" "-m" "trainer")) -}}
{{- end -}}

{{/* The container's args (JSON list): the user's program's, or the built-in trainer's. */}}
{{- define "jax-training.args" -}}
{{- if .Values.program.command -}}
{{- include "jax-training.json" (.Values.program.args | default list) -}}
{{- else -}}
{{- include "jax-training.trainerArgs" . -}}
{{- end -}}
{{- end -}}

{{/* Arguments of `python -m trainer`, as a JSON list of strings: files/trainer-flags.json (written from
trainer/config.py by make generate) names the flag, the variable and the spelling of each. */}}
{{- define "jax-training.trainerArgs" -}}
{{- $args := list "train" -}}
{{- range $row := .Files.Get "files/trainer-flags.json" | fromJsonArray -}}
{{- if or (not $row.model) (eq $row.model $.Values.training.model) -}}{{- /* else another model's setting */ -}}
{{- $value := $.Values -}}
{{- range splitList "." $row.variable }}{{ $value = index $value . }}{{ end -}}
{{- if eq $row.kind "bool" -}}
{{- $args = append $args (ternary $row.flag (printf "--no-%s" (trimPrefix "--" $row.flag)) $value) -}}
{{- else if eq $row.kind "int" -}}
{{- $args = concat $args (list $row.flag (int64 $value | toString)) -}}
{{- else if eq $row.kind "float" -}}
{{- $args = concat $args (list $row.flag (include "jax-training.float" $value)) -}}
{{- else if eq $row.kind "optional" -}}
{{- if $value }}{{ $args = concat $args (list $row.flag (toString $value)) }}{{ end -}}
{{- else if eq $row.kind "list" -}}
{{- $items := list -}}
{{- range $value }}{{ $items = append $items (int64 . | toString) }}{{ end -}}
{{- $args = concat $args (list $row.flag (join "," $items)) -}}
{{- else -}}
{{- $args = concat $args (list $row.flag (toString $value)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "jax-training.json" (concat $args .Values.program.args) -}}
{{- end -}}

{{/*
A float argument, printed as Python's repr(float(x)) prints it ("0.1", "1.0", "1e-05"): Go's %v
agrees with it except that it drops the ".0" of integral values. The schema bounds the float values
(learning_rate <= 10, momentum < 1) far below where the two switch to exponent notation differently.
*/}}
{{- define "jax-training.float" -}}
{{- $x := float64 . -}}
{{- if eq $x (floor $x) -}}
{{- printf "%.1f" $x -}}
{{- else -}}
{{- toString $x -}}
{{- end -}}
{{- end -}}
