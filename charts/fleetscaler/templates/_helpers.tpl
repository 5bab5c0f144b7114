{{/* Names and labels, as `helm create` makes them. */}}
{{- define "fleetscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fleetscaler.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fleetscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fleetscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetscaler.labels" -}}
helm.sh/chart: {{ include "fleetscaler.chart" . }}
{{ include "fleetscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "fleetscaler.serviceAccountName" -}}
{{- $sa := include "fleetscaler.serviceAccount" . | fromJson }}
{{- if $sa.create }}
{{- default (include "fleetscaler.fullname" .) $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{- define "fleetscaler.leaseName" -}}
{{- default (include "fleetscaler.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* Leader election on one Lease: on unless sharding (which elects a writer per cluster). */}}
{{- define "fleetscaler.electing" -}}
{{- and .Values.leaderElection.enabled (not .Values.sharding.enabled) }}
{{- end }}

{{/* Sharding's Lease names start with this (at most 30 characters). */}}
{{- define "fleetscaler.leasePrefix" -}}
{{- include "fleetscaler.fullname" . | trunc 30 | trimSuffix "-" }}
{{- end }}

{{/*
topologySpreadConstraints, each without a labelSelector given the hub's pod labels: what a
spread of this release's replicas means, and what a user cannot write before knowing the
release's name.
*/}}
{{- define "fleetscaler.topologySpreadConstraints" -}}
{{- $out := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "fleetscaler.selectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- define "fleetscaler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where fleet.toml is mounted; the kubeconfigs go in its kubeconfigs/ directory. */}}
{{- define "fleetscaler.configDir" -}}/etc/fleetscaler{{- end }}

{{/* The kubeconfig Secret's name: the user's, or the one the chart makes ("" for none). */}}
{{- define "fleetscaler.kubeconfigSecret" -}}
{{- if .Values.kubeconfigs.existingSecret }}
{{- .Values.kubeconfigs.existingSecret }}
{{- else if .Values.kubeconfigs.files }}
{{- printf "%s-kubeconfigs" (include "fleetscaler.fullname" .) }}
{{- end }}
{{- end }}

{{/* The keys of the kubeconfig Secret, as a JSON list (the files, in order). */}}
{{- define "fleetscaler.kubeconfigKeys" -}}
{{- if .Values.kubeconfigs.existingSecret }}
{{- toJson .Values.kubeconfigs.keys }}
{{- else }}
{{- toJson (keys .Values.kubeconfigs.files | sortAlpha) }}
{{- end }}
{{- end }}

{{/* The listen address the chart gives the hub. */}}
{{- define "fleetscaler.listen" -}}
{{- if contains ":" .Values.listenAddress }}
{{- printf "[%s]:%d" .Values.listenAddress (int .Values.containerPort) }}
{{- else }}
{{- printf "%s:%d" .Values.listenAddress (int .Values.containerPort) }}
{{- end }}
{{- end }}

{{/*
The fleet values tree with what the chart decides: listen address, leader election, how the
hub serves (certificate, authentication, probe port), and the mounted kubeconfig files
unless fleet.hub.kubeconfigs names some.
*/}}
{{- define "fleetscaler.fleet" -}}
{{- $fleet := deepCopy .Values.fleet }}
{{- $hub := default (dict) $fleet.hub }}
{{- $_ := set $fleet "hub" $hub }}
{{- $_ := set $hub "listen" (include "fleetscaler.listen" .) }}
{{- $le := default (dict) (get $hub "leader_election") }}
{{- $_ := set $hub "leader_election" $le }}
{{- $_ := set $le "enabled" (include "fleetscaler.electing" . | eq "true") }}
{{- $_ := set $le "namespace" .Release.Namespace }}
{{- $_ := set $le "lease_name" (include "fleetscaler.leaseName" .) }}
{{- if .Values.sharding.enabled }}
{{- $sh := default (dict) (get $hub "sharding") }}
{{- $_ := set $hub "sharding" $sh }}
{{- $_ := set $sh "enabled" true }}
{{- $_ := set $sh "namespace" .Release.Namespace }}
{{- $_ := set $sh "lease_prefix" (include "fleetscaler.leasePrefix" .) }}
{{- end }}
{{- $serving := default (dict) (get $hub "serving") }}
{{- $_ := set $hub "serving" (merge (include "fleetscaler.servingToml" . | fromJson) $serving) }}
{{- include "fleetscaler.membership" (dict "fleet" $fleet "Values" .Values) }}
{{- if not (get $hub "kubeconfigs") }}
{{- $files := list }}
{{- range $key := include "fleetscaler.kubeconfigKeys" . | fromJsonArray }}
{{- $files = append $files (printf "%s/kubeconfigs/%s" (include "fleetscaler.configDir" $) $key) }}
{{- end }}
{{- $_ := set $hub "kubeconfigs" $files }}
{{- end }}
# Written by the fleetscaler Helm chart from its `fleet` values.
{{- $plain := include "fleetscaler.toml.table" (dict "table" $fleet "path" "" "only" "plain") | trim }}
{{- if $plain }}
{{ $plain }}
{{- end }}
{{- range $part := list (pick $fleet "hub") (omit $fleet "hub" "defaults" "clusters") (pick $fleet "defaults") (pick $fleet "clusters") }}
{{- $text := include "fleetscaler.toml.table" (dict "table" $part "path" "" "only" "tables") | trim }}
{{- if $text }}

{{ $text }}
{{- end }}
{{- end }}
{{- end }}

{{/*
What the chart decides of fleet.toml's [membership] (from `membership`), set into the fleet
tree: on or off, the namespaces, and each source's on/off; the rest stays as fleet.membership
says.
*/}}
{{- define "fleetscaler.membership" -}}
{{- $v := .Values.membership }}
{{- if $v.enabled }}
{{- $m := default (dict) (get .fleet "membership") }}
{{- $_ := set .fleet "membership" $m }}
{{- $_ := set $m "enabled" true }}
{{- $_ := set $m "namespaces" $v.namespaces }}
{{- $secrets := default (dict) (get $m "secrets") }}
{{- $_ := set $m "secrets" $secrets }}
{{- $_ := set $secrets "enabled" $v.secrets.enabled }}
{{- $_ := set $secrets "argocd" $v.secrets.argocd }}
{{- $profiles := default (dict) (get $m "cluster_profiles") }}
{{- $_ := set $m "cluster_profiles" $profiles }}
{{- $_ := set $profiles "enabled" $v.clusterProfiles.enabled }}
{{- if and $v.clusterProfiles.enabled (not (get $profiles "providers")) }}
{{- fail "membership.clusterProfiles.enabled needs fleet.membership.cluster_profiles.providers: the credential plugin of each access provider" }}
{{- end }}
{{- $managed := default (dict) (get $m "managed_clusters") }}
{{- $_ := set $m "managed_clusters" $managed }}
{{- $_ := set $managed "enabled" $v.managedClusters.enabled }}
{{- end }}
{{- end }}

{{/*
Membership's reach, refused when it would read more than asked for: an empty namespace list
means every namespace to the hub and a ClusterRole to RBAC, which for Secrets is every Secret
of the management cluster. So Secrets and ClusterProfiles (namespaced objects) need the
namespaces named, or allNamespaces said out loud. ManagedClusters are cluster-scoped and each
token Secret sits in its cluster's own namespace: they are read everywhere whatever this says.
*/}}
{{- define "fleetscaler.checkMembership" -}}
{{- $m := .Values.membership }}
{{- if $m.enabled }}
{{- if and $m.allNamespaces $m.namespaces }}
{{- fail "membership.allNamespaces and membership.namespaces exclude each other: name the namespaces the inventory is in, or read every namespace (not both)" }}
{{- end }}
{{- $sources := list }}
{{- if $m.secrets.enabled }}{{ $sources = append $sources "membership.secrets (every Secret of each namespace it reads)" }}{{ end }}
{{- if $m.clusterProfiles.enabled }}{{ $sources = append $sources "membership.clusterProfiles" }}{{ end }}
{{- if and $sources (not $m.namespaces) (not $m.allNamespaces) }}
{{- fail (printf "%s: list the inventory's namespaces in membership.namespaces, or set membership.allNamespaces: true to read them in every namespace (with secrets on, the hub may then read every Secret in the cluster)" (join " and " $sources)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* fleet.toml as mounted: configToml verbatim, or the fleet tree written as TOML. */}}
{{- define "fleetscaler.fleetToml" -}}
{{- if .Values.configToml }}
{{- .Values.configToml }}
{{- else }}
{{- include "fleetscaler.fleet" . }}
{{- end }}
{{- end }}

{{/*
A minimal TOML writer, since Helm's toToml writes every number as a float (values are
parsed as JSON numbers): integral numbers are written as integers, everything else as
TOML has it. A table is written as its plain keys first, then its sub-tables ([a.b]), then
its arrays of tables ([[a.c]], for lists whose items are all maps), so that each key lands in
the table it belongs to. Keys with nulls are left out.
*/}}
{{- define "fleetscaler.toml.table" -}}
{{- $table := .table }}
{{- $path := .path }}
{{- $only := default "" .only }}
{{- if ne $only "tables" }}
{{- range $k := keys $table | sortAlpha }}
{{- $v := index $table $k }}
{{- if not (or (kindIs "invalid" $v) (kindIs "map" $v) (eq (include "fleetscaler.toml.isTableArray" $v) "true")) }}
{{ include "fleetscaler.toml.key" $k }} = {{ include "fleetscaler.toml.value" $v }}
{{- end }}
{{- end }}
{{- end }}
{{- if ne $only "plain" }}
{{- range $k := keys $table | sortAlpha }}
{{- $v := index $table $k }}
{{- $sub := include "fleetscaler.toml.key" $k }}
{{- if $path }}{{ $sub = printf "%s.%s" $path $sub }}{{ end }}
{{- if kindIs "map" $v }}

[{{ $sub }}]
{{- include "fleetscaler.toml.table" (dict "table" $v "path" $sub) }}
{{- else if eq (include "fleetscaler.toml.isTableArray" $v) "true" }}
{{- range $item := $v }}

[[{{ $sub }}]]
{{- include "fleetscaler.toml.table" (dict "table" $item "path" $sub) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fleetscaler.toml.isTableArray" -}}
{{- $all := and (kindIs "slice" .) (gt (len .) 0) }}
{{- if $all }}{{ range $item := . }}{{ if not (kindIs "map" $item) }}{{ $all = false }}{{ end }}{{ end }}{{ end }}
{{- $all }}
{{- end }}

{{- define "fleetscaler.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "fleetscaler.toml.value" -}}
{{- $v := . }}
{{- if kindIs "string" $v }}{{ toJson $v }}
{{- else if kindIs "bool" $v }}{{ $v }}
{{- else if kindIs "float64" $v }}
{{- if and (eq $v (floor $v)) (lt (float64 $v) 1e15) (gt (float64 $v) -1e15) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end }}
{{- else if or (kindIs "int" $v) (kindIs "int64" $v) }}{{ $v }}
{{- else if kindIs "slice" $v }}[{{ range $i, $e := $v }}{{ if $i }}, {{ end }}{{ include "fleetscaler.toml.value" $e }}{{ end }}]
{{- else if kindIs "map" $v }}{ {{- range $i, $k := keys $v | sortAlpha }}{{ if $i }},{{ end }} {{ include "fleetscaler.toml.key" $k }} = {{ include "fleetscaler.toml.value" (index $v $k) }}{{ end }} }
{{- else }}{{ fail (printf "fleet: %v (%s) has no TOML form" $v (kindOf $v)) }}
{{- end }}
{{- end }}

{{/*
"true" when the pods run under OpenShift's SecurityContextConstraints: openshift.enabled
true, or "auto" and the cluster serves security.openshift.io/v1 (helm template sees that
only with --api-versions security.openshift.io/v1).
*/}}
{{- define "fleetscaler.openshift" -}}
{{- $on := .Values.openshift.enabled }}
{{- if eq (toString $on) "auto" }}
{{- $on = .Capabilities.APIVersions.Has "security.openshift.io/v1" }}
{{- end }}
{{- if $on }}true{{ end }}
{{- end }}

{{/*
The pod's and the container's security contexts. restricted-v2 assigns the UID, GID and
fsGroup from the namespace's range and refuses a pod that fixes others (the image's 65532
is outside every range), so under OpenShift those are left to it.
*/}}
{{- define "fleetscaler.podSecurityContext" -}}
{{- $sc := .Values.podSecurityContext }}
{{- if include "fleetscaler.openshift" . }}
{{- $sc = omit $sc "runAsUser" "runAsGroup" "fsGroup" "supplementalGroups" }}
{{- end }}
{{- toYaml $sc }}
{{- end }}

{{- define "fleetscaler.securityContext" -}}
{{- $sc := include "fleetscaler.containerSecurityContext" . | fromJson }}
{{- if include "fleetscaler.openshift" . }}
{{- $sc = omit $sc "runAsUser" "runAsGroup" }}
{{- end }}
{{- toYaml $sc }}
{{- end }}

{{/*
Serving (docs/hub.md, "Serving"; values `serving`). The certificate's source, resolved:
"" without TLS, else selfSigned, certManager, openshift or secret ("auto" is openshift on
OpenShift, else selfSigned).
*/}}
{{- define "fleetscaler.tlsSource" -}}
{{- $tls := .Values.serving.tls }}
{{- if $tls.enabled }}
{{- if eq $tls.source "auto" }}
{{- if include "fleetscaler.openshift" . }}openshift{{ else }}selfSigned{{ end }}
{{- else }}
{{- $tls.source }}
{{- end }}
{{- end }}
{{- end }}

{{/* The kubernetes.io/tls Secret mounted for the hub ("" without TLS). */}}
{{- define "fleetscaler.tlsSecret" -}}
{{- $source := include "fleetscaler.tlsSource" . }}
{{- if eq $source "secret" }}
{{- .Values.serving.tls.existingSecret }}
{{- else if $source }}
{{- printf "%s-tls" (include "fleetscaler.fullname" .) }}
{{- end }}
{{- end }}

{{/* "true" when the main port is secured: the probes then have a port of their own. */}}
{{- define "fleetscaler.secured" -}}
{{- if or .Values.serving.tls.enabled (eq .Values.serving.authentication "kubernetes") }}true{{ end }}
{{- end }}

{{/* The main port's name, which says its scheme. */}}
{{- define "fleetscaler.portName" -}}
{{- if .Values.serving.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* The port the kubelet probes. */}}
{{- define "fleetscaler.probePortName" -}}
{{- if include "fleetscaler.secured" . }}probes{{ else }}{{ include "fleetscaler.portName" . }}{{ end }}
{{- end }}

{{- define "fleetscaler.probeListen" -}}
{{- if contains ":" .Values.listenAddress }}
{{- printf "[%s]:%d" .Values.listenAddress (int .Values.serving.probePort) }}
{{- else }}
{{- printf "%s:%d" .Values.listenAddress (int .Values.serving.probePort) }}
{{- end }}
{{- end }}

{{/* Where the certificate is mounted. */}}
{{- define "fleetscaler.tlsDir" -}}{{ include "fleetscaler.configDir" . }}/tls{{- end }}

{{/* The names the certificate is for: the Service's, and localhost for port-forwards. */}}
{{- define "fleetscaler.dnsNames" -}}
{{- $svc := include "fleetscaler.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- toJson (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) "localhost") }}
{{- end }}

{{/* What the chart decides of fleet.toml's [hub.serving], as a dict. */}}
{{- define "fleetscaler.servingToml" -}}
{{- $s := dict "authentication" .Values.serving.authentication "probe_listen" (include "fleetscaler.probeListen" .) }}
{{- if .Values.serving.tls.enabled }}
{{- $_ := set $s "tls_cert_file" (printf "%s/tls.crt" (include "fleetscaler.tlsDir" .)) }}
{{- $_ := set $s "tls_key_file" (printf "%s/tls.key" (include "fleetscaler.tlsDir" .)) }}
{{- end }}
{{- toJson $s }}
{{- end }}

{{/* Values that cannot work together, refused with what to change. */}}
{{- define "fleetscaler.checkServing" -}}
{{- $s := .Values.serving }}
{{- if and (eq $s.authentication "kubernetes") (not $s.tls.enabled) }}
{{- fail "serving.authentication kubernetes needs serving.tls.enabled: bearer tokens must not cross the network in clear (or set serving.authentication none)" }}
{{- end }}
{{- if and $s.tls.enabled (eq $s.tls.source "secret") (not $s.tls.existingSecret) }}
{{- fail "serving.tls.source secret needs serving.tls.existingSecret: a kubernetes.io/tls Secret in the release namespace" }}
{{- end }}
{{- if and $s.tls.enabled (eq $s.tls.source "certManager") (not (dig "issuerRef" "name" "" $s.tls.certManager)) }}
{{- fail "serving.tls.source certManager needs serving.tls.certManager.issuerRef.name (and kind: Issuer or ClusterIssuer)" }}
{{- end }}
{{- if and (include "fleetscaler.secured" .) (eq (int $s.probePort) (int .Values.containerPort)) }}
{{- fail "serving.probePort must differ from containerPort: the probes need a plain port of their own" }}
{{- end }}
{{- end }}
