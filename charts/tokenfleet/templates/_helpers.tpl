{{/* Names and labels shared by every template. */}}
{{- define "tokenfleet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tokenfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "tokenfleet.labels" -}}
{{ include "tokenfleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: tokenfleet
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tokenfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tokenfleet.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces holding LLMServices: the watched ones, or none (cluster-wide). */}}
{{- define "tokenfleet.clusterwide" -}}
{{- if not .Values.watchNamespaces }}true{{ end -}}
{{- end -}}

{{/* The endpoint pickers' ClusterRole (`tokenfleet operator --picker-cluster-role`). */}}
{{- define "tokenfleet.pickerClusterRole" -}}
{{- printf "%s-endpoint-picker" (include "tokenfleet.fullname" .) -}}
{{- end -}}

{{/* Where LLMServices may use spec.routing, as a JSON list: routingNamespaces, or the
watched namespaces. */}}
{{- define "tokenfleet.routingNamespaces" -}}
{{- .Values.routingNamespaces | default .Values.watchNamespaces | default list | toJson -}}
{{- end -}}

{{/* GPU types the catalog overlay adds (not in the LLMService CRD's enum), as a JSON list. */}}
{{- define "tokenfleet.newGpuTypes" -}}
{{- $crd := .Files.Get "crds/tokenfleet.dev_llmservices.yaml" | fromYaml -}}
{{- $version := index $crd.spec.versions 0 -}}
{{- $known := $version.schema.openAPIV3Schema.properties.spec.properties.gpu.properties.type.enum -}}
{{- $new := list -}}
{{- range $id, $_ := (.Values.gpuCatalog.gpus | default dict) -}}
{{- if not (has $id $known) -}}{{- $new = append $new $id -}}{{- end -}}
{{- end -}}
{{- toJson $new -}}
{{- end -}}
