{{/* Generated from the rule tables (generator/rules.py, generator/checks.py, generator/engines/kubernetes/rules.py) by `make generate`; do not edit. */}}
{{- define "jax-training.rules" -}}
{{- $v := .Values -}}
{{- $contract := .Files.Get "files/contract.json" | fromJson -}}
{{- $errors := list -}}
{{- if (mod (int $v.training.batch_size) (mul (int $v.hosts_count) (int $v.local_device_count))) }}
{{- $errors = append $errors (printf "$.training.batch_size: %d is not divisible by the global device count %d (hosts_count %d x local_device_count %d)" (int $v.training.batch_size) (mul (int $v.hosts_count) (int $v.local_device_count)) (int $v.hosts_count) (int $v.local_device_count)) -}}
{{- end -}}
{{- if (and (gt (int $v.training.train_examples) 0) (lt (int $v.training.train_examples) (int $v.training.batch_size))) }}
{{- $errors = append $errors (printf "$.training.train_examples: %d is less than one batch (training.batch_size %d)" (int $v.training.train_examples) (int $v.training.batch_size)) -}}
{{- end -}}
{{- if (and (ne $v.training.allreduce_dtype "float32") (ne $v.training.strategy "pmap")) }}
{{- $errors = append $errors (printf "$.training.allreduce_dtype: %s needs training.strategy 'pmap'" $v.training.allreduce_dtype) -}}
{{- end -}}
{{- if (and (gt (int $v.training.model_parallelism) 1) (ne $v.training.strategy "sharded")) }}
{{- $errors = append $errors (printf "$.training.model_parallelism: a model axis needs training.strategy 'sharded'") -}}
{{- end -}}
{{- if (and (eq $v.accelerator "gpu") (gt (int $v.local_device_count) (int $contract.maxGpusPerHost))) }}
{{- $errors = append $errors (printf "$.local_device_count: %d GPUs per host exceeds %d" (int $v.local_device_count) (int $contract.maxGpusPerHost)) -}}
{{- end -}}
{{- if (eq (clean $v.data.dir) (clean $v.checkpoint.dir)) }}
{{- $errors = append $errors (printf "$.checkpoint.dir: must differ from data.dir") -}}
{{- end -}}
{{- if (has (clean $v.data.dir) $contract.systemDirs) }}
{{- $errors = append $errors (printf "$.data.dir: '%s' is a system directory; choose a directory of its own" $v.data.dir) -}}
{{- end -}}
{{- if (has (clean $v.checkpoint.dir) $contract.systemDirs) }}
{{- $errors = append $errors (printf "$.checkpoint.dir: '%s' is a system directory; choose a directory of its own" $v.checkpoint.dir) -}}
{{- end -}}
{{- if (contains "@" $v.image.repository) }}
{{- $errors = append $errors (printf "$.image.repository: '%s' holds a digest; give it as image.digest" $v.image.repository) -}}
{{- end -}}
{{- if (and (not (contains "@" $v.image.repository)) (contains ":" (splitList "/" $v.image.repository | last))) }}
{{- $errors = append $errors (printf "$.image.repository: '%s' holds a tag; give it as image.tag (a registry's port, as in localhost:5000/trainer, is part of the repository)" $v.image.repository) -}}
{{- end -}}
{{- if (and (not (contains "@" $v.image.repository)) (not (contains ":" (splitList "/" $v.image.repository | last))) (not (regexMatch $contract.imageRepositoryPattern $v.image.repository))) }}
{{- $errors = append $errors (printf "$.image.repository: '%s' is not an image repository: [registry[:port]/]path, path components of letters and digits joined by one '.', one or two '_' or dashes, separated by one '/'" $v.image.repository) -}}
{{- end -}}
{{- if (and (gt (int $v.metrics.port) 0) (lt (int $v.metrics.port) 1024)) }}
{{- $errors = append $errors (printf "$.metrics.port: %d is a privileged port; use 1024-65535 (the pods run as non-root), or 0 for no endpoint" (int $v.metrics.port)) -}}
{{- end -}}
{{- if include "jax-training.kubernetes" . }}
{{- if (and (not $v.data.download) (not $v.data.volume)) }}
{{- $errors = append $errors (printf "$.data.volume: with data.download false the data must come from a volume (set data.volume, or data.download true)") -}}
{{- end -}}
{{- if (gt (len ($v.data.volume | default dict)) 1) }}
{{- $errors = append $errors (printf "$.data.volume: give exactly one volume source, got %s" (keys ($v.data.volume | default dict) | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if (gt (len ($v.checkpoint.volume | default dict)) 1) }}
{{- $errors = append $errors (printf "$.checkpoint.volume: give exactly one volume source, got %s" (keys ($v.checkpoint.volume | default dict) | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if (and (or $v.persistence.existing_claim $v.persistence.enabled) $v.checkpoint.volume) }}
{{- $errors = append $errors (printf "$.persistence: the claim is mounted at checkpoint.dir, and so is checkpoint.volume; set only one of them") -}}
{{- end -}}
{{- if (and (not $v.persistence.existing_claim) $v.persistence.enabled (eq $v.persistence.access_mode "ReadWriteOncePod") (gt (int $v.hosts_count) 1)) }}
{{- $errors = append $errors (printf "$.persistence.access_mode: ReadWriteOncePod lets one pod mount the claim, but all %d pods mount it (use ReadWriteMany, or ReadWriteOnce with every pod on one node)" (int $v.hosts_count)) -}}
{{- end -}}
{{- if (and $v.metrics.port (eq (int $v.metrics.port) (int (default (int $v.coordinator_port) (include "jax-training.target" . | fromJson).enginePort)))) }}
{{- $errors = append $errors (printf "$.metrics.port: %d is the coordinator's port; choose another" (int $v.metrics.port)) -}}
{{- end -}}
{{- if (and $v.metrics.pod_monitor (not $v.metrics.port)) }}
{{- $errors = append $errors (printf "$.metrics.pod_monitor: needs metrics.port (the PodMonitor scrapes it)") -}}
{{- end -}}
{{- if (and $v.metrics.pod_monitor $v.metrics.port (include "jax-training.target" . | fromJson).runtimeJob (not $v.trainjob.own_runtime)) }}
{{- $errors = append $errors (printf "$.metrics.pod_monitor: a PodMonitor scrapes a declared container port, which a TrainJob's runtime patch cannot declare; set trainjob.own_runtime true (its runtime declares it), or scrape through the pods' prometheus.io annotations") -}}
{{- end -}}
{{- if (and (eq $v.image.source "stock") (include "jax-training.target" . | fromJson).runtimeJob) }}
{{- $errors = append $errors (printf "$.image.source: stock needs a target whose object holds the pod (indexed-job, jobset, jaxjob): a TrainJob's runtime makes its pods, with no container to install the trainer first") -}}
{{- end -}}
{{- if (and (eq $v.image.source "stock") (not (eq $v.image.repository $contract.defaultImageRepository)) (not $v.image.tag) (not $v.image.digest)) }}
{{- $errors = append $errors (printf "$.image.tag: a stock image of your own (image.repository %s) needs image.tag or image.digest: an empty tag is this project's build's" $v.image.repository) -}}
{{- end -}}
{{- if (and (eq $v.image.source "stock") (eq $v.image.repository $contract.defaultImageRepository) (or $v.image.tag $v.image.digest)) }}
{{- $errors = append $errors (printf "$.image.repository: image.tag and image.digest name an image of image.repository, still this project's own build: with stock set image.repository too, or neither for the default stock image") -}}
{{- end -}}
{{- if (and $v.program.dir (include "jax-training.target" . | fromJson).runtimeJob) }}
{{- $errors = append $errors (printf "$.program.dir: a program folder needs a target whose object holds the pod (indexed-job, jobset, jaxjob): a TrainJob's runtime makes its pods, with no container to unpack it first") -}}
{{- end -}}
{{- end -}}
{{- toJson $errors -}}
{{- end -}}
