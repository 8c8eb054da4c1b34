{{/*
The manager's Deployment. With .shard empty it is the main instance: it
reconciles every DevEnvironment, or, when shards are installed, those no
shard takes (no sharding.devloop.dev/key label). With .shard set it is that
shard's instance, reconciling the DevEnvironments labelled
sharding.devloop.dev/key=<shard>; each shard elects its leader on a Lease
of its own (derived by the manager from its selector).
*/}}
{{- define "devloop.managerDeployment" -}}
{{- $root := .root -}}
{{- $shard := .shard -}}
{{- $image := include "devloop.image" $root -}}
{{- $tlsSecret := include "devloop.serviceTLSSecret" $root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "devloop.fullname" $root }}-manager{{ if $shard }}-{{ $shard }}{{ end }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "devloop.labels" $root | nindent 4 }}
    app.kubernetes.io/component: manager
    {{- with $shard }}
    devloop.dev/shard: {{ . }}
    {{- end }}
spec:
  replicas: {{ $root.Values.replicaCount }}
  {{- if $root.Values.workDir.persistence.enabled }}
  # A ReadWriteOnce claim: a new pod on another node could not attach it
  # while the old one runs.
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "devloop.shardSelector" (dict "root" $root "shard" $shard) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "devloop.shardSelector" (dict "root" $root "shard" $shard) | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        kubectl.kubernetes.io/default-container: manager
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "devloop.serviceAccountName" $root }}
      terminationGracePeriodSeconds: 30
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
      - name: manager
        image: {{ $image }}
        imagePullPolicy: {{ $root.Values.image.pullPolicy }}
        args:
        {{- if $root.Values.leaderElection.enabled }}
        - --leader-elect
        {{- end }}
        {{- if $root.Values.metrics.enabled }}
        - --metrics-bind-address=:{{ $root.Values.metrics.port }}
        {{- if not $root.Values.metrics.secure }}
        - --metrics-secure=false
        {{- end }}
        {{- else }}
        - --metrics-bind-address=0
        {{- end }}
        - --health-probe-bind-address=:8081
        - --work-dir=/var/cache/devloop
        {{- if $root.Values.workDir.persistence.enabled }}
        # The claim may next be mounted on another node: fetched sources
        # are flushed, and trusted there.
        - --source-store-flush
        {{- end }}
        {{- if and (not $shard) $root.Values.registry.enabled $root.Values.registry.auth.enabled }}
        # The bundled registry's token service (TokenReview and
        # SubjectAccessReview; the signing key is the chart's Secret).
        - --registry-token-bind-address=:{{ $root.Values.registry.auth.port }}
        - --registry-token-key=/etc/devloop-registry-token/tls.key
        - --registry-token-cert=/etc/devloop-registry-token/tls.crt
        - --registry-token-ttl={{ $root.Values.registry.auth.ttl }}
        - --registry-token-tls-cert=/etc/devloop-tls/token.crt
        - --registry-token-tls-key=/etc/devloop-tls/token.key
        {{- end }}
        {{- if $root.Values.buildCache.enabled }}
        # The team Go build cache (docs/team-cache.md): builder pods of
        # every instance ask the main instance, which keeps the store.
        - --build-cache-url=https://{{ include "devloop.fullname" $root }}-build-cache.{{ $root.Release.Namespace }}.svc:{{ $root.Values.buildCache.port }}
        - --build-cache-ca-file=/etc/devloop-tls/ca.crt
        {{- if not $shard }}
        - --build-cache-bind-address=:{{ $root.Values.buildCache.port }}
        - --build-cache-service={{ $root.Release.Namespace }}/{{ include "devloop.fullname" $root }}-build-cache
        - --build-cache-tls-cert=/etc/devloop-tls/cache.crt
        - --build-cache-tls-key=/etc/devloop-tls/cache.key
        - --build-cache-max-bytes={{ int64 $root.Values.buildCache.maxBytes }}
        {{- with $root.Values.buildCache.namespaceMaxBytes }}
        - --build-cache-namespace-max-bytes={{ int64 . }}
        {{- end }}
        {{- end }}
        {{- end }}
        {{- if $shard }}
        - --watch-label-selector=sharding.devloop.dev/key={{ $shard }}
        {{- else if $root.Values.shards }}
        # Sharded environments are their shard's, not this instance's.
        - --watch-label-selector=!sharding.devloop.dev/key
        {{- end }}
        {{- with $root.Values.manager.concurrent }}
        - --concurrent={{ . }}
        {{- end }}
        {{- with $root.Values.manager.concurrentPerNamespace }}
        - --concurrent-per-namespace={{ . }}
        {{- end }}
        {{- with $root.Values.manager.defaultServiceAccount }}
        - --default-service-account={{ . }}
        {{- end }}
        {{- if $root.Values.manager.allowOperatorIdentity }}
        - --allow-operator-identity
        {{- end }}
        {{- if eq $root.Values.manager.noCrossNamespaceRefs false }}
        # Refused by default (the flag's default); allowed only when the
        # values say false.
        - --no-cross-namespace-refs=false
        {{- end }}
        {{- with $root.Values.manager.driftInterval }}
        - --drift-interval={{ . }}
        {{- end }}
        {{- with $root.Values.manager.reconcileTimeout }}
        - --reconcile-timeout={{ . }}
        {{- end }}
        {{- with $root.Values.manager.maxHelmTimeout }}
        - --max-helm-timeout={{ . }}
        {{- end }}
        {{- with $root.Values.manager.maxSourceSize }}
        - --max-source-size={{ int64 . }}
        {{- end }}
        {{- with $root.Values.manager.sourceStoreMaxBytes }}
        - --source-store-max-bytes={{ int64 . }}
        {{- end }}
        {{- with $root.Values.manager.sourceStoreEnvMaxBytes }}
        - --source-store-env-max-bytes={{ int64 . }}
        {{- end }}
        {{- with $root.Values.manager.layerCompression }}
        - --layer-compression={{ . }}
        {{- end }}
        {{- with $root.Values.manager.logLevel }}
        - --log-level={{ . }}
        {{- end }}
        {{- with $root.Values.manager.logFormat }}
        - --log-format={{ . }}
        {{- end }}
        {{- if eq $root.Values.egress.denyCluster false }}
        - --egress-deny-cluster=false
        {{- end }}
        {{- range $root.Values.egress.denyCIDRs }}
        - --egress-deny-cidr={{ . }}
        {{- end }}
        {{- range $root.Values.egress.allowCIDRs }}
        - --egress-allow-cidr={{ . }}
        {{- end }}
        {{- range $root.Values.egress.denyHosts }}
        - --egress-deny-host={{ . }}
        {{- end }}
        {{- range $root.Values.egress.allowHosts }}
        - --egress-allow-host={{ . }}
        {{- end }}
        {{- if $root.Values.registry.enabled }}
        # The chart's own registry is allowed whatever range its Service is in.
        - --egress-allow-host={{ include "devloop.fullname" $root }}-registry.{{ $root.Release.Namespace }}.svc:{{ $root.Values.registry.service.port }}
        - --egress-allow-host={{ include "devloop.fullname" $root }}-registry.{{ $root.Release.Namespace }}.svc.cluster.local:{{ $root.Values.registry.service.port }}
        {{- end }}
        {{- range $root.Values.manager.extraArgs }}
        - {{ . | quote }}
        {{- end }}
        env:
        # The egress policy refuses the operator's own pod address.
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        # Builder pods run the operator's own image to fetch sources and
        # push images: by default exactly the image of this container.
        - name: DEVLOOP_HELPER_IMAGE
          value: {{ default $image $root.Values.helperImage | quote }}
        # The Go runtime collects harder as the heap nears a soft limit
        # below the container's memory limit (the manager leaves a sixth of
        # it for what the runtime does not count) instead of growing past it
        # into the OOM killer.
        {{- if (($root.Values.resources).limits).memory }}
        - name: DEVLOOP_MEMORY_LIMIT
          valueFrom:
            resourceFieldRef:
              containerName: manager
              resource: limits.memory
              divisor: "1"
        {{- end }}
        {{- with $root.Values.manager.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        ports:
        {{- if $root.Values.metrics.enabled }}
        - name: metrics
          containerPort: {{ $root.Values.metrics.port }}
        {{- end }}
        - name: probes
          containerPort: 8081
        {{- if and (not $shard) $root.Values.registry.enabled $root.Values.registry.auth.enabled }}
        - name: registry-token
          containerPort: {{ $root.Values.registry.auth.port }}
        {{- end }}
        {{- if and (not $shard) $root.Values.buildCache.enabled }}
        - name: build-cache
          containerPort: {{ $root.Values.buildCache.port }}
        {{- end }}
        # /healthz answers from the process itself (healthz.Ping): a slow
        # answer means a starved CPU, not a wedged manager. The kubelet's
        # default 1 s timeout killed the manager in the middle of builds on
        # a loaded node (load 20 on two cores): allow 10 s, and 5 misses in
        # a row (about 2.5 minutes) before a restart.
        livenessProbe:
          httpGet:
            path: /healthz
            port: probes
          initialDelaySeconds: 10
          periodSeconds: 30
          timeoutSeconds: 10
          failureThreshold: 5
        readinessProbe:
          httpGet:
            path: /readyz
            port: probes
          periodSeconds: 10
          timeoutSeconds: 5
        resources:
          {{- toYaml $root.Values.resources | nindent 10 }}
        securityContext:
          {{- toYaml $root.Values.securityContext | nindent 10 }}
        volumeMounts:
        # Fetched sources, cached base image layers and charts, the team
        # build cache; on an emptyDir lost on restart (one download per
        # source, every build cold), kept on workDir.persistence's claim.
        - name: work
          mountPath: /var/cache/devloop
        # The root file system is read-only; libraries that want a
        # scratch directory get this one.
        - name: tmp
          mountPath: /tmp
        {{- if and (not $shard) $root.Values.registry.enabled $root.Values.registry.auth.enabled }}
        - name: registry-token
          mountPath: /etc/devloop-registry-token
          readOnly: true
        {{- end }}
        {{- if $tlsSecret }}
        # The services' CA and, on the main instance, their serving keys.
        - name: service-tls
          mountPath: /etc/devloop-tls
          readOnly: true
        {{- end }}
      volumes:
      {{- if and (not $shard) $root.Values.registry.enabled $root.Values.registry.auth.enabled }}
      - name: registry-token
        secret:
          secretName: {{ include "devloop.fullname" $root }}-registry-token
      {{- end }}
      {{- if $tlsSecret }}
      - name: service-tls
        secret:
          secretName: {{ $tlsSecret }}
          {{- if $shard }}
          # A shard serves neither service: the CA only.
          items:
          - key: ca.crt
            path: ca.crt
          {{- end }}
      {{- end }}
      - name: work
        {{- if $root.Values.workDir.persistence.enabled }}
        persistentVolumeClaim:
          claimName: {{ include "devloop.workClaim" (dict "root" $root "shard" $shard) }}
        {{- else }}
        emptyDir:
          sizeLimit: {{ $root.Values.workDir.sizeLimit }}
        {{- end }}
      - name: tmp
        emptyDir:
          sizeLimit: 256Mi
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- else }}
      {{- if and $root.Values.workDir.persistence.enabled (gt (int $root.Values.replicaCount) 1) }}
      # Every replica on the node the work claim is attached to. One
      # replica needs none: with it, the pod that replaces one evicted
      # by a drain would be held to the drained node while the old pod
      # terminates, and wait for the scheduler's next full retry.
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "devloop.shardSelector" (dict "root" $root "shard" $shard) | nindent 16 }}
      {{- end }}
      {{- end }}
{{- end -}}
