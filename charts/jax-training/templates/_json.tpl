{{/* How every value reaches a manifest: as JSON (the twin of generator/yaml_text.py). */}}

{{/*
JSON of any value: the one way a value reaches a manifest (JSON is YAML). Characters YAML cannot carry
raw even inside quotes are written as \u escapes, as in generator/yaml_text.py: C1 controls, NEL (Go's
YAML reads it as a line break), the BOM and the non-characters U+FFFE and U+FFFF. toJson already
escapes the rest (U+2028, U+2029, C0 controls).
Values arrive as Helm parses them (every number is a float64): integers are printed through int64.
Helpers that return structures print them with this; callers read them back with fromJson.
*/}}
{{- define "jax-training.json" -}}
{{- $json := toJson . -}}
{{- range $code := concat (untilStep 127 160 1) (list 65279 65534 65535) -}}
{{- $json = replace (printf "%c" $code) (printf "\\u%04x" $code) $json -}}
{{- end -}}
{{- $json -}}
{{- end -}}
