{{/*
Names are fixed rather than derived from the release: the webhook
configurations and the ClusterRole are cluster-wide, so one release per
cluster is supported, and fixed names match config/ and the manager's
defaults.
*/}}

{{/* Labels every object carries. */}}
{{- define "sidecarset.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sidecarset.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the manager's pods; immutable in the Deployment. */}}
{{- define "sidecarset.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{/* The Secret that the manager's cert rotation fills (--cert-secret). */}}
{{- define "sidecarset.certSecret" -}}sidecarset-webhook-cert{{- end }}

{{/* The Service the apiserver calls the webhooks through (--webhook-service). */}}
{{- define "sidecarset.webhookService" -}}sidecarset-webhook{{- end }}

{{/*
The pod webhook's excluded namespaces: the configured ones plus the release
namespace, which is always excluded because the manager's own pods must
never wait on the manager to start.
*/}}
{{- define "sidecarset.excludedNamespaces" -}}
{{- append (.Values.webhook.excludeNamespaces | default list) .Release.Namespace | uniq | toJson }}
{{- end }}
