{{/*
The prefix of every object's name, as config/default's namePrefix: "sandgate" unless
fullnameOverride says otherwise. Not the release name: cluster-scoped objects (CRDs,
ClusterRoles, webhook configurations) allow one install per cluster anyway, and the binding
guard admits the service account by this name.
*/}}
{{- define "sandgate.fullname" -}}
{{- default "sandgate" .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/* prefixed returns "<fullname>-<name>"; call with (list $ "name"). */}}
{{- define "sandgate.prefixed" -}}
{{- printf "%s-%s" (include "sandgate.fullname" (index . 0)) (index . 1) }}
{{- end }}

{{/* The namespace of the namespaced objects, as the public chart chooses it. */}}
{{- define "sandgate.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name }}
{{- end }}

{{- define "sandgate.serviceAccountName" -}}
{{- include "sandgate.prefixed" (list . "controller-manager") }}
{{- end }}

{{- define "sandgate.webhookServiceName" -}}
{{- default (include "sandgate.prefixed" (list . "webhook-service")) .Values.webhookServiceName }}
{{- end }}

{{- define "sandgate.metricsServiceName" -}}
{{- default (include "sandgate.prefixed" (list . "controller-manager-metrics")) .Values.service.name }}
{{- end }}

{{- define "sandgate.servingCertName" -}}
{{- include "sandgate.prefixed" (list . "serving-cert") }}
{{- end }}

{{/*
The annotation that has cert-manager's CA injector put the serving certificate's CA into the
webhook configurations and the CRDs' conversion webhook.
*/}}
{{- define "sandgate.injectCAFrom" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" (include "sandgate.namespace" .) (include "sandgate.servingCertName" .) }}
{{- end }}

{{/*
Labels of the operator's pods, and the selector of its Deployment, Services, budget and
network policies: config/manager's, fixed, so that an upgrade never changes a selector.
*/}}
{{- define "sandgate.selectorLabels" -}}
app.kubernetes.io/name: sandgate
control-plane: controller-manager
{{- end }}

{{/* Labels Helm's tooling expects on every object; test/helm ignores them in comparisons. */}}
{{- define "sandgate.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "sandgate.imageTag" . | trunc 63 | quote }}
{{- end }}

{{/* Labels of the objects config/ labels with the selector labels. */}}
{{- define "sandgate.labels" -}}
{{ include "sandgate.selectorLabels" . }}
{{ include "sandgate.helmLabels" . }}
{{- end }}

{{/*
publicImage is "true" when image.repository names the public agent-sandbox controller's image
(registry.k8s.io/agent-sandbox/agent-sandbox-controller or a mirror of it), as a values file
written for the public chart does: that binary takes none of sandgate's flags and serves none
of its webhooks, so the chart runs sandgate's own image instead and NOTES.txt says so.
*/}}
{{- define "sandgate.publicImage" -}}
{{- $repo := .Values.image.repository }}
{{- if or (eq $repo "agent-sandbox-controller") (hasSuffix "/agent-sandbox-controller" $repo) }}true{{ end }}
{{- end }}

{{/* values.yaml's image.repository; test/helm checks that the two agree. */}}
{{- define "sandgate.defaultRepository" -}}
ghcr.io/sandgate-dev/sandgate
{{- end }}

{{- define "sandgate.imageTag" -}}
{{- if include "sandgate.publicImage" . }}
{{- .Chart.AppVersion }}
{{- else }}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}
{{- end }}

{{- define "sandgate.image" -}}
{{- $repo := .Values.image.repository }}
{{- if include "sandgate.publicImage" . }}
{{- $repo = include "sandgate.defaultRepository" . }}
{{- end }}
{{- printf "%s:%s" $repo (include "sandgate.imageTag" .) }}
{{- end }}

{{/*
The restricted Pod Security Standard's security contexts, as values.yaml's defaults have them
(test/helm checks that they agree). A null podSecurityContext or containerSecurityContext, the
public chart's default, removes the value altogether (Helm deletes a key set to null); the
manager's pods would then be refused by the namespace the chart creates, so these apply
instead and NOTES.txt says so. An object merges over values.yaml's defaults, as Helm merges.
*/}}
{{- define "sandgate.podSecurityContext" -}}
{{- if hasKey .Values "podSecurityContext" }}
{{- toYaml .Values.podSecurityContext }}
{{- else }}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end }}
{{- end }}

{{- define "sandgate.containerSecurityContext" -}}
{{- if hasKey .Values "containerSecurityContext" }}
{{- toYaml .Values.containerSecurityContext }}
{{- else }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
  - ALL
{{- end }}
{{- end }}

{{/*
fromFile renders one object of a file under files/ (links into config/): its name gets the
prefix, a namespaced object the namespace, and its labels the Helm labels. Call with
(list $ "files/..." namespaced).
*/}}
{{- define "sandgate.fromFile" -}}
{{- $ := index . 0 }}
{{- $obj := $.Files.Get (index . 1) | fromYaml }}
{{- if or (not $obj) (hasKey $obj "Error") }}
{{- fail (printf "reading %s: %v" (index . 1) $obj) }}
{{- end }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "name" (include "sandgate.prefixed" (list $ $meta.name)) }}
{{- if index . 2 }}
{{- $_ := set $meta "namespace" (include "sandgate.namespace" $) }}
{{- end }}
{{- $_ := set $meta "labels" (merge (default (dict) $meta.labels) (include "sandgate.helmLabels" $ | fromYaml)) }}
{{- toYaml $obj }}
{{- end }}

{{/*
The webhook configurations of files/webhook-manifests.yaml (config/webhook/manifests.yaml,
generated from the +kubebuilder:webhook markers), by kind.
*/}}
{{- define "sandgate.webhookConfigurations" -}}
{{- $out := dict }}
{{- range $doc := regexSplit "(?m)^---\\s*$" (.Files.Get "files/webhook-manifests.yaml") -1 }}
{{- if trim $doc }}
{{- $obj := fromYaml $doc }}
{{- $_ := set $out $obj.kind $obj }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* The names of every admission webhook, for the alerts. */}}
{{- define "sandgate.webhookNames" -}}
{{- $names := list }}
{{- range $kind, $obj := include "sandgate.webhookConfigurations" . | fromYaml }}
{{- range $obj.webhooks }}
{{- $names = append $names .name }}
{{- end }}
{{- end }}
{{- $names | sortAlpha | join "|" }}
{{- end }}

{{/*
A boolean flag as config/manager writes it: "--name" when true, "--name=false" when false.
Call with (list "name" value).
*/}}
{{- define "sandgate.boolFlag" -}}
{{- if index . 1 }}
- --{{ index . 0 }}
{{- else }}
- --{{ index . 0 }}=false
{{- end }}
{{- end }}

{{/*
The manager's command line: config/default's flags in its order, then the optional ones set
in values (the public chart's names where the flag means the same), then extraArgs.
*/}}
{{- define "sandgate.args" -}}
{{- $c := .Values.controller }}
{{- include "sandgate.boolFlag" (list "leader-elect" $c.leaderElect) }}
{{- include "sandgate.boolFlag" (list "extensions" $c.extensions) }}
- --metrics-bind-address=:8443
{{- include "sandgate.boolFlag" (list "metrics-secure" $c.metricsSecure) }}
- --health-probe-bind-address=:8081
- --webhook-port=9443
- --webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs
- --operator-service-account=system:serviceaccount:$(POD_NAMESPACE):$(SERVICE_ACCOUNT)
{{- $optional := list
  (list "leaderElectionNamespace" "leader-election-namespace")
  (list "clusterDomain" "cluster-domain")
  (list "kubeApiQps" "kube-api-qps")
  (list "kubeApiBurst" "kube-api-burst")
  (list "sandboxConcurrentWorkers" "sandbox-concurrent-workers")
  (list "sandboxClaimConcurrentWorkers" "sandbox-claim-concurrent-workers")
  (list "sandboxWarmPoolConcurrentWorkers" "sandbox-warm-pool-concurrent-workers")
  (list "sandboxTemplateConcurrentWorkers" "sandbox-template-concurrent-workers")
  (list "apiConnections" "api-connections")
  (list "separateWatchConnection" "separate-watch-connection")
  (list "cacheLabelSelectors" "cache-label-selectors")
  (list "enableTracing" "enable-tracing")
  (list "enablePprof" "enable-pprof")
  (list "enablePprofDebug" "enable-pprof-debug")
  (list "pprofBlockProfileRate" "pprof-block-profile-rate")
  (list "pprofMutexProfileFraction" "pprof-mutex-profile-fraction")
  (list "disableSandboxEvents" "disable-sandbox-events")
  (list "disableClaimEvents" "disable-claim-events")
  (list "disableClaimObservabilityAnnotations" "disable-claim-observability-annotations")
  (list "sandboxWriteBehindWindow" "sandbox-write-behind-window")
  (list "enableWarmPoolEviction" "enable-warm-pool-eviction")
  (list "sandboxWarmPoolMaxBatchSize" "sandbox-warm-pool-max-batch-size")
  (list "sandboxWarmPoolMaxRefillRate" "sandbox-warm-pool-max-refill-rate")
  (list "sandboxWarmPoolReplenishDelay" "sandbox-warm-pool-replenish-delay")
  (list "sandboxWarmPoolReadinessGracePeriod" "sandbox-warm-pool-readiness-grace-period")
  (list "sandboxWarmPoolUnschedulableRecheckInterval" "sandbox-warm-pool-unschedulable-recheck-interval")
  (list "coldStartGrace" "cold-start-grace")
  (list "claimReservationTTL" "claim-reservation-ttl")
  (list "claimAdmissionMaxWait" "claim-admission-max-wait")
  (list "poolRefillQuietPeriod" "pool-refill-quiet-period")
  (list "poolRefillLowWaterPercent" "pool-refill-low-water-percent")
  (list "gracefulShutdownTimeout" "graceful-shutdown-timeout")
  (list "platformGroups" "platform-groups")
  (list "claimAllowedAnnotationDomains" "claim-allowed-annotation-domains")
  (list "claimRefusedAnnotationPrefixes" "claim-refused-annotation-prefixes")
  (list "restamp" "restamp")
  (list "pprofBindAddress" "pprof-bind-address") }}
{{- range $optional }}
{{- $key := index . 0 }}
{{- if and (hasKey $c $key) (not (kindIs "invalid" (index $c $key))) }}
{{- $v := index $c $key }}
{{- if kindIs "slice" $v }}
{{- $v = join "," $v }}
{{- else if and (kindIs "float64" $v) (eq $v (floor $v)) }}
{{- /* Values files give every number as a float64, which prints 1000000 as 1e+06: the
flag parsing of an integer flag refuses that. */}}
{{- $v = int64 $v }}
{{- end }}
- {{ printf "--%s=%v" (index . 1) $v | quote }}
{{- end }}
{{- end }}
{{- range $c.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
publicValueWarnings lists the values of the public agent-sandbox chart this chart accepts
without honouring them, one "- <value>: <why>" line each, for NOTES.txt (docs/helm.md has the
whole mapping). Values sandgate honours render nothing here.
*/}}
{{- define "sandgate.publicValueWarnings" -}}
{{- $c := .Values.controller }}
{{- if include "sandgate.publicImage" . }}
- image.repository: {{ .Values.image.repository }} is the public controller's image, which takes none of sandgate's flags; the manager runs {{ include "sandgate.image" . }} instead{{ with .Values.image.tag }} (image.tag {{ . }} is ignored with it){{ end }}
{{- end }}
{{- with .Values.nameOverride }}
- nameOverride: {{ . }} names nothing here: the pods' labels and selectors are fixed, so that an upgrade never changes a selector; fullnameOverride sets the objects' names
{{- end }}
{{- if not (hasKey .Values "podSecurityContext") }}
- podSecurityContext: null does not remove it: the manager's pods keep the restricted one, which the chart's namespace enforces
{{- end }}
{{- if not (hasKey .Values "containerSecurityContext") }}
- containerSecurityContext: null does not remove it: the manager's container keeps the restricted one, which the chart's namespace enforces
{{- end }}
{{- if and (hasKey $c "sandboxWriteBehindWindow") (not (regexMatch "^(0+(\\.0*)?(ns|us|µs|ms|s|m|h)?)+$" (toString $c.sandboxWriteBehindWindow))) }}
- controller.sandboxWriteBehindWindow: no effect: sandgate's Sandbox controller already defers its bookkeeping writes until claims pause (controller.poolRefillQuietPeriod)
{{- end }}
{{- if and (hasKey $c "disableClaimObservabilityAnnotations") $c.disableClaimObservabilityAnnotations }}
- controller.disableClaimObservabilityAnnotations: no effect: claims still carry the observability annotations, which admission stamps in the create request at no write of the operator's (the write the flag saves)
{{- end }}
{{- end }}
