{{- /* The injector's image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "sidecar-injector.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

