{{/* deploy/base/kustomization.yaml's common label, on every object deploy/base installs. */}}
{{- define "csibench.labels" -}}
app.kubernetes.io/part-of: csibench
{{- end }}

{{/* The operator's ServiceAccount as the API server names it (RBAC subjects, the admission policies). */}}
{{- define "csibench.serviceAccountUser" -}}
system:serviceaccount:{{ .Values.namespace.name }}:csibench-operator
{{- end }}
