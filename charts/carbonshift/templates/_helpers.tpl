{{/* Name of every object: the kustomize base's "carbonshift" unless overridden. */}}
{{- define "carbonshift.fullname" -}}
{{- default "carbonshift" .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "carbonshift.labels" -}}
app.kubernetes.io/name: carbonshift
app.kubernetes.io/part-of: carbonshift
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The pods' selector: the same as the kustomize base's. */}}
{{- define "carbonshift.selectorLabels" -}}
app.kubernetes.io/name: carbonshift
app.kubernetes.io/component: webhook
{{- end -}}

{{/* Does this release render the host-cluster objects (the pod and what it needs)? */}}
{{- define "carbonshift.hostObjects" -}}
{{- if or (eq .Values.target "cluster") (has .Values.install (list "host" "all")) }}true{{ end -}}
{{- end -}}

{{/* Does it render the API-server objects (webhook registration, RBAC)? */}}
{{- define "carbonshift.apiObjects" -}}
{{- if or (eq .Values.target "cluster") (has .Values.install (list "karmada-apiserver" "all")) }}true{{ end -}}
{{- end -}}

{{- define "carbonshift.serviceAccountName" -}}
{{- default (include "carbonshift.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "carbonshift.karmadaServiceAccountName" -}}
{{- default (include "carbonshift.fullname" .) .Values.karmada.serviceAccount.name -}}
{{- end -}}

{{- define "carbonshift.tlsSecretName" -}}
{{- if and (eq .Values.certificates.mode "self-managed") .Values.certificates.selfManaged.existingSecret -}}
{{- .Values.certificates.selfManaged.existingSecret -}}
{{- else -}}
{{- include "carbonshift.fullname" . }}-tls
{{- end -}}
{{- end -}}

{{- define "carbonshift.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "carbonshift.leaseNamespace" -}}
{{- default .Release.Namespace .Values.karmada.leaseNamespace -}}
{{- end -}}

{{/* The webhook's clientConfig: by URL (karmada target) or by Service (cluster target). */}}
{{- define "carbonshift.clientConfig" -}}
{{- if eq .Values.target "karmada" }}
url: {{ default (printf "https://%s.%s.svc:%d/mutate" (include "carbonshift.fullname" .) .Release.Namespace (int .Values.service.port)) .Values.webhook.url | quote }}
{{- else }}
service:
  name: {{ include "carbonshift.fullname" . }}
  namespace: {{ .Release.Namespace }}
  path: /mutate
  port: {{ .Values.service.port }}
{{- end }}
{{- with .Values.certificates.caBundle }}
caBundle: {{ b64enc . }}
{{- end }}
{{- end -}}
