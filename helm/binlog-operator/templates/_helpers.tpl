{{- define "binlog-operator.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "binlog-operator.labels" -}}
app.kubernetes.io/name: binlog-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "binlog-operator.selector" -}}
app.kubernetes.io/name: binlog-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "binlog-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
