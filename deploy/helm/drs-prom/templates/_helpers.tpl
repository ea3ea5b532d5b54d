{{- define "drs.name" -}}drs-scheduler{{- end -}}
{{- define "drs.labels" -}}
app.kubernetes.io/part-of: drs-prom
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "drs.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
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
{{- end -}}
