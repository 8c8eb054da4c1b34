package devcluster

import (
	"bytes"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SourceControllerAddress is where source-controller serves artifacts, the
// host of every artifact URL it publishes (--storage-adv-addr):
// kustomize-controller and devloop's Flux sources download from it.
const SourceControllerAddress = "source-controller." + FluxNamespace + ".svc.cluster.local."

// fluxTemplate is the install of Flux's config/manager and config/rbac,
// trimmed to what one node needs: one replica each, no leader election, no
// metrics scraping. Each controller is bound to its module's ClusterRole
// (fluxClusterRole). kustomize-controller additionally may impersonate
// ServiceAccounts, and only that: a Kustomization then applies as its
// spec.serviceAccountName, Flux's multi-tenant setup, instead of the
// cluster-admin binding of Flux's default install.
var fluxTemplate = template.Must(template.New("flux").Parse(`
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .Namespace }}
  labels:
    pod-security.kubernetes.io/enforce: restricted
{{- range .Controllers }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Name }}
  namespace: {{ $.Namespace }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: flux-{{ .Name }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: flux-{{ .Name }}
subjects:
- kind: ServiceAccount
  name: {{ .Name }}
  namespace: {{ $.Namespace }}
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: flux-kustomize-controller-impersonate
rules:
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [impersonate]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: flux-kustomize-controller-impersonate
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: flux-kustomize-controller-impersonate
subjects:
- kind: ServiceAccount
  name: kustomize-controller
  namespace: {{ .Namespace }}
---
apiVersion: v1
kind: Service
metadata:
  name: source-controller
  namespace: {{ .Namespace }}
spec:
  type: ClusterIP
  selector:
    app: source-controller
  ports:
  - name: http
    port: 80
    protocol: TCP
    targetPort: http
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: source-controller
  namespace: {{ .Namespace }}
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app: source-controller
  template:
    metadata:
      labels:
        app: source-controller
    spec:
      serviceAccountName: source-controller
      terminationGracePeriodSeconds: 10
      securityContext:
        runAsNonRoot: true
        runAsUser: 65534
        runAsGroup: 65534
        fsGroup: 1337
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: manager
        image: {{ .Source.Image }}
        args:
        - --watch-all-namespaces
        - --log-level=info
        - --log-encoding=json
        - --storage-path=/data
        - --storage-adv-addr={{ .StorageAddress }}
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: TUF_ROOT
          value: /tmp/.sigstore
        ports:
        - containerPort: 9090
          name: http
          protocol: TCP
        - containerPort: 9440
          name: healthz
          protocol: TCP
        readinessProbe:
          httpGet:
            port: http
            path: /
          periodSeconds: 2
        livenessProbe:
          httpGet:
            port: healthz
            path: /healthz
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
        volumeMounts:
        - name: data
          mountPath: /data
        - name: tmp
          mountPath: /tmp
      volumes:
      - name: data
        emptyDir: {}
      - name: tmp
        emptyDir: {}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kustomize-controller
  namespace: {{ .Namespace }}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: kustomize-controller
  template:
    metadata:
      labels:
        app: kustomize-controller
    spec:
      serviceAccountName: kustomize-controller
      terminationGracePeriodSeconds: 30
      securityContext:
        runAsNonRoot: true
        runAsUser: 65534
        runAsGroup: 65534
        fsGroup: 1337
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: manager
        image: {{ .Kustomize.Image }}
        args:
        - --watch-all-namespaces
        - --log-level=info
        - --log-encoding=json
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        ports:
        - containerPort: 9440
          name: healthz
          protocol: TCP
        readinessProbe:
          httpGet:
            path: /readyz
            port: healthz
          periodSeconds: 2
        livenessProbe:
          httpGet:
            path: /healthz
            port: healthz
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
        volumeMounts:
        - name: temp
          mountPath: /tmp
      volumes:
      - name: temp
        emptyDir: {}
`))

// fluxObjects renders fluxTemplate for f.
func fluxObjects(f *Flux) ([]*unstructured.Unstructured, error) {
	var buf bytes.Buffer
	err := fluxTemplate.Execute(&buf, map[string]any{
		"Namespace":      FluxNamespace,
		"Controllers":    []FluxController{f.SourceController, f.KustomizeController},
		"Source":         f.SourceController,
		"Kustomize":      f.KustomizeController,
		"StorageAddress": SourceControllerAddress,
	})
	if err != nil {
		return nil, err
	}
	return decodeYAMLObjects(&buf, "the Flux install")
}
