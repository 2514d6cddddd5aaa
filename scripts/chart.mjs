#!/usr/bin/env node
// Generates the Helm chart (charts/sidecar-injector) from the kustomize manifests, so the two
// cannot drift: every object is the one `kubectl kustomize` renders, for each choice the chart
// offers — the certificate mode (manifests/ or manifests/overlays/cert-manager), monitoring
// (components/monitoring) — and only the values the chart exposes (image, replicas, the
// injector's resources) are placeholders. The templates ConfigMap (the bundled examples, your
// own templates) is written by hand in templates/sidecar-templates.yaml; the example files are
// copied into the chart. `node scripts/chart.mjs --check` fails when the committed chart is not
// what this generates (test/chart.test.ts runs it).
//   node scripts/chart.mjs [--check] [--out DIR]
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';

const args = process.argv.slice(2);
const check = args.includes('--check');
const outIndex = args.indexOf('--out');
const chart = outIndex >= 0 ? args[outIndex + 1] : join('charts', 'sidecar-injector');
const version = JSON.parse(readFileSync('package.json', 'utf8')).version;

/** `kubectl kustomize` of a kustomization made here: the given resources and components. */
function render(resources, components = []) {
  mkdirSync('build', { recursive: true });
  const dir = mkdtempSync(join('build', 'chart-'));
  try {
    const list = (items) => items.map((i) => `  - ${relative(dir, i)}`).join('\n');
    writeFileSync(join(dir, 'kustomization.yaml'), `resources:\n${list(resources)}\n${components.length ? `components:\n${list(components)}\n` : ''}`);
    const text = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
    return parseAllDocuments(text).map((d) => d.toJS());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const key = (o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byKey = (objects) => new Map(objects.map((o) => [key(o), o]));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const selfManaged = byKey(render(['manifests']));
const certManager = byKey(render(['manifests/overlays/cert-manager']));
const monitoringOnly = [...byKey(render(['manifests'], ['manifests/components/monitoring'])).values()].filter((o) => !selfManaged.has(key(o)));
// The component only adds objects, the same under both modes: else this chart would need more choices.
for (const [base, withMonitoring] of [
  [selfManaged, byKey(render(['manifests'], ['manifests/components/monitoring']))],
  [certManager, byKey(render(['manifests/overlays/cert-manager'], ['manifests/components/monitoring']))],
]) {
  for (const [k, o] of base)
    if (!same(o, withMonitoring.get(k))) throw new Error(`chart: components/monitoring changes ${k}; the generator only knows added objects`);
  const added = [...withMonitoring.keys()].filter((k) => !base.has(k)).sort();
  if (!same(added, monitoringOnly.map(key).sort())) throw new Error('chart: components/monitoring adds different objects under the two certificate modes');
}

// The Namespace is not the chart's: Helm keeps its release in it, so it exists first (docs/helm.md).
const NAMESPACE = 'sidecar-injector';
for (const map of [selfManaged, certManager]) {
  const ns = map.get(`Namespace//${NAMESPACE}`);
  if (!ns) throw new Error(`chart: the manifests no longer create the Namespace ${NAMESPACE}`);
  map.delete(key(ns));
}

/** An object as chart text: YAML with every `{{` of its own content kept literal, and the chart's values put in. */
function templateText(object) {
  const copy = structuredClone(object);
  if (copy.kind === 'Deployment' && copy.metadata.name === 'sidecar-injector') {
    copy.spec.replicas = '@@replicas@@';
    const injector = copy.spec.template.spec.containers.find((c) => c.name === 'injector');
    injector.image = '@@image@@';
    injector.resources = '@@resources@@';
  }
  if (copy.kind === 'CronJob') throw new Error('chart: a CronJob is not expected here');
  // YAML 1.1, as Helm reads what it renders (sigs.k8s.io/yaml): `on`, `yes`, `1_000` stay quoted strings.
  let text = stringify(copy, { lineWidth: 0, version: '1.1' }).replaceAll('{{', '{{ "{{" }}');
  text = text.replace(/^(\s*)replicas: "?@@replicas@@"?$/m, '$1replicas: {{ .Values.replicas }}');
  text = text.replace(/^(\s*)image: "?@@image@@"?$/m, '$1image: {{ include "sidecar-injector.image" . | quote }}');
  text = text.replace(
    /^(\s*)resources: "?@@resources@@"?$/m,
    (_, indent) => `${indent}resources:\n${indent}  {{- toYaml .Values.resources | nindent ${indent.length + 2} }}`,
  );
  if (text.includes('@@')) throw new Error(`chart: a placeholder of ${key(object)} was not replaced`);
  return text;
}

const fileName = (o) => `${o.kind.toLowerCase()}-${o.metadata.name}.yaml`;
const files = new Map();
const header = (what) => `{{- /* Generated by scripts/chart.mjs from ${what}: edit the manifests, then run it. */}}\n`;
for (const [k, o] of selfManaged) {
  const other = certManager.get(k);
  if (other && same(o, other)) files.set(fileName(o), `${header('manifests/')}${templateText(o)}`);
  else if (other)
    files.set(
      fileName(o),
      `${header('manifests/ and manifests/overlays/cert-manager')}{{- if eq .Values.certificates.mode "cert-manager" }}\n${templateText(other)}{{- else }}\n${templateText(o)}{{- end }}\n`,
    );
  else files.set(fileName(o), `${header('manifests/')}{{- if eq .Values.certificates.mode "self-managed" }}\n${templateText(o)}{{- end }}\n`);
}
for (const [k, o] of certManager)
  if (!selfManaged.has(k))
    files.set(fileName(o), `${header('manifests/overlays/cert-manager')}{{- if eq .Values.certificates.mode "cert-manager" }}\n${templateText(o)}{{- end }}\n`);
for (const o of monitoringOnly)
  files.set(fileName(o), `${header('manifests/components/monitoring')}{{- if .Values.monitoring.enabled }}\n${templateText(o)}{{- end }}\n`);

const deployment = selfManaged.get(`Deployment/${NAMESPACE}/sidecar-injector`);
const injector = deployment.spec.template.spec.containers.find((c) => c.name === 'injector');
const [repository, tag] = injector.image.split(':');
const examples = readdirSync('templates')
  .filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml')
  .sort();

const values = `# Values of the sidecar-injector chart. Every object is the one the kustomize manifests
# install for the same choices (the chart is generated from them: scripts/chart.mjs).

# The injector's image: a registry your cluster pulls from (make image push IMAGE=…). With a
# digest, the image is pinned to it and the tag is ignored.
image:
  repository: ${repository}
  tag: "${tag}"
  digest: ""

# Two or more: the required webhook fails closed, and the PodDisruptionBudget keeps one.
replicas: ${deployment.spec.replicas}

# The injector container's resources.
${stringify({ resources: injector.resources }).trimEnd()}

certificates:
  # self-managed: the injector makes its CA and serving certificate and writes the caBundle.
  # cert-manager: cert-manager issues them (it must be installed first).
  mode: self-managed

monitoring:
  # A ServiceMonitor, a PrometheusRule with the alerts and a Grafana dashboard ConfigMap (the
  # Prometheus Operator's CRDs must be installed).
  enabled: false

# The bundled example sidecars to install, by name: ${examples.map((f) => f.replace(/\.ya?ml$/, '')).join(', ')}. For trying
# the injector out, not for production. None by default: a fresh install injects nothing.
exampleTemplates: []

# Your own templates: file name (without .yaml) to the template's YAML text. With none and no
# examples, the chart makes no templates ConfigMap (keep yours apart: docs/templates-in-your-repo.md).
templates: {}
`;

const chartYaml = `apiVersion: v2
name: sidecar-injector
description: A mutating admission webhook that injects sidecar containers into pods, exactly once
type: application
version: ${version}
appVersion: "${version}"
`;

const helpers = `{{- /* The injector's image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "sidecar-injector.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

`;

const checks = `{{- /* Refuses what the chart cannot install; renders no object. */}}
{{- /* The objects name the namespace ${NAMESPACE} (the webhooks' Service, RBAC subjects). */}}
{{- if ne .Release.Namespace "${NAMESPACE}" }}
{{- fail "install this chart into the namespace ${NAMESPACE} (helm install -n ${NAMESPACE}; see docs/helm.md)" }}
{{- end }}
{{- if not (has .Values.certificates.mode (list "self-managed" "cert-manager")) }}
{{- fail (printf "certificates.mode: expected self-managed or cert-manager (got %q)" .Values.certificates.mode) }}
{{- end }}
`;

const sidecarTemplates = `{{- /* The templates ConfigMap the Deployment mounts: the example templates asked for, then your own. */}}
{{- $files := dict }}
{{- range .Values.exampleTemplates }}
{{- $text := $.Files.Get (printf "examples/%s.yaml" .) }}
{{- if not $text }}
{{- fail (printf "exampleTemplates: no example template %q (there are: ${examples.map((f) => f.replace(/\.ya?ml$/, '')).join(', ')})" .) }}
{{- end }}
{{- $_ := set $files (printf "%s.yaml" .) $text }}
{{- end }}
{{- range $name, $text := .Values.templates }}
{{- $_ := set $files (printf "%s.yaml" $name) $text }}
{{- end }}
{{- if $files }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: sidecar-injector-templates
  namespace: ${NAMESPACE}
  labels:
    app.kubernetes.io/name: sidecar-injector
    app.kubernetes.io/part-of: sidecar-injector
    app.kubernetes.io/component: templates
data:
  {{- toYaml $files | nindent 2 }}
{{- end }}
`;

// Helm checks the values against this before it renders: a wrong type is refused, not rendered.
const exampleNames = examples.map((f) => f.replace(/\.ya?ml$/, ''));
const schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'sidecar-injector chart values',
  type: 'object',
  additionalProperties: false,
  properties: {
    global: { type: 'object' },
    image: {
      type: 'object',
      additionalProperties: false,
      required: ['repository'],
      properties: {
        repository: { type: 'string', minLength: 1 },
        tag: { type: 'string', description: 'quote it: 1.10 unquoted is the number 1.1' },
        digest: { type: 'string', pattern: '^(sha256:[0-9a-f]{64})?$' },
      },
    },
    replicas: { type: 'integer', minimum: 1 },
    resources: {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries(['requests', 'limits'].map((k) => [k, { type: 'object', additionalProperties: { type: ['string', 'integer'] } }])),
    },
    certificates: { type: 'object', additionalProperties: false, properties: { mode: { enum: ['self-managed', 'cert-manager'] } } },
    monitoring: { type: 'object', additionalProperties: false, properties: { enabled: { type: 'boolean' } } },
    exampleTemplates: { type: 'array', uniqueItems: true, items: { enum: exampleNames } },
    templates: {
      type: 'object',
      description: 'file name (without .yaml) to the template as YAML text (a block scalar: |)',
      propertyNames: { pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 },
      additionalProperties: { type: 'string' },
    },
  },
};

const wanted = new Map([
  ['values.schema.json', `${JSON.stringify(schema, null, 2)}\n`],
  ['Chart.yaml', chartYaml],
  ['values.yaml', values],
  ['.helmignore', '# Generated by scripts/chart.mjs.\n*.orig\n'],
  [join('templates', '_helpers.tpl'), helpers],
  [join('templates', 'checks.yaml'), checks],
  [join('templates', 'sidecar-templates.yaml'), sidecarTemplates],
  ...[...files].map(([name, text]) => [join('templates', name), text]),
  ...examples.map((f) => [join('examples', f.replace(/\.yml$/, '.yaml')), readFileSync(join('templates', f), 'utf8')]),
]);

const present = (dir, prefix = '') =>
  existsSync(dir)
    ? readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? present(join(dir, e.name), join(prefix, e.name)) : [join(prefix, e.name)]))
    : [];

if (check) {
  const problems = [];
  for (const [name, text] of wanted) {
    const path = join(chart, name);
    if (!existsSync(path)) problems.push(`missing ${name}`);
    else if (readFileSync(path, 'utf8') !== text) problems.push(`differs: ${name}`);
  }
  for (const name of present(chart)) if (!wanted.has(name)) problems.push(`not generated: ${name}`);
  if (problems.length) {
    console.error(`chart: ${chart} is not what the manifests generate (run node scripts/chart.mjs):\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`chart: ${chart} matches the manifests (${wanted.size} files)`);
} else {
  rmSync(chart, { recursive: true, force: true });
  for (const [name, text] of wanted) {
    mkdirSync(join(chart, name, '..'), { recursive: true });
    writeFileSync(join(chart, name), text);
  }
  console.log(`chart: wrote ${wanted.size} files to ${chart}`);
}
