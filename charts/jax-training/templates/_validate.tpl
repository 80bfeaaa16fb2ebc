{{/*
The rules across fields that values.schema.json cannot say. Those the rule vocabulary can say are
compiled from jaxgen's rule tables into _rules.tpl (make generate); the rest, hand-written here, are
the twins of generator/checks.py semantic_errors() and generator/engines/kubernetes/checks.py errors(),
with the same messages. Helm has already applied values.schema.json when these run. Every broken
rule is reported, then the render fails.
*/}}
{{- define "jax-training.validate" -}}
{{- $v := .Values -}}
{{- $kubernetes := include "jax-training.kubernetes" . -}}
{{- $contract := .Files.Get "files/contract.json" | fromJson -}}{{/* generated from trainer/contract.py and generator/engines/kubernetes/policy.py */}}
{{- $errors := include "jax-training.rules" . | fromJsonArray -}}
{{- $hosts := int $v.hosts_count -}}
{{- $local := int $v.local_device_count -}}
{{- $devices := mul $hosts $local -}}
{{- $batch := int $v.training.batch_size -}}
{{- $model := int $v.training.model_parallelism -}}
{{- if gt $model 1 -}}
{{- /* the sizes the model's sharding rules split (trainer/models, written to files/models.json) */ -}}
{{- $splitKey := (index (.Files.Get "files/models.json" | fromJson) $v.training.model).model_axis -}}
{{- $sizes := list -}}
{{- $indivisible := mod $local $model -}}
{{- range index $v.training $v.training.model $splitKey -}}
{{- $sizes = append $sizes (int64 . | toString) -}}
{{- if mod (int .) $model }}{{ $indivisible = 1 }}{{ end -}}
{{- end -}}
{{- if $indivisible -}}
{{- $errors = append $errors (printf "$.training.model_parallelism: %d must divide the local device count %d (a model axis stays within one host) and each of training.%s.%s (%s)" $model $local $v.training.model $splitKey (join "," $sizes)) -}}
{{- else if mod $batch (div $devices $model) -}}
{{- $errors = append $errors (printf "$.training.batch_size: %d is not divisible by the data-parallel size %d" $batch (div $devices $model)) -}}
{{- end -}}
{{- end -}}
{{- if $kubernetes -}}
{{- $suffix := (include "jax-training.target" . | fromJson).podNameSuffix | default "" -}}
{{- $longest := printf "%s%s" (include "jax-training.longestHostname" .) $suffix -}}
{{- $limit := int $contract.dnsLabelMax -}}
{{- if gt (len $longest) $limit -}}
{{- $errors = append $errors (printf "$.name: %s '%s' would be %d characters (limit %d); shorten name by %d" (ternary "pod name" "pod hostname" (ne $suffix "")) $longest (len $longest) $limit (sub (len $longest) $limit)) -}}
{{- end -}}
{{- end -}}
{{- $gpuFound := include "jax-training.gpuRequest" . | fromJsonArray -}}
{{- if eq $v.accelerator "gpu" -}}
{{- range $found := $gpuFound -}}
{{- if ne (index $found 1 | toString) (toString $local) -}}
{{- $errors = append $errors (printf "$.resources.%s.%s: %s contradicts local_device_count %d (leave it out: it is set from local_device_count)" (index $found 0) $contract.gpuResource (index $found 1 | toString) $local) -}}
{{- end -}}
{{- end -}}
{{- else if $gpuFound -}}
{{- $errors = append $errors (printf "$.resources.%s.%s: GPUs requested but accelerator is 'cpu'" (index (first $gpuFound) 0) $contract.gpuResource) -}}
{{- end -}}
{{- $requests := $v.resources.requests | default dict -}}
{{- $limits := $v.resources.limits | default dict -}}
{{- $sections := dict "requests" $requests "limits" $limits -}}
{{- range $kind := list "requests" "limits" -}}
{{- range $name := keys (index $sections $kind) | sortAlpha -}}
{{- if not (or (contains "/" $name) (has $name $contract.standardResources) (hasPrefix $contract.hugePagesPrefix $name)) -}}
{{- $errors = append $errors (printf "$.resources.%s.%s: not a container resource: %s, %s<size> or a name with its domain (example.com/%s)" $kind $name (join ", " $contract.standardResources) $contract.hugePagesPrefix $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $name := keys $requests | sortAlpha -}}
{{- $request := index $requests $name -}}
{{- $limit := index $limits $name -}}
{{- $exact := or (hasPrefix $contract.hugePagesPrefix $name) (and (contains "/" $name) (not (contains $contract.nativeResourceDomain $name))) -}}
{{- if or (kindIs "invalid" $request) (eq $name $contract.gpuResource) -}}
{{- else if and $exact (kindIs "invalid" $limit) -}}
{{- $errors = append $errors (printf "$.resources.requests.%s: %v needs a limit equal to it (resources.limits.%s); Kubernetes never overcommits %s" $name $request $name $name) -}}
{{- else if and $exact (ne (include "jax-training.quantity" (dict "value" $request "suffixes" $contract.quantitySuffixes) | float64) (include "jax-training.quantity" (dict "value" $limit "suffixes" $contract.quantitySuffixes) | float64)) -}}
{{- $errors = append $errors (printf "$.resources.requests.%s: %v differs from its limit %v (resources.limits.%s); Kubernetes never overcommits %s" $name $request $limit $name $name) -}}
{{- else if and (not (kindIs "invalid" $limit)) (gt (include "jax-training.quantity" (dict "value" $request "suffixes" $contract.quantitySuffixes) | float64) (include "jax-training.quantity" (dict "value" $limit "suffixes" $contract.quantitySuffixes) | float64)) -}}
{{- $errors = append $errors (printf "$.resources.requests.%s: %v is more than its limit %v (resources.limits.%s); Kubernetes refuses a request above its limit" $name $request $limit $name) -}}
{{- end -}}
{{- end -}}
{{- range $field := list "data" "checkpoint" -}}
{{- $dir := (index $v $field).dir -}}
{{- $clean := clean $dir -}}
{{- $overlapped := list -}}
{{- range $image := $contract.imageDirs -}}
{{- if or (eq $clean $image) (hasPrefix (printf "%s/" $image) $clean) (hasPrefix (printf "%s/" $clean) $image) -}}
{{- $overlapped = append $overlapped $image -}}
{{- end -}}
{{- end -}}
{{- if and $overlapped (not (has $clean $contract.systemDirs)) -}}
{{- $errors = append $errors (printf "$.%s.dir: '%s' overlaps %s, which the image or the kernel provides; choose a directory of its own" $field $dir (first $overlapped)) -}}
{{- end -}}
{{- end -}}
{{- range $field := list "data" "checkpoint" -}}
{{- $volume := (index $v $field).volume | default dict -}}
{{- if hasKey $volume "persistentVolumeClaim" -}}
{{- $claim := $volume.persistentVolumeClaim -}}
{{- $name := and (kindIs "map" $claim) $claim.claimName -}}
{{- if or (not (kindIs "string" $name)) (gt (len (toString $name)) (int $contract.dnsSubdomainMax)) (not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$" (toString $name))) -}}
{{- $errors = append $errors (printf "$.%s.volume.persistentVolumeClaim.claimName: must be a PersistentVolumeClaim name (lower-case DNS subdomain, at most %d characters)" $field (int $contract.dnsSubdomainMax)) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $volume "hostPath" -}}
{{- $host := $volume.hostPath -}}
{{- $path := and (kindIs "map" $host) $host.path -}}
{{- if or (not (kindIs "string" $path)) (not (hasPrefix "/" (toString $path))) -}}
{{- $errors = append $errors (printf "$.%s.volume.hostPath.path: must be an absolute path" $field) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $kubernetes -}}
{{- $first := dict -}}
{{- range $i, $entry := $v.env | default list -}}
{{- if has $entry.name $contract.processEnv -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is set for each process by the job; one value for every pod would break the ranks" $i $entry.name) -}}
{{- else if has $entry.name $contract.internalEnv -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is one of the trainer's internal variables, set by the job or the trainer itself; choose another name" $i $entry.name) -}}
{{- else if or (has $entry.name $contract.renderedEnv) (and (eq $entry.name "PYTHONPATH") (or (eq $v.image.source "stock") $v.program.dir)) -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is set by the job itself; a container takes each name once" $i $entry.name) -}}
{{- else if and $v.outputs.secret (has $entry.name $contract.bucketCredentialsEnv) -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is set from outputs.secret; a container takes each name once" $i $entry.name) -}}
{{- else if hasKey $first $entry.name -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is already set by $.env[%d]; a container takes each name once" $i $entry.name (int (get $first $entry.name))) -}}
{{- end -}}
{{- if not (hasKey $first $entry.name) -}}
{{- $_ := set $first $entry.name $i -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $v.program.command -}}
{{- range $i, $arg := $v.program.args | default list -}}
{{- range $option, $variable := $contract.outputFlags -}}
{{- if or (eq (toString $arg) $option) (hasPrefix (printf "%s=" $option) (toString $arg)) -}}
{{- $errors = append $errors (printf "$.program.args[%d]: %s is set from %s (where jaxgen run and run.sh find the results); set %s instead" $i $option $variable $variable) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $kubernetes (not $v.program.command) -}}{{/* a path flag of the built-in trainer on none of the pod's volumes */}}
{{- $mounts := list -}}
{{- range $mount := include "jax-training.volumeMounts" . | fromJsonArray -}}
{{- $mounts = append $mounts (clean $mount.mountPath) -}}
{{- end -}}
{{- $args := $v.program.args | default list -}}
{{- range $i, $arg := $args -}}
{{- range $option := $contract.pathFlags -}}
{{- $value := "" -}}
{{- if and (eq (toString $arg) $option) (lt (add1 $i) (len $args)) -}}
{{- $value = toString (index $args (add1 $i)) -}}
{{- else if hasPrefix (printf "%s=" $option) (toString $arg) -}}
{{- $value = trimPrefix (printf "%s=" $option) (toString $arg) -}}
{{- end -}}
{{- if $value -}}
{{- $path := clean $value -}}
{{- $on := false -}}
{{- if hasPrefix "/" $value -}}
{{- range $mount := $mounts -}}
{{- if or (eq $path $mount) (hasPrefix (printf "%s/" $mount) $path) -}}
{{- $on = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $on -}}
{{- $errors = append $errors (printf "$.program.args[%d]: %s %s is on none of the pod's volumes (%s); give a path under one of them" $i $option $value (join ", " $mounts)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $size := 0 -}}
{{- range $key, $value := $v.annotations | default dict -}}
{{- $size = add $size (len $key) (len (toString $value)) -}}
{{- end -}}
{{- if gt $size (int $contract.annotationsMaxBytes) -}}
{{- $errors = append $errors (printf "$.annotations: %d bytes of keys and values; Kubernetes allows %d" $size (int $contract.annotationsMaxBytes)) -}}
{{- end -}}
{{- if $errors -}}
{{- fail (printf "invalid values:\n%s" (join "\n" $errors)) -}}
{{- end -}}
{{- end -}}

{{/* JSON list of [section, count] for each of resources.limits and resources.requests naming the GPU resource. */}}
{{- define "jax-training.gpuRequest" -}}
{{- $found := list -}}
{{- $gpu := ($.Files.Get "files/contract.json" | fromJson).gpuResource -}}
{{- range $kind := list "limits" "requests" -}}
{{- $section := index ($.Values.resources | default dict) $kind -}}
{{- if kindIs "map" $section -}}
{{- if hasKey $section $gpu -}}
{{- $found = append $found (list $kind (index $section $gpu)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* A Kubernetes quantity (500m, 1.5Gi, 2, 1e3) as a float (the twin of generator/checks.py's _quantity):
the number times its suffix's factor (files/contract.json's quantitySuffixes). */}}
{{- define "jax-training.quantity" -}}
{{- $text := toString .value -}}
{{- $suffix := regexFind "([KMGTPE]i|[numkMGTPE])$" $text -}}
{{- mulf (trimSuffix $suffix $text | float64) (get .suffixes $suffix | default "1" | float64) -}}
{{- end -}}
