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

{{- define "sandgate.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "sandgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "sandgate.imageTag" .) }}
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
  (list "coldStartGrace" "cold-start-grace")
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
{{- end }}
- {{ printf "--%s=%v" (index . 1) $v | quote }}
{{- end }}
{{- end }}
{{- range $c.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
