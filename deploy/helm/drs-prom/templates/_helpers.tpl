{{- define "drs.name" -}}drs-scheduler{{- end -}}
{{- define "drs.labels" -}}
app.kubernetes.io/part-of: drs-prom
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{/* The image of one role: include "drs.image" (list . "scheduler"|"exporter"|"retrain") */}}
{{- define "drs.image" -}}
{{- $root := index . 0 -}}{{- $img := index $root.Values.image (index . 1) -}}
{{- $img.repository }}:{{ $img.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{/* The serving section of the settings file, from the chart's serving values (the one place that says it). */}}
{{- define "drs.serving" -}}
{{- $v := .Values.serving -}}
{{- if and $v.authenticateMetrics (eq $v.tls "off") -}}
{{- fail "serving.authenticateMetrics sends bearer tokens: it needs serving.tls self-signed or secret (plain HTTP: tls off and authenticateMetrics false)" -}}
{{- end -}}
{{- if and (eq $v.tls "secret") (not $v.tlsSecret) -}}
{{- fail "serving.tls secret needs serving.tlsSecret (a kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- if eq $v.tls "secret" -}}
{{- dict "tls" "files" "cert_file" "/etc/drs/tls/tls.crt" "key_file" "/etc/drs/tls/tls.key" "authenticate_metrics" $v.authenticateMetrics | toYaml -}}
{{- else -}}
{{- dict "tls" $v.tls "authenticate_metrics" $v.authenticateMetrics | toYaml -}}
{{- end -}}
{{- end -}}
{{- define "drs.scheme" -}}{{ ternary "HTTP" "HTTPS" (eq .Values.serving.tls "off") }}{{- end -}}
{{- define "drs.persistence" -}}{{ or .Values.persistence.enabled .Values.retrain.cronjob.enabled }}{{- end -}}
{{/* The settings file: the user's sections plus what the chart owns (namespace, state paths). */}}
{{- define "drs.settings" -}}
{{- $s := deepCopy .Values.settings -}}
{{- $sched := merge (dict "lease_namespace" .Release.Namespace "leader_election" .Values.scheduler.leaderElection "journal_path" "/var/lib/drs/journal.sqlite") ($s.scheduler | default dict) -}}
{{- $_ := set $sched "lease_namespace" .Release.Namespace -}}
{{- $_ := set $sched "journal_path" "/var/lib/drs/journal.sqlite" -}}
{{- $_ := set $sched "leader_election" .Values.scheduler.leaderElection -}}
{{- if .Values.model.path }}{{ $_ := set $sched "model_path" .Values.model.path }}{{ end -}}
{{- $_ := set $s "scheduler" $sched -}}
{{- $retrain := $s.retrain | default dict -}}
{{- $_ := set $retrain "model_store" "/var/lib/drs/models" -}}
{{- $_ := set $s "retrain" $retrain -}}
{{- $_ := set $s "serving" (include "drs.serving" . | fromYaml) -}}
{{- $reb := $s.rebalance | default dict -}}
{{- $_ := set $reb "journal_path" "/var/lib/drs/rebalance-journal.sqlite" -}}
{{- $_ := set $reb "metrics_listen" "0.0.0.0:10260" -}}
{{- $_ := set $s "rebalance" $reb -}}
{{- range $k, $v := $s }}{{ if not $v }}{{ $_ := unset $s $k }}{{ end }}{{ end -}}
{{- toYaml $s -}}
{{- end -}}
{{- define "drs.volumes" -}}
- name: config
  configMap: {name: drs-scheduler-config}
- name: state
{{- if eq (include "drs.persistence" .) "true" }}
  persistentVolumeClaim: {claimName: drs-journal}
{{- else }}
  emptyDir: {}
{{- end }}
- name: tmp
  emptyDir: {medium: Memory, sizeLimit: 64Mi}
{{- with .Values.model.volume }}
- name: model
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.promStoreSecret }}
- name: prom-store
  secret: {secretName: {{ .Values.promStoreSecret }}}
{{- end }}
{{- if eq .Values.serving.tls "secret" }}
- name: tls
  secret: {secretName: {{ .Values.serving.tlsSecret }}}
{{- end }}
{{- end -}}
{{- define "drs.volumeMounts" -}}
- {name: config, mountPath: /etc/drs, readOnly: true}
- {name: state, mountPath: /var/lib/drs}
- {name: tmp, mountPath: /tmp}
{{- if .Values.model.volume }}
- {name: model, mountPath: /opt/drs/custom-model, readOnly: true}
{{- end }}
{{- if .Values.promStoreSecret }}
- {name: prom-store, mountPath: /var/run/secrets/drs-prom, readOnly: true}
{{- end }}
{{- if eq .Values.serving.tls "secret" }}
- {name: tls, mountPath: /etc/drs/tls, readOnly: true}
{{- end }}
{{- end -}}
{{/* The extender's address inside the cluster (modes extender and kube-scheduler). */}}
{{- define "drs.extenderURL" -}}
{{ lower (include "drs.scheme" .) }}://drs-extender.{{ .Release.Namespace }}.svc:{{ .Values.extender.port }}
{{- end -}}
{{/* mode kube-scheduler: the second kube-scheduler's KubeSchedulerConfiguration. One profile named like drs-prom's
own scheduler; drs-prom's extender scores (prioritize), filters only with kubeScheduler.filter, and is reached over
the extender's own serving: plain HTTP with serving.tls off, else HTTPS, verified with the Secret's ca.crt when
serving.tls is secret (a self-signed certificate made at start cannot be verified). */}}
{{- define "drs.kubeSchedulerConfig" -}}
{{- $k := .Values.kubeScheduler -}}
{{- $tls := .Values.serving.tls -}}
{{- $ext := dict "urlPrefix" (include "drs.extenderURL" .) "prioritizeVerb" "prioritize" "weight" $k.extenderWeight "enableHTTPS" (ne $tls "off") "nodeCacheCapable" true "ignorable" $k.ignorable "httpTimeout" $k.httpTimeout -}}
{{- if $k.filter }}{{ $_ := set $ext "filterVerb" "filter" }}{{ end -}}
{{- if eq $tls "self-signed" }}{{ $_ := set $ext "tlsConfig" (dict "insecure" true) }}{{ end -}}
{{- if eq $tls "secret" }}{{ $_ := set $ext "tlsConfig" (dict "caFile" "/etc/drs/tls/ca.crt" "serverName" (printf "drs-extender.%s.svc" .Release.Namespace)) }}{{ end -}}
{{- $le := dict "leaderElect" $k.leaderElection -}}
{{- if $k.leaderElection }}{{ $le = merge $le (dict "resourceLock" "leases" "resourceName" $k.leaseName "resourceNamespace" .Release.Namespace) }}{{ end -}}
{{- $name := .Values.settings.scheduler.scheduler_name | default "drs-scheduler" -}}
{{- dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" "leaderElection" $le "profiles" (list (dict "schedulerName" $name)) "extenders" (list $ext) | toYaml -}}
{{- end -}}
