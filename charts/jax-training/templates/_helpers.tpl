{{/*
Names, labels and the computed pieces of every manifest, in one place. They mirror jaxgen's
generator/names.py and generator/render.py so that `helm template` and `jaxgen render` agree.
Values arrive as Helm parses them (every number is a float64): integers are printed through `int64`.
Helpers that return structures print them as JSON; callers read them back with fromJson.
*/}}

{{/*
JSON of any value: the one way a value reaches a manifest (JSON is YAML). Characters YAML cannot carry
raw even inside quotes are written as \u escapes, as in generator/yaml_text.py: C1 controls, NEL (Go's
YAML reads it as a line break), the BOM and the non-characters U+FFFE and U+FFFF. toJson already
escapes the rest (U+2028, U+2029, C0 controls).
*/}}
{{- define "jax-training.json" -}}
{{- $json := toJson . -}}
{{- range $code := concat (untilStep 127 160 1) (list 65279 65534 65535) -}}
{{- $json = replace (printf "%c" $code) (printf "\\u%04x" $code) $json -}}
{{- end -}}
{{- $json -}}
{{- end -}}

{{/* Name of every object (validated by values.schema.json: a DNS-1035 label). */}}
{{- define "jax-training.name" -}}
{{- .Values.name -}}
{{- end -}}

{{/*
The trainer image: an empty image.tag is appVersion with the accelerator's variant (files/image-variants.json,
from generator/images.py), the tags scripts/image.sh builds.
*/}}
{{- define "jax-training.imageTag" -}}
{{- $variants := .Files.Get "files/image-variants.json" | fromJson -}}
{{- .Values.image.tag | default (printf "%s-%s" .Chart.AppVersion (get $variants .Values.accelerator)) -}}
{{- end -}}
{{- define "jax-training.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "jax-training.imageTag" .) -}}
{{- end -}}

{{/* helm.sh/chart label value. */}}
{{- define "jax-training.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels; call with (dict "root" $ "component" "worker"). */}}
{{- define "jax-training.selectorLabels" -}}
{{- include "jax-training.json" (dict
  "app.kubernetes.io/name" .root.Chart.Name
  "app.kubernetes.io/instance" (include "jax-training.name" .root)
  "app.kubernetes.io/component" .component) -}}
{{- end -}}

{{/*
Labels; call with (dict "root" $ "component" C ["queue" true] ["chart" true]).
The user's labels come first so they can never override the ones selectors rely on.
queue adds the Kueue queue label (top-level workload objects), chart adds helm.sh/chart.
*/}}
{{- define "jax-training.labels" -}}
{{- $v := .root.Values -}}
{{- $labels := deepCopy ($v.labels | default dict) -}}
{{- $labels = mergeOverwrite $labels (include "jax-training.selectorLabels" . | fromJson) -}}
{{- $_ := set $labels "app.kubernetes.io/version" (include "jax-training.imageTag" .root | trunc 63 | trimAll "-_.") -}}{{/* a label value: <= 63, alphanumeric ends */}}
{{- $_ = set $labels "app.kubernetes.io/managed-by" .root.Release.Service -}}
{{- if and .queue $v.queue_name -}}
{{- $_ = set $labels "kueue.x-k8s.io/queue-name" $v.queue_name -}}
{{- end -}}
{{- if .chart -}}
{{- $_ = set $labels "helm.sh/chart" (include "jax-training.chart" .root) -}}
{{- end -}}
{{- include "jax-training.json" $labels -}}
{{- end -}}

{{/* The objects' namespace: namespace when set, else the release's (helm --namespace), as Helm charts do. */}}
{{- define "jax-training.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* Object metadata (name, namespace, labels, annotations); call with (dict "root" $ "labels" DICT
["annotations" DICT]): those annotations win over the annotations variable. */}}
{{- define "jax-training.metadata" -}}
metadata:
  name: {{ include "jax-training.name" .root | include "jax-training.json" }}
  namespace: {{ include "jax-training.namespace" .root | include "jax-training.json" }}
  labels: {{ include "jax-training.json" .labels }}
  {{- $annotations := merge (dict) (.annotations | default dict) .root.Values.annotations }}
  {{- if $annotations }}
  annotations: {{ include "jax-training.json" $annotations }}
  {{- end }}
{{- end -}}

{{/* The facts of the Kubernetes targets (JSON): files/targets.json, written from generator/targets.py
by make sync-schema. hostname and coordinator are printf formats of (name, index) and (name). */}}
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

{{/* The container port's name: the training-operator takes a JAXJob's coordinator port from the
port named jaxjob-port (and would otherwise inject 6666). */}}
{{- define "jax-training.coordinatorPortName" -}}
{{- (include "jax-training.target" . | fromJson).portName -}}
{{- end -}}

{{/* The coordinator's port: the engine's where it picks one, else coordinator_port. */}}
{{- define "jax-training.coordinatorPort" -}}
{{- (include "jax-training.target" . | fromJson).enginePort | default .Values.coordinator_port | int64 -}}
{{- end -}}

{{/* DNS name of process 0 as the other pods resolve it (pod hostname . Service subdomain). */}}
{{- define "jax-training.coordinatorHost" -}}
{{- printf (include "jax-training.target" . | fromJson).coordinator (include "jax-training.name" .) -}}
{{- end -}}

{{/* The longest pod hostname (a DNS-1123 label, at most 63 characters) the target creates. */}}
{{- define "jax-training.longestHostname" -}}
{{- printf (include "jax-training.target" . | fromJson).hostname (include "jax-training.name" .) (sub (int64 .Values.hosts_count) 1) -}}
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

{{/* Arguments of `python -m trainer`, as a JSON list of strings: files/trainer-flags.json (written from
trainer/config.py by make sync-schema) names the flag, the variable and the spelling of each. */}}
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
JAX_* variables of the targets whose row says processEnv (JSON list); the process id is the Job's
completion index. The JAXJob operator and a TrainJob's runtime inject their own variables instead.
*/}}
{{/* The container's env (JSON list): PYTHONUNBUFFERED where the engine does not set it, our JAX_*
variables where it does not set those, JAX_LOCAL_DEVICE_COUNT (every target), then the user's env. */}}
{{- define "jax-training.containerEnv" -}}
{{- $env := list -}}
{{- if (include "jax-training.target" . | fromJson).unbuffered -}}
{{- $env = append $env (dict "name" "PYTHONUNBUFFERED" "value" "1") -}}
{{- end -}}
{{- $env = concat $env (include "jax-training.processEnv" . | fromJsonArray) -}}
{{- $env = append $env (dict "name" "JAX_LOCAL_DEVICE_COUNT" "value" (int64 .Values.local_device_count | toString)) -}}
{{- include "jax-training.json" (concat $env (.Values.env | default list)) -}}
{{- end -}}

{{- define "jax-training.processEnv" -}}
{{- if not (include "jax-training.target" . | fromJson).processEnv -}}
[]
{{- else -}}
{{- include "jax-training.json" (list
  (dict "name" "JAX_COORDINATOR_ADDRESS"
        "value" (printf "%s:%d" (include "jax-training.coordinatorHost" .) (int64 .Values.coordinator_port)))
  (dict "name" "JAX_NUM_PROCESSES" "value" (int64 .Values.hosts_count | toString))
  (dict "name" "JAX_PROCESS_ID"
        "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.annotations['batch.kubernetes.io/job-completion-index']")))) -}}
{{- end -}}
{{- end -}}

{{/* Container resources (JSON): the user's, plus nvidia.com/gpu limits on GPU pods. */}}
{{- define "jax-training.containerResources" -}}
{{- $resources := deepCopy (.Values.resources | default dict) -}}
{{- if eq .Values.accelerator "gpu" -}}
{{- $limits := get $resources "limits" | default dict -}}
{{- $_ := set $limits "nvidia.com/gpu" (int64 .Values.local_device_count) -}}
{{- $_ = set $resources "limits" $limits -}}
{{- end -}}
{{- include "jax-training.json" $resources -}}
{{- end -}}

{{/* Tolerations (JSON list): the user's, plus the nvidia.com/gpu toleration on GPU pods. */}}
{{- define "jax-training.tolerations" -}}
{{- $tolerations := deepCopy (.Values.tolerations | default list) -}}
{{- if eq .Values.accelerator "gpu" -}}
{{- $tolerations = append $tolerations (dict "key" "nvidia.com/gpu" "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- include "jax-training.json" $tolerations -}}
{{- end -}}

{{/* A pod volume (JSON) from a volume source; an empty source is an emptyDir. Call with (list NAME SOURCE). */}}
{{/* The PersistentVolumeClaim mounted at checkpoint.dir by persistence ("" when off): an existing
one, else the rendered <name>-outputs (generator/names.py outputs_claim). */}}
{{- define "jax-training.outputsClaim" -}}
{{- $p := .Values.persistence -}}
{{- if $p.existing_claim -}}
{{- $p.existing_claim -}}
{{- else if $p.enabled -}}
{{- printf "%s-outputs" (include "jax-training.name" .) -}}
{{- end -}}
{{- end -}}

{{- define "jax-training.volume" -}}
{{- $name := index . 0 -}}
{{- $source := index . 1 | default dict -}}
{{- if not $source -}}
{{- $source = dict "emptyDir" dict -}}
{{- end -}}
{{- include "jax-training.json" (mergeOverwrite (dict "name" $name) (deepCopy $source)) -}}
{{- end -}}

{{/*
podFailurePolicy (JSON) of the Indexed Job and the JobSet's child Job, from the trainer's exit
codes (files/exit-codes.json, generated from trainer/exit_codes.py): permanent codes fail the Job
at once; disruptions and the "ignore" codes (stop signal, lost peer) do not count; retryable count.
*/}}
{{- define "jax-training.podFailurePolicy" -}}
{{- $codes := dict "fail" list "ignore" list "retry" list -}}
{{- range (.Files.Get "files/exit-codes.json" | fromJson).exit_codes -}}
{{- $_ := set $codes .action (append (get $codes .action) (int64 .code)) -}}
{{- end -}}
{{- $on := dict -}}
{{- $container := include "jax-training.targets" . | fromJson | dig .Values.target "runtimeContainer" "jax" -}}
{{- range $action := list "fail" "ignore" "retry" -}}
{{- $_ := set $on $action (dict "containerName" $container "operator" "In" "values" (get $codes $action)) -}}
{{- end -}}
{{- include "jax-training.json" (dict "rules" (list
  (dict "action" "FailJob" "onExitCodes" $on.fail)
  (dict "action" "Ignore" "onPodConditions" (list (dict "type" "DisruptionTarget" "status" "True")))
  (dict "action" "Ignore" "onExitCodes" $on.ignore)
  (dict "action" "Count" "onExitCodes" $on.retry))) -}}
{{- end -}}

{{/* Annotations of the JobSet (JSON): the user's, plus exclusive placement when asked for. */}}
{{- define "jax-training.jobsetAnnotations" -}}
{{- $annotations := deepCopy (.Values.annotations | default dict) -}}
{{- if .Values.jobset.exclusive_topology -}}
{{- $_ := set $annotations "alpha.jobset.sigs.k8s.io/exclusive-topology" .Values.jobset.exclusive_topology -}}
{{- end -}}
{{- include "jax-training.json" $annotations -}}
{{- end -}}

{{/* The pod's and the container's security context (JSON): PodSecurity restricted, uid 1000. */}}
{{- define "jax-training.podSecurityContext" -}}
{{- include "jax-training.json" (dict "runAsNonRoot" true "runAsUser" 1000 "runAsGroup" 1000 "fsGroup" 1000
  "seccompProfile" (dict "type" "RuntimeDefault")) -}}
{{- end -}}
{{- define "jax-training.containerSecurityContext" -}}
{{- include "jax-training.json" (dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true
  "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL"))) -}}
{{- end -}}

{{/* imagePullSecrets (JSON list). */}}
{{- define "jax-training.pullSecrets" -}}
{{- $secrets := list -}}
{{- range $secret := .Values.image.pull_secrets -}}
{{- $secrets = append $secrets (dict "name" $secret) -}}
{{- end -}}
{{- include "jax-training.json" $secrets -}}
{{- end -}}

{{/* The container's volume mounts and the pod's volumes (JSON lists): data, checkpoints, /tmp, GPU /dev/shm. */}}
{{- define "jax-training.volumeMounts" -}}
{{- $v := .Values -}}
{{- $data := dict "name" "data" "mountPath" $v.data.dir -}}
{{- if not $v.data.download -}}
{{- $_ := set $data "readOnly" true -}}
{{- end -}}
{{- $mounts := list $data (dict "name" "checkpoints" "mountPath" $v.checkpoint.dir) (dict "name" "tmp" "mountPath" "/tmp") -}}
{{- if eq $v.accelerator "gpu" -}}
{{- $mounts = append $mounts (dict "name" "dshm" "mountPath" "/dev/shm") -}}
{{- end -}}
{{- include "jax-training.json" $mounts -}}
{{- end -}}
{{- define "jax-training.volumes" -}}
{{- $v := .Values -}}
{{- $claim := include "jax-training.outputsClaim" . -}}
{{- $outputs := ternary (dict "persistentVolumeClaim" (dict "claimName" $claim)) $v.checkpoint.volume (ne $claim "") -}}
{{- $volumes := list (include "jax-training.volume" (list "data" $v.data.volume) | fromJson)
  (include "jax-training.volume" (list "checkpoints" $outputs) | fromJson)
  (dict "name" "tmp" "emptyDir" dict) -}}
{{- if eq $v.accelerator "gpu" -}}
{{- $volumes = append $volumes (dict "name" "dshm" "emptyDir" (dict "medium" "Memory" "sizeLimit" $v.shm_size)) -}}
{{- end -}}
{{- include "jax-training.json" $volumes -}}
{{- end -}}

{{/* The container's command and args (JSON lists): the user's program, or the built-in trainer. */}}
{{- define "jax-training.command" -}}
{{- include "jax-training.json" (.Values.program.command | default (list "python" "-m" "trainer")) -}}
{{- end -}}
{{- define "jax-training.args" -}}
{{- if .Values.program.command -}}
{{- include "jax-training.json" (.Values.program.args | default list) -}}
{{- else -}}
{{- include "jax-training.trainerArgs" . -}}
{{- end -}}
{{- end -}}

{{/*
The pod template shared by every target; call with (dict "root" $ ["subdomain" NAME]).
Every scalar goes through jax-training.json.
*/}}
{{- define "jax-training.podTemplate" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $resources := include "jax-training.containerResources" $root | fromJson -}}
{{- $tolerations := include "jax-training.tolerations" $root | fromJsonArray -}}
metadata:
  labels: {{ include "jax-training.labels" (dict "root" $root "component" "worker") }}
  {{- if $v.annotations }}
  annotations: {{ include "jax-training.json" $v.annotations }}
  {{- end }}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: {{ int64 $v.termination_grace_period_seconds }}
  {{- if .subdomain }}
  subdomain: {{ include "jax-training.json" .subdomain }}
  {{- end }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  {{- if $v.service_account_name }}
  serviceAccountName: {{ include "jax-training.json" $v.service_account_name }}
  {{- end }}
  {{- if $v.priority_class_name }}
  priorityClassName: {{ include "jax-training.json" $v.priority_class_name }}
  {{- end }}
  securityContext: {{ include "jax-training.podSecurityContext" $root }}
  {{- if $v.image.pull_secrets }}
  imagePullSecrets: {{ include "jax-training.pullSecrets" $root }}
  {{- end }}
  {{- if $v.node_selector }}
  nodeSelector: {{ include "jax-training.json" $v.node_selector }}
  {{- end }}
  {{- if $v.affinity }}
  affinity: {{ include "jax-training.json" $v.affinity }}
  {{- end }}
  {{- if $tolerations }}
  tolerations: {{ include "jax-training.json" $tolerations }}
  {{- end }}
  containers:
    - name: jax
      image: {{ include "jax-training.image" $root | include "jax-training.json" }}
      imagePullPolicy: {{ include "jax-training.json" $v.image.pull_policy }}
      command: {{ include "jax-training.command" $root }}
      args: {{ include "jax-training.args" $root }}
      env:
        {{- range $item := include "jax-training.containerEnv" $root | fromJsonArray }}
        - {{ include "jax-training.json" $item }}
        {{- end }}
      ports:
        - name: {{ include "jax-training.coordinatorPortName" $root | include "jax-training.json" }}
          containerPort: {{ int64 $v.coordinator_port }}
          protocol: TCP
      {{- if $resources }}
      resources: {{ include "jax-training.json" $resources }}
      {{- end }}
      securityContext: {{ include "jax-training.containerSecurityContext" $root }}
      volumeMounts: {{ include "jax-training.volumeMounts" $root }}
  volumes: {{ include "jax-training.volumes" $root }}
{{- end -}}
