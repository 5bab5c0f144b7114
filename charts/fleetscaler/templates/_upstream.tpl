{{/*
The values of upstream cluster-autoscaler's chart (kubernetes/autoscaler,
charts/cluster-autoscaler) that mean something here, read beside the chart's own names so
that a values file written for it carries over (docs/install.md, "Coming from upstream's
chart"). One rule for every pair: the fleetscaler name wins wherever it has a value (the
chart's defaults count); the upstream name fills what it leaves empty; maps are merged key
by key, at every depth, by the same rule. values.yaml leaves empty the few fleetscaler values
whose default would otherwise always win (metrics.serviceMonitor.enabled and .interval,
serviceAccount.create): their defaults are applied here, last. The security lock-down of
securityContext is deliberately not among them: an upstream value adds to it, and only the
fleetscaler name loosens it.
*/}}

{{/*
The map .own over the map .up, key by key at every depth, as JSON. Not sprig's merge: that
(mergo) lets the second map replace what the first says when it is false, 0 or "", and
`privileged: false` is a value the fleetscaler name must keep.
*/}}
{{- define "fleetscaler.merge" -}}
{{- $out := deepCopy (default (dict) .up) }}
{{- range $key, $own := default (dict) .own }}
{{- if kindIs "invalid" $own }}
{{- else if and (kindIs "map" $own) (kindIs "map" (get $out $key)) }}
{{- $_ := set $out $key (include "fleetscaler.merge" (dict "own" $own "up" (get $out $key)) | fromJson) }}
{{- else }}
{{- $_ := set $out $key $own }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* metrics.serviceMonitor, with upstream's serviceMonitor filling it in, as JSON. */}}
{{- define "fleetscaler.serviceMonitor" -}}
{{- $own := .Values.metrics.serviceMonitor }}
{{- $up := default (dict) .Values.serviceMonitor }}
{{- $sm := deepCopy $own }}
{{- /* Null is unset; false is a value. */}}
{{- $enabled := $own.enabled }}
{{- if kindIs "invalid" $enabled }}{{ $enabled = $up.enabled }}{{ end }}
{{- $_ := set $sm "enabled" (and (not (kindIs "invalid" $enabled)) $enabled) }}
{{- $_ := set $sm "interval" (coalesce $own.interval $up.interval "30s") }}
{{- $_ := set $sm "labels" (include "fleetscaler.merge" (dict "own" $own.labels "up" $up.selector) | fromJson) }}
{{- $_ := set $sm "annotations" (include "fleetscaler.merge" (dict "own" $own.annotations "up" $up.annotations) | fromJson) }}
{{- range $key := list "relabelings" "metricRelabelings" }}
{{- /* Upstream's default is {}: empty, whatever its type. */}}
{{- $_ := set $sm $key (default (list) (coalesce (get $own $key) (get $up $key))) }}
{{- end }}
{{- toJson $sm }}
{{- end }}

{{/* prometheusRule.labels, with upstream's prometheusRule.additionalLabels. */}}
{{- define "fleetscaler.prometheusRuleLabels" -}}
{{- $r := .Values.prometheusRule }}
{{- include "fleetscaler.merge" (dict "own" $r.labels "up" $r.additionalLabels) | fromJson | toYaml }}
{{- end }}

{{/* extraEnv as the container's env list: the chart's list as it is, or upstream's map of
     name -> value (each value a string, as upstream writes it), in name order. */}}
{{- define "fleetscaler.extraEnv" -}}
{{- $env := .Values.extraEnv }}
{{- if kindIs "map" $env }}
{{- $list := list }}
{{- range $name, $value := $env }}
{{- $list = append $list (dict "name" $name "value" (toString $value)) }}
{{- end }}
{{- $env = $list }}
{{- end }}
{{- if $env }}{{ toYaml $env }}{{ end }}
{{- end }}

{{/* serviceAccount, with upstream's rbac.serviceAccount filling it in, as JSON. */}}
{{- define "fleetscaler.serviceAccount" -}}
{{- $own := .Values.serviceAccount }}
{{- $up := default (dict) (dig "serviceAccount" (dict) .Values.rbac) }}
{{- $create := $own.create }}
{{- if kindIs "invalid" $create }}{{ $create = $up.create }}{{ end }}
{{- if kindIs "invalid" $create }}{{ $create = true }}{{ end }}
{{- $annotations := include "fleetscaler.merge" (dict "own" $own.annotations "up" $up.annotations) | fromJson }}
{{- toJson (dict "create" $create "name" (coalesce $own.name $up.name "") "annotations" $annotations) }}
{{- end }}

{{/* The container's security context: securityContext, with upstream's
     containerSecurityContext adding what it does not say. */}}
{{- define "fleetscaler.containerSecurityContext" -}}
{{- include "fleetscaler.merge" (dict "own" .Values.securityContext "up" .Values.containerSecurityContext) }}
{{- end }}

{{/* Upstream values that cannot mean here what they meant there, refused with what to do. */}}
{{- define "fleetscaler.checkUpstream" -}}
{{- $smNamespace := dig "namespace" "" (default (dict) .Values.serviceMonitor) }}
{{- if and $smNamespace (ne $smNamespace .Release.Namespace) }}
{{- fail (printf "serviceMonitor.namespace %q (upstream cluster-autoscaler's chart) must be the release namespace %q, or unset: the ServiceMonitor names Secrets (the CA, the token) that the Prometheus Operator reads in the ServiceMonitor's own namespace; let the Prometheus's serviceMonitorNamespaceSelector take %q instead" $smNamespace .Release.Namespace .Release.Namespace) }}
{{- end }}
{{- /* Upstream's defaults (an empty selector, the token mounted) pass: a values file copied
       whole from upstream's chart says nothing by them that the chart does not do. */}}
{{- if .Values.podDisruptionBudget.selector }}
{{- fail "podDisruptionBudget.selector (upstream cluster-autoscaler's chart) has no equivalent: the budget always selects the hub's pods by the chart's own labels; remove it" }}
{{- end }}
{{- if eq (toString (dig "serviceAccount" "automountServiceAccountToken" true .Values.rbac)) "false" }}
{{- fail "rbac.serviceAccount.automountServiceAccountToken false (upstream cluster-autoscaler's chart) has no equivalent: the chart mounts the token exactly when the hub needs it (leader election, sharding, serving.authentication kubernetes, membership, rbac.additionalRules) and only then; remove it" }}
{{- end }}
{{- range $key := list "fsGroup" "fsGroupChangePolicy" "supplementalGroups" "supplementalGroupsPolicy" "sysctls" "seLinuxChangePolicy" }}
{{- if hasKey (default (dict) $.Values.securityContext) $key }}
{{- fail (printf "securityContext.%s: securityContext is the container's here (upstream cluster-autoscaler's securityContext is the pod's); move %s to podSecurityContext" $key $key) }}
{{- end }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "invalid" $pdb.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (with neither, minAvailable is 1)" }}
{{- end }}
{{- end }}
