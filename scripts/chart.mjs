#!/usr/bin/env node
// Generates the Helm chart (charts/sidecar-injector) from the kustomize manifests, so the two
// cannot drift: every object is the one `kubectl kustomize` renders, for each choice the chart
// offers — the certificate mode (manifests/ or manifests/overlays/cert-manager), monitoring
// (components/monitoring), in-place updates (components/in-place-updates) — and only the values the chart exposes (image, replicas, the
// injector's resources) are placeholders. The SidecarTemplate resource goes to crds/ (Helm
// installs it before anything that uses it). The SidecarTemplates (the bundled examples, your
// own templates) are written by hand in templates/sidecar-templates.yaml; the example files are
// copied into the chart. `node scripts/chart.mjs --check` fails when the committed chart is not
// what this generates (test/chart.test.ts runs it).
//   node scripts/chart.mjs [--check] [--out DIR]
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { kustomize } from './kustomize.mjs';

const args = process.argv.slice(2);
const check = args.includes('--check');
const outIndex = args.indexOf('--out');
const chart = outIndex >= 0 ? args[outIndex + 1] : join('charts', 'sidecar-injector');
const version = JSON.parse(readFileSync('package.json', 'utf8')).version;

/** The objects `kubectl kustomize` renders for these resources and components. */
const render = (resources, components = []) => parseAllDocuments(kustomize({ resources, components })).map((d) => d.toJS());

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

// components/in-place-updates adds objects (its RBAC and the policy that bounds it) and one
// argument of the injector's container; the chart knows nothing else of it.
const IN_PLACE_ARG = '--in-place-updates=on';
const argsOf = (deployment) => deployment.spec.template.spec.containers.find((c) => c.name === 'injector').args;
const inPlaceOnly = [...byKey(render(['manifests'], ['manifests/components/in-place-updates'])).values()].filter((o) => !selfManaged.has(key(o)));
for (const [base, withInPlace] of [
  [selfManaged, byKey(render(['manifests'], ['manifests/components/in-place-updates']))],
  [certManager, byKey(render(['manifests/overlays/cert-manager'], ['manifests/components/in-place-updates']))],
]) {
  for (const [k, o] of base) {
    const other = structuredClone(withInPlace.get(k));
    if (o.kind === 'Deployment' && o.metadata.name === 'sidecar-injector' && other) {
      const args = argsOf(other);
      if (args.pop() !== IN_PLACE_ARG) throw new Error(`chart: components/in-place-updates no longer appends ${IN_PLACE_ARG} to the injector's args`);
    }
    if (!same(o, other)) throw new Error(`chart: components/in-place-updates changes ${k} beyond the injector's ${IN_PLACE_ARG}`);
  }
  const added = [...withInPlace.keys()].filter((k) => !base.has(k)).sort();
  if (!same(added, inPlaceOnly.map(key).sort())) throw new Error('chart: components/in-place-updates adds different objects under the two certificate modes');
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
    injector.args = [...injector.args, '@@in-place-updates@@'];
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
  text = text.replace(
    /^(\s*)- "?@@in-place-updates@@"?$/m,
    (_, indent) => `${indent}{{- if .Values.inPlaceUpdates.enabled }}\n${indent}- ${IN_PLACE_ARG}\n${indent}{{- end }}`,
  );
  if (text.includes('@@')) throw new Error(`chart: a placeholder of ${key(object)} was not replaced`);
  return text;
}

const fileName = (o) => `${o.kind.toLowerCase()}-${o.metadata.name}.yaml`;
const files = new Map();
// Custom resource definitions: Helm's crds/ (installed first, as they are; never templated).
const crds = new Map();
for (const map of [selfManaged, certManager])
  for (const [k, o] of map)
    if (o.kind === 'CustomResourceDefinition') {
      const text = `# Generated by scripts/chart.mjs from manifests/: edit the manifests, then run it.\n${stringify(o, { lineWidth: 0, version: '1.1' })}`;
      if (crds.has(o.metadata.name) && crds.get(o.metadata.name) !== text) throw new Error(`chart: ${k} differs between the certificate modes`);
      crds.set(o.metadata.name, text);
      map.delete(k);
    }
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
for (const o of inPlaceOnly)
  files.set(fileName(o), `${header('manifests/components/in-place-updates')}{{- if .Values.inPlaceUpdates.enabled }}\n${templateText(o)}{{- end }}\n`);

const deployment = selfManaged.get(`Deployment/${NAMESPACE}/sidecar-injector`);
const injector = deployment.spec.template.spec.containers.find((c) => c.name === 'injector');
const [repository, tag] = injector.image.split(':');
const exampleObjects = render(['templates']);
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

inPlaceUpdates:
  # Running pods get new sidecar images and resources without a new pod (templates with
  # updateStrategy: inPlace, in namespaces labelled sidecar-injector.io/in-place-updates=enabled):
  # the injector may update pods and pods/resize, bounded by a ValidatingAdmissionPolicy
  # (Kubernetes 1.30 or later). See docs/rollout.md.
  enabled: false

# The bundled example sidecars to install, by name: ${examples.map((f) => f.replace(/\.ya?ml$/, '')).join(', ')}. For trying
# the injector out, not for production. None by default: a fresh install injects nothing.
exampleTemplates: []

# Your own templates: a SidecarTemplate per entry, its name to its spec (the template document of
# docs/templates.md, as YAML). The API server refuses one the injector would refuse, so a bad
# template fails \`helm upgrade\` with the message \`sidecar-injector check\` prints. Or keep them
# apart from the install: docs/templates-in-your-repo.md.
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

/** The heap cap the Deployment sets (NODE_OPTIONS), and the least memory limit that holds it with Node's own memory. */
const HEAP_MIB = Number(/--max-old-space-size=(\d+)/.exec(readFileSync(join('manifests', 'base', 'deployment.yaml'), 'utf8'))?.[1]);
if (!Number.isInteger(HEAP_MIB)) throw new Error('chart.mjs: manifests/base/deployment.yaml sets no --max-old-space-size');
const MIN_MEMORY_MI = 256;
const MIN_MEMORY_BYTES = MIN_MEMORY_MI * 1024 * 1024;

const checks = `{{- /* Refuses what the chart cannot install; renders no object. */}}
{{- /* The objects name the namespace ${NAMESPACE} (the webhooks' Service, RBAC subjects). */}}
{{- if ne .Release.Namespace "${NAMESPACE}" }}
{{- fail "install this chart into the namespace ${NAMESPACE} (helm install -n ${NAMESPACE}; see docs/helm.md)" }}
{{- end }}
{{- if not (has .Values.certificates.mode (list "self-managed" "cert-manager")) }}
{{- fail (printf "certificates.mode: expected self-managed or cert-manager (got %q)" .Values.certificates.mode) }}
{{- end }}
{{- /* The PodDisruptionBudget keeps one replica: with one replica in all, no node could ever be drained. */}}
{{- if lt (int .Values.replicas) 2 }}
{{- fail (printf "replicas: %v with the PodDisruptionBudget (minAvailable: 1) blocks every node drain, and the required webhook refuses every pod create while that one replica restarts; set replicas to 2 or more" .Values.replicas) }}
{{- end }}
{{- /* The V8 heap is capped at ${HEAP_MIB} MB (NODE_OPTIONS); with Node's own memory beside it, a lower limit is an OOM kill under load. */}}
{{- $memory := toString (dig "limits" "memory" "" .Values.resources) }}
{{- if $memory }}
{{- $number := regexFind "^[0-9]+([.][0-9]+)?" $memory }}
{{- $unit := trimPrefix $number $memory }}
{{- $factors := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 }}
{{- if or (not $number) (not (hasKey $factors $unit)) }}
{{- fail (printf "resources.limits.memory: expected a quantity such as 256Mi or 1Gi (got %q)" $memory) }}
{{- end }}
{{- if lt (mulf (float64 $number) (float64 (get $factors $unit))) (float64 ${MIN_MEMORY_BYTES}) }}
{{- fail (printf "resources.limits.memory: %s is below ${MIN_MEMORY_MI}Mi, what the injector needs beside its ${HEAP_MIB} MB heap cap (NODE_OPTIONS --max-old-space-size); the kubelet would kill it under load" $memory) }}
{{- end }}
{{- end }}
`;

const sidecarTemplates = `{{- /* The SidecarTemplates: the example templates asked for, then your own (name: spec). */}}
{{- range .Values.exampleTemplates }}
{{- $text := $.Files.Get (printf "examples/%s.yaml" .) }}
{{- if not $text }}
{{- fail (printf "exampleTemplates: no example template %q (there are: ${examples.map((f) => f.replace(/\.ya?ml$/, '')).join(', ')})" .) }}
{{- end }}
---
{{ $text }}
{{- end }}
{{- range $name, $spec := .Values.templates }}
---
apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: {{ $name }}
  labels:
    app.kubernetes.io/part-of: sidecar-injector
    app.kubernetes.io/component: templates
spec:
  {{- toYaml $spec | nindent 2 }}
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
    inPlaceUpdates: { type: 'object', additionalProperties: false, properties: { enabled: { type: 'boolean' } } },
    exampleTemplates: { type: 'array', uniqueItems: true, items: { enum: exampleNames } },
    templates: {
      type: 'object',
      description: 'template name to its spec (the template document of docs/templates.md, as YAML)',
      propertyNames: { pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 },
      additionalProperties: { type: 'object' },
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
  ...[...crds].map(([name, text]) => [join('crds', `${name}.yaml`), text]),
  ...[...files].map(([name, text]) => [join('templates', name), text]),
  // Each example as `kubectl apply -k templates/` makes it (its labels too): the chart installs the same objects.
  ...examples.map((f) => {
    const name = f.replace(/\.ya?ml$/, '');
    const object = exampleObjects.find((o) => o.metadata.name === name);
    if (!object) throw new Error(`chart: templates/kustomization.yaml makes no SidecarTemplate ${name}`);
    return [join('examples', `${name}.yaml`), `# Generated by scripts/chart.mjs from templates/${f}.\n${stringify(object, { lineWidth: 0, version: '1.1' })}`];
  }),
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
