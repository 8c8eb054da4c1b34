{{/* The base of every object name: the release name, or <release>-devloop. */}}
{{- define "devloop.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "devloop.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: devloop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "devloop.managerSelector" -}}
app.kubernetes.io/name: devloop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/*
The pods of one manager Deployment: the main one's are the manager's
selector (unchanged, a Deployment's selector cannot change on upgrade); a
shard's are told apart by their component and devloop.dev/shard, so no
Deployment's selector matches another's pods.
*/}}
{{- define "devloop.shardSelector" -}}
{{- if .shard -}}
app.kubernetes.io/name: devloop
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: manager-shard
devloop.dev/shard: {{ .shard }}
{{- else -}}
{{- include "devloop.managerSelector" .root -}}
{{- end -}}
{{- end -}}

{{- define "devloop.registrySelector" -}}
app.kubernetes.io/name: devloop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: registry
{{- end -}}

{{- define "devloop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-manager" (include "devloop.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The manager image: repository@digest, or repository:tag (default appVersion). */}}
{{- define "devloop.image" -}}
{{- $repo := required "image.repository is required" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- if not (hasPrefix "sha256:" .Values.image.digest) -}}
{{- fail (printf "image.digest %q must start with sha256:" .Values.image.digest) -}}
{{- end -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The in-cluster registry's configuration file. */}}
{{- define "devloop.registryConfig" -}}
version: 0.1
log:
  fields:
    service: registry
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: {{ .Values.registry.deleteEnabled }}
http:
  {{- if .Values.registry.auth.enabled }}
  # Behind the front (registry-front), on the pod's loopback only.
  addr: 127.0.0.1:5001
  {{- else }}
  addr: :5000
  {{- end }}
  headers:
    X-Content-Type-Options: [nosniff]
{{- if .Values.registry.auth.enabled }}
auth:
  token:
    # Clients never see this realm: the front rewrites it to /token on
    # the address the client called.
    realm: http://registry.invalid/token
    service: devloop-registry
    issuer: devloop
    rootcertbundle: /etc/devloop-registry-token/tls.crt
{{- end }}
health:
  storagedriver:
    enabled: true
    interval: 10s
    threshold: 3
{{- end -}}

{{/*
The Secret holding the CA and the serving certificates of the two services
builder pods and the registry front reach over the pod network: the
registry's token service (/token) and the team build cache. Empty when
neither is on.
*/}}
{{- define "devloop.serviceTLSSecret" -}}
{{- if or (and .Values.registry.enabled .Values.registry.auth.enabled) .Values.buildCache.enabled -}}
{{- default (printf "%s-service-tls" (include "devloop.fullname" .)) .Values.serviceTLS.secretName -}}
{{- end -}}
{{- end -}}

{{/* The work directory's claim of an instance (workDir.persistence). */}}
{{- define "devloop.workClaim" -}}
{{ include "devloop.fullname" .root }}-work{{ if .shard }}-{{ .shard }}{{ end }}
{{- end -}}
