{{/*
The rules across fields that values.schema.json cannot say: the same checks, in the same order and
with the same messages, as jaxgen's generator/checks.py semantic_errors(). Helm has already applied
values.schema.json when these run. Every broken rule is reported, then the render fails.
*/}}
{{- define "jax-training.validate" -}}
{{- $v := .Values -}}
{{- $kubernetes := include "jax-training.kubernetes" . -}}
{{- $contract := .Files.Get "files/contract.json" | fromJson -}}{{/* generated from trainer/contract.py and generator/engines/kubernetes/policy.py */}}
{{- $errors := list -}}
{{- $hosts := int $v.hosts_count -}}
{{- $local := int $v.local_device_count -}}
{{- $devices := mul $hosts $local -}}
{{- $batch := int $v.training.batch_size -}}
{{- if mod $batch $devices -}}
{{- $errors = append $errors (printf "$.training.batch_size: %d is not divisible by the global device count %d (hosts_count %d x local_device_count %d)" $batch $devices $hosts $local) -}}
{{- end -}}
{{- $examples := int $v.training.train_examples -}}
{{- if and (gt $examples 0) (lt $examples $batch) -}}
{{- $errors = append $errors (printf "$.training.train_examples: %d is less than one batch (training.batch_size %d)" $examples $batch) -}}
{{- end -}}
{{- if and (ne $v.training.allreduce_dtype "float32") (ne $v.training.strategy "pmap") -}}
{{- $errors = append $errors (printf "$.training.allreduce_dtype: %s needs training.strategy 'pmap'" $v.training.allreduce_dtype) -}}
{{- end -}}
{{- $model := int $v.training.model_parallelism -}}
{{- if gt $model 1 -}}
{{- if ne $v.training.strategy "sharded" -}}
{{- $errors = append $errors "$.training.model_parallelism: a model axis needs training.strategy 'sharded'" -}}
{{- end -}}
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
{{- if gt $local (int $contract.maxGpusPerHost) -}}
{{- $errors = append $errors (printf "$.local_device_count: %d GPUs per host exceeds %d" $local (int $contract.maxGpusPerHost)) -}}
{{- end -}}
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
{{- if eq (clean $v.data.dir) (clean $v.checkpoint.dir) -}}
{{- $errors = append $errors "$.checkpoint.dir: must differ from data.dir" -}}
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
{{- if has $clean $contract.systemDirs -}}
{{- $errors = append $errors (printf "$.%s.dir: '%s' is a system directory; choose a directory of its own" $field $dir) -}}
{{- else if $overlapped -}}
{{- $errors = append $errors (printf "$.%s.dir: '%s' overlaps %s, which the image or the kernel provides; choose a directory of its own" $field $dir (first $overlapped)) -}}
{{- end -}}
{{- end -}}
{{- if and $kubernetes (not $v.data.download) (not $v.data.volume) -}}
{{- $errors = append $errors "$.data.volume: with data.download false the data must come from a volume (set data.volume, or data.download true)" -}}
{{- end -}}
{{- range $field := list "data" "checkpoint" -}}
{{- $volume := (index $v $field).volume | default dict -}}
{{- if gt (len $volume) 1 -}}
{{- $errors = append $errors (printf "$.%s.volume: give exactly one volume source, got %s" $field (keys $volume | sortAlpha | join ", ")) -}}
{{- end -}}
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
{{- if include "jax-training.outputsClaim" . -}}
{{- if not $kubernetes -}}
{{- $errors = append $errors (printf "$.persistence: a PersistentVolumeClaim is for Kubernetes targets; on %s checkpoint.dir is on the shared filesystem (set persistence.enabled false and persistence.existing_claim '')" $v.target) -}}
{{- end -}}
{{- if $v.checkpoint.volume -}}
{{- $errors = append $errors "$.persistence: the claim is mounted at checkpoint.dir, and so is checkpoint.volume; set only one of them" -}}
{{- end -}}
{{- if and (not $v.persistence.existing_claim) (eq $v.persistence.access_mode "ReadWriteOncePod") (gt $hosts 1) -}}
{{- $errors = append $errors (printf "$.persistence.access_mode: ReadWriteOncePod lets one pod mount the claim, but all %d pods mount it (use ReadWriteMany, or ReadWriteOnce with every pod on one node)" $hosts) -}}
{{- end -}}
{{- end -}}
{{- $metricsPort := int $v.metrics.port -}}
{{- if and (gt $metricsPort 0) (lt $metricsPort 1024) -}}
{{- $errors = append $errors (printf "$.metrics.port: %d is a privileged port; use 1024-65535 (the pods run as non-root), or 0 for no endpoint" $metricsPort) -}}
{{- end -}}
{{- if and $kubernetes $metricsPort (eq $metricsPort (int ((include "jax-training.target" . | fromJson).enginePort | default $v.coordinator_port))) -}}
{{- $errors = append $errors (printf "$.metrics.port: %d is the coordinator's port; choose another" $metricsPort) -}}
{{- end -}}
{{- if $v.metrics.pod_monitor -}}
{{- if not $kubernetes -}}
{{- $errors = append $errors (printf "$.metrics.pod_monitor: a PodMonitor is for Kubernetes targets, not %s" $v.target) -}}
{{- else if not $metricsPort -}}
{{- $errors = append $errors "$.metrics.pod_monitor: needs metrics.port (the PodMonitor scrapes it)" -}}
{{- else if and (include "jax-training.target" . | fromJson).runtimeJob (not $v.trainjob.own_runtime) -}}
{{- $errors = append $errors "$.metrics.pod_monitor: a PodMonitor scrapes a declared container port, which a TrainJob's runtime patch cannot declare; set trainjob.own_runtime true (its runtime declares it), or scrape through the pods' prometheus.io annotations" -}}
{{- end -}}
{{- end -}}
{{- if $kubernetes -}}
{{- $first := dict -}}
{{- range $i, $entry := $v.env | default list -}}
{{- if has $entry.name $contract.processEnv -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is set for each process by the job; one value for every pod would break the ranks" $i $entry.name) -}}
{{- else if has $entry.name $contract.internalEnv -}}
{{- $errors = append $errors (printf "$.env[%d].name: %s is one of the trainer's internal variables, set by the job or the trainer itself; choose another name" $i $entry.name) -}}
{{- else if has $entry.name $contract.renderedEnv -}}
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
{{- $repository := $v.image.repository -}}
{{- if contains "@" $repository -}}
{{- $errors = append $errors (printf "$.image.repository: '%s' holds a digest; give it as image.digest" $repository) -}}
{{- else if contains ":" (splitList "/" $repository | last) -}}
{{- $errors = append $errors (printf "$.image.repository: '%s' holds a tag; give it as image.tag (a registry's port, as in localhost:5000/trainer, is part of the repository)" $repository) -}}
{{- else if not (regexMatch $contract.imageRepositoryPattern $repository) -}}
{{- $errors = append $errors (printf "$.image.repository: '%s' is not an image repository: [registry[:port]/]path, path components of letters and digits joined by one '.', one or two '_' or dashes, separated by one '/'" $repository) -}}
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
{{- if gt (int $v.slurm.nodes) $hosts -}}
{{- $errors = append $errors (printf "$.slurm.nodes: %d nodes for %d tasks leaves nodes idle" (int $v.slurm.nodes) $hosts) -}}
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
