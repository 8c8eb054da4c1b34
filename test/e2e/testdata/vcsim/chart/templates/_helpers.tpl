{{/* The restricted Pod Security level's pod and container contexts. */}}
{{- define "vcsim.podSecurity" -}}
securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
{{- end }}
{{- define "vcsim.containerSecurity" -}}
securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
{{- end }}

{{/* A Deployment of one binary: name, image and log level given as a dict. */}}
{{- define "vcsim.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels: {app: {{ .name }}}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .name }}}}
  template:
    metadata: {labels: {app: {{ .name }}}}
    spec:
      {{- include "vcsim.podSecurity" . | nindent 6 }}
      terminationGracePeriodSeconds: 2
      containers:
      - name: {{ .name }}
        image: {{ .image }}
        env:
        - {name: LOG_LEVEL, value: {{ .logLevel | quote }}}
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /healthz, port: http}
          periodSeconds: 1
        {{- include "vcsim.containerSecurity" . | nindent 8 }}
{{- end }}
