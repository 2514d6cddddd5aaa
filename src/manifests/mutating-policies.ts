/**
 * Templates exported as a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA and on by
 * default since Kubernetes 1.36): the injection written in CEL and run inside the API server,
 * with no webhook call. The policy adds what the webhook adds to the same pod, item for item and
 * byte for byte in the ledger, so that the audit, `why` and the webhook itself read its work as
 * their own; docs/map-export.md says what can be exported and why the rest cannot
 * (templates/export-rules.ts decides it).
 *
 * One policy holds every exported template, one mutation each, in the webhooks' order (the
 * required webhook's templates, then the optional one's, each by name). The API server applies
 * separate policies in no fixed order (k8s.io/apiserver policy/generic/policy_source.go builds
 * its list from a Go map), and the webhook's pod depends on the order: the volumes of two
 * templates, two sidecars placed first, the ledger's keys. Mutations of one policy run in
 * order, each on the pod the previous one made (policy/mutating/dispatcher.go), and the
 * policy's variables are evaluated again for each.
 *
 * Each mutation is the whole decision for its template: in scope (its selectors, the pod's
 * operating system, the on-request annotation), not already injected (the ledger), none of the
 * rules that leave it out (a container or volume of the pod's own in its way, a hostNetwork pod
 * and a declared port, a Guaranteed pod it would make Burstable), its pod overrides valid, and
 * none of the cases only the webhook handles exactly (pod-level resources; a container name the
 * API server refuses anyway). The guard, a ValidatingAdmissionPolicy, refuses what the webhook
 * refuses and the policy cannot: a bad override, a pod-level budget. Pure: a template set in,
 * plain objects and their YAML out.
 */
import { Document } from 'yaml';
import { PolicyError } from '../errors.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { quantityRe } from '../k8s/quantity.js';
import { podSchemaTypes } from '../k8s/pod-schema.js';
import { reviewLimits } from '../k8s/pod-validation.js';
import { maxMetadataEntries } from '../k8s/pod.js';
import { celString, inMap, selectorCel } from '../k8s/cel.js';
import { overrideDomain, overrideKey } from '../pipeline/overrides.js';
import { matchConditions as webhookMatchConditions } from '../pipeline/match-conditions.js';
import { nameOf, templateInForm } from '../templates/forms.js';
import type { ParamDeclaration } from '../templates/parameters.js';
import type { Reference, Segment } from '../templates/placeholders.js';
import { entryOf, exportProblems } from '../templates/export-rules.js';
import type { TemplateSet } from '../templates/set.js';
import type { Compiled, Template, TemplateFailurePolicy } from '../templates/template.js';
import { podOs, requestPattern, selectorJson, webhookScope } from './required-policies.js';

/** The order in which the API server calls the two webhooks: required first, as the configuration lists them. */
const webhookOrder: readonly TemplateFailurePolicy[] = ['Fail', 'Ignore'];

/** The name of the generated policy and its binding; its guard's is this with `-guard`. */
export const exportedPolicyName = 'sidecar-injector-exported';

/** A template that cannot be exported, with every reason. */
export interface ExportRefusal {
  readonly template: string;
  readonly reasons: readonly string[];
}

/**
 * The versions of admissionregistration.k8s.io a MutatingAdmissionPolicy is written in: `v1`
 * (Kubernetes 1.36+, on by default) and `v1beta1` (1.35, only where the API server runs
 * with the `MutatingAdmissionPolicy` feature gate and that version turned on). Both have the same
 * fields for what the export writes.
 */
export const mutatingPolicyApiVersions = ['v1', 'v1beta1'] as const;
export type MutatingPolicyApiVersion = (typeof mutatingPolicyApiVersions)[number];

/** What a cluster of 1.34 or 1.35 needs for the beta API: said wherever the export cannot go. */
export const mutatingPolicyBetaNeeds =
  'Kubernetes 1.36 and later serve it as admissionregistration.k8s.io/v1; 1.35 serves the beta v1beta1 only when kube-apiserver runs with --feature-gates=MutatingAdmissionPolicy=true and --runtime-config=admissionregistration.k8s.io/v1beta1=true (1.34 serves it so too, but its CEL cannot compile the export)';

/**
 * The oldest minor whose API server takes the export: its CEL for new policies (the previous
 * minor's library, Kubernetes' compatibility version) must have the list functions the
 * mutations use (`flatten`, `lists.range`: ext.Lists v3, introduced in 1.34, so usable from 1.35).
 */
export const mutatingPolicyOldestMinor = 35;

/** What `policies --mutating` prints. */
export interface ExportedPolicies {
  /** The version the policy and its binding are written in. */
  readonly apiVersion: MutatingPolicyApiVersion;
  /** Templates exported, in the policy's order. */
  readonly exported: readonly string[];
  readonly refused: readonly ExportRefusal[];
  /** Empty when nothing is exported. */
  readonly objects: readonly JsonObject[];
}

// ---------------------------------------------------------------------------------------------
// CEL building blocks. `object` is the pod as the previous mutation left it; `namespaceObject`
// its namespace; `request` the admission request.

const podLabels = 'object.metadata.labels';
const podAnnotations = 'object.metadata.annotations';
const nsLabels = 'namespaceObject.metadata.labels';
const nsAnnotations = 'namespaceObject.metadata.annotations';
const valueIn = (map: string, key: string) => `(${inMap(map, key)} ? ${map}[${celString(key)}] : '')`;
const escapePointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');
const listOf = (list: string) => `(has(object.spec.${list}) ? object.spec.${list} : [])`;

/** A quantity text as the injector reads one (templates/parameters.ts): non-negative, at most 1,024 characters. */
/**
 * The injector's quantity grammar (k8s/quantity.ts: at most 64 characters, an exponent of at
 * most three digits), then the API server's: Go reads more spellings as quantities (`.`, `+`,
 * `4e0008`), which the webhook refuses.
 */
const isQuantityText = (v: string) =>
  `(size(${v}) <= 64 && ${v}.matches(${celString(quantityRe.source)}) && isQuantity(${v}) && quantity(${v}).compareTo(quantity('0')) >= 0)`;

/** The CEL test that `value` passes `declaration` (templates/parameters.ts checkValue), for the types that export. */
function validValue(declaration: ParamDeclaration, value: string): string {
  if (declaration.type === 'enum') return `${value} in [${declaration.values!.map(celString).join(', ')}]`;
  const tests = [isQuantityText(value)];
  if (declaration.min !== undefined) tests.push(`quantity(${value}).compareTo(quantity(${celString(String(declaration.min))})) >= 0`);
  if (declaration.max !== undefined) tests.push(`quantity(${value}).compareTo(quantity(${celString(String(declaration.max))})) <= 0`);
  return tests.join(' && ');
}

/** The pod's override of `name`, when it is there and valid; the webhook refuses the pod otherwise (the guard refuses it). */
const podOverride = (template: Template, name: string) => {
  const key = overrideKey(template.name, name);
  return { present: inMap(podAnnotations, key), value: `${podAnnotations}[${celString(key)}]` };
};
const nsOverride = (template: Template, name: string) => {
  const key = overrideKey(template.name, name);
  return { present: inMap(nsAnnotations, key), value: `${nsAnnotations}[${celString(key)}]` };
};

/**
 * While a policy is generated: the variable holding each overridable parameter's value, by
 * template and parameter (an expression would otherwise repeat it wherever the value is used).
 */
let paramVariables: Map<string, string> | undefined;

/** The value of parameter `name` for this pod, as the variable that holds it when there is one. */
function paramCel(template: Template, name: string): string {
  const variable = paramVariables?.get(`${template.name}\0${name}`);
  return variable ? `string(variables.${variable})` : paramValueCel(template, name);
}

/** The value of parameter `name` for this pod: pod > namespace > template (pipeline/overrides.ts). */
function paramValueCel(template: Template, name: string): string {
  const declaration = template.declarations.get(name);
  const fixed = celString(String(template.params[name]));
  if (!declaration || declaration.override === 'none') return fixed;
  const ns = nsOverride(template, name);
  const fromNamespace = `(${ns.present} && ${validValue(declaration, ns.value)} ? ${ns.value} : ${fixed})`;
  if (declaration.override !== 'pod') return fromNamespace;
  const pod = podOverride(template, name);
  return `(${pod.present} ? ${pod.value} : ${fromNamespace})`;
}

/** Where the value of an overridable parameter came from, for the ledger's `params` (pipeline/overrides.ts). */
function paramSource(template: Template, name: string): { pod: string; namespace: string } {
  const declaration = template.declarations.get(name)!;
  const ns = nsOverride(template, name);
  const pod = podOverride(template, name);
  const fromPod = declaration.override === 'pod' ? pod.present : 'false';
  return { pod: fromPod, namespace: `!(${fromPod}) && ${ns.present} && ${validValue(declaration, ns.value)}` };
}

/** `metadata.name`, else `generateName` without its trailing dashes, else the request's name (templates/context.ts). */
const podName =
  "(has(object.metadata.name) && object.metadata.name != '' ? object.metadata.name : " +
  "has(object.metadata.generateName) && object.metadata.generateName.find('^.*[^-]') != '' ? object.metadata.generateName.find('^.*[^-]') : string(request.name))";

function referenceCel(ref: Reference, template: Template): string {
  switch (ref.source) {
    case 'literal':
      return celString(ref.text);
    case 'params':
      return paramCel(template, ref.key);
    case 'pod.labels':
      return valueIn(podLabels, ref.key);
    case 'pod.annotations':
      return valueIn(podAnnotations, ref.key);
    case 'namespace.labels':
      return valueIn(nsLabels, ref.key);
    case 'pod.name':
      return podName;
    case 'pod.generateName':
      return "(has(object.metadata.generateName) ? object.metadata.generateName : '')";
    case 'pod.namespace':
    case 'namespace.name':
      return 'string(request.namespace)';
    case 'pod.serviceAccountName':
      return "(has(object.spec.serviceAccountName) && object.spec.serviceAccountName != '' ? object.spec.serviceAccountName : has(object.spec.serviceAccount) && object.spec.serviceAccount != '' ? object.spec.serviceAccount : 'default')";
  }
}

/** A string with placeholders: an empty or missing value takes the default (templates/placeholders.ts renderSegments). */
function segmentsCel(segments: readonly Segment[], template: Template): string {
  const parts = segments.map((s) => {
    if (s.kind === 'text') return celString(s.text);
    const value = referenceCel(s.ref, template);
    return `(${value} == '' ? ${celString(s.fallback ?? '')} : ${value})`;
  });
  // string(): the pod's and the request's fields are dynamically typed, and a list literal mixing them with text does not compile.
  return parts.length === 0 ? "''" : segments.every((s) => s.kind === 'text') ? parts.join(' + ') : `string(${parts.join(' + ')})`;
}

/** The CEL type of a field: `Object.spec.initContainers.resources` for a container's resources (the API server's naming). */
type Shape = { readonly kind: 'struct'; readonly type: string; readonly path: string } | { readonly kind: 'map' } | { readonly kind: 'scalar' };

function fieldShape(parent: Shape, key: string): Shape {
  if (parent.kind !== 'struct') return { kind: 'scalar' };
  const raw = podSchemaTypes[parent.type]?.[key];
  if (!raw) return { kind: 'scalar' };
  const type = raw.endsWith('[]') ? raw.slice(0, -2) : raw;
  if (type === 'map') return { kind: 'map' };
  if (podSchemaTypes[type]) return { kind: 'struct', type, path: `${parent.path}.${key}` };
  return { kind: 'scalar' };
}

function scalarCel(value: unknown): string {
  if (typeof value === 'string') return celString(value);
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(value).includes('.') ? String(value) : `${value}.0`;
  if (value === null) return 'null';
  throw new PolicyError([`a value of type ${typeof value} cannot be written in CEL`]);
}

/** A static JSON value as a typed CEL value of `shape`. */
function jsonCel(value: unknown, shape: Shape): string {
  if (Array.isArray(value)) return `[${value.map((v) => jsonCel(v, shape)).join(', ')}]`;
  if (isJsonObject(value)) {
    if (shape.kind === 'map')
      return `{${Object.entries(value)
        .map(([k, v]) => `${celString(k)}: ${scalarCel(v)}`)
        .join(', ')}}`;
    if (shape.kind !== 'struct') throw new PolicyError(['an object where the Pod schema has none']);
    return `${shape.path}{${Object.entries(value)
      .map(([k, v]) => `${k}: ${jsonCel(v, fieldShape(shape, k))}`)
      .join(', ')}}`;
  }
  return scalarCel(value);
}

/** A compiled template value as a typed CEL value of `shape`. */
function compiledCel(node: Compiled, shape: Shape, template: Template): string {
  switch (node.kind) {
    case 'static':
      return jsonCel(node.value, shape);
    case 'string':
      return segmentsCel(node.segments, template);
    case 'param':
      return template.overridable.has(node.key) ? paramCel(template, node.key) : scalarCel(template.params[node.key]);
    case 'array':
      return `[${node.items.map((item) => compiledCel(item, shape, template)).join(', ')}]`;
    case 'object':
      if (shape.kind === 'map') return `{${node.entries.map(([k, v]) => `${celString(k)}: ${compiledCel(v, { kind: 'scalar' }, template)}`).join(', ')}}`;
      if (shape.kind !== 'struct') throw new PolicyError(['an object where the Pod schema has none']);
      return `${shape.path}{${node.entries.map(([k, v]) => `${k}: ${compiledCel(v, fieldShape(shape, k), template)}`).join(', ')}}`;
  }
}

const containerShape = (list: 'containers' | 'initContainers'): Shape => ({ kind: 'struct', type: 'V1Container', path: `Object.spec.${list}` });
const volumeShape: Shape = { kind: 'struct', type: 'V1Volume', path: 'Object.spec.volumes' };
const appShape = (kind: 'env' | 'volumeMounts'): Shape => ({
  kind: 'struct',
  type: kind === 'env' ? 'V1EnvVar' : 'V1VolumeMount',
  path: `Object.spec.containers.${kind}`,
});

// ---------------------------------------------------------------------------------------------
// Reading compiled nodes.

function withEntry(node: Compiled, key: string, value: Compiled): Compiled {
  if (node.kind === 'static' && isJsonObject(node.value)) {
    const entries = Object.entries(node.value).map(([k, v]) => [k, { kind: 'static', value: v }] as const);
    return withEntry({ kind: 'object', entries }, key, value);
  }
  if (node.kind !== 'object') return node;
  const entries = node.entries.some(([k]) => k === key)
    ? node.entries.map(([k, v]) => [k, k === key ? value : v] as const)
    : [...node.entries, [key, value] as const];
  return { kind: 'object', entries };
}

/** The container as a Guaranteed pod gets it (k8s/qos.ts guaranteedContainer), or undefined when it cannot keep the pod Guaranteed. */
function guaranteedNode(container: Compiled, template: Template): Compiled | undefined {
  const resources = entryOf(container, 'resources');
  const from = template.guaranteedPods === 'requests-from-limits' ? 'limits' : 'requests';
  const to = template.guaranteedPods === 'requests-from-limits' ? 'requests' : 'limits';
  const source = resources && entryOf(resources, from);
  const cpu = source && entryOf(source, 'cpu');
  const memory = source && entryOf(source, 'memory');
  if (!resources || !cpu || !memory) return undefined;
  let target = entryOf(resources, to) ?? { kind: 'object', entries: [] };
  target = withEntry(withEntry(target, 'cpu', cpu), 'memory', memory);
  return withEntry(container, 'resources', withEntry(resources, to, target));
}

/**
 * A static value as a CEL test that a pod's `subject` holds it (k8s/contains.ts: every field the
 * template sets, the same; `sizeLimit` the same quantity, however written; a list of strings the
 * same list). Lists of objects are not exported (templates/export-rules.ts).
 */
function holdsCel(subject: string, value: unknown, key = ''): string {
  if (isJsonObject(value)) {
    const tests = Object.entries(value).map(([k, v]) => `has(${subject}.${k}) && ${holdsCel(`${subject}.${k}`, v, k)}`);
    return tests.length === 0 ? 'true' : `(${tests.join(' && ')})`;
  }
  if (Array.isArray(value)) return `${subject} == ${jsonCel(value, { kind: 'scalar' })}`;
  if (key === 'sizeLimit')
    return `(string(${subject}) == ${scalarCel(String(value))} || (isQuantity(string(${subject})) && quantity(string(${subject})).compareTo(quantity(${scalarCel(String(value))})) == 0))`;
  return `${subject} == ${scalarCel(value)}`;
}

// ---------------------------------------------------------------------------------------------
// The mutation of one template.

const ledgerKey = (name: string) => `"${name}":{"hash":`;
const statusKey = AnnotationKeys.status;
/** The ledger as this mutation sees it: absent or not in the webhook's format → '' (inject/ledger.ts parseLedger ignores it alike). */
const ledgerVariable = `${inMap(podAnnotations, statusKey)} && ${podAnnotations}[${celString(statusKey)}].startsWith('{"v":1,"templates":{') && ${podAnnotations}[${celString(statusKey)}].endsWith('}}') ? ${podAnnotations}[${celString(statusKey)}] : ''`;

/** A quantity field of a resources map as the kubelet counts it: a quantity above zero. */
const positive = (map: string, name: string) =>
  `(has(${map}) && '${name}' in ${map} && isQuantity(string(${map}['${name}'])) && quantity(string(${map}['${name}'])).compareTo(quantity('0')) > 0)`;
const sameQuantity = (a: string, b: string) => `quantity(string(${a})).compareTo(quantity(string(${b}))) == 0`;
/**
 * Guaranteed (k8s/qos.ts without pod-level resources, which the policy leaves to the webhook):
 * every container and init container limits cpu and memory, and requests what it limits where
 * it requests anything (a request is never above its limit in a pod the API server stores).
 */
const guaranteedContainerCel = (c: string) =>
  ['cpu', 'memory']
    .map(
      (r) =>
        `has(${c}.resources) && ${positive(`${c}.resources.limits`, r)} && (!${positive(`${c}.resources.requests`, r)} || ${sameQuantity(`${c}.resources.requests['${r}']`, `${c}.resources.limits['${r}']`)})`,
    )
    .join(' && ');
const guaranteedVariable = `${listOf('containers')}.all(c, ${guaranteedContainerCel('c')}) && ${listOf('initContainers')}.all(c, ${guaranteedContainerCel('c')})`;

/** A pod that runs to completion (k8s/pod.ts runsToCompletion): a Job's, or restartPolicy Never or OnFailure. */
const runsToCompletionVariable =
  "(has(object.spec.restartPolicy) && object.spec.restartPolicy in ['Never', 'OnFailure']) || (has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, o.kind == 'Job' && o.apiVersion.startsWith('batch/')))";

const dnsLabel = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';

/** The pod budgets pod-level resources (inject/pod-resources.ts): the webhook grows them by the sidecars' share; the policy does not. */
const podLevelBudget =
  'has(object.spec.resources) && ((has(object.spec.resources.requests) && size(object.spec.resources.requests) > 0) || (has(object.spec.resources.limits) && size(object.spec.resources.limits) > 0))';

interface FormPatch {
  readonly ops: string;
  readonly ledgerEntry: string;
}

/** The patch of `template` in one form, and its ledger entry's text (an expression). */
function formPatch(
  template: Template,
  formTemplate: Template,
  exported: readonly Template[],
  guaranteed: boolean,
  appVariable: string,
  appItems: { name: string; expression: string }[],
): FormPatch {
  const { body } = formTemplate;
  const ops: string[] = [];
  const record: { key: string; items: string[] }[] = [];
  const pushRecord = (key: string, item: string) => {
    let r = record.find((x) => x.key === key);
    if (!r) record.push((r = { key, items: [] }));
    r.items.push(item);
  };
  const containerValue = (node: Compiled, list: 'containers' | 'initContainers') =>
    compiledCel(guaranteed ? guaranteedNode(node, formTemplate)! : node, containerShape(list), template);
  // Containers: as the webhook places them (inject/inject.ts placedAt), in template-name order
  // among the sidecars of their placement, whichever template went in first: placed first, after
  // the containers of the earlier-named templates placed first; placed last, before those of the
  // later-named templates placed last. Only templates that went in (in the ledger): a container
  // of the pod's own with such a name stays where it is.
  const namesIn = (ts: readonly Template[]) =>
    ts
      .map((t) => ({ key: ledgerKey(t.name), names: [...t.body.initContainers, ...t.body.containers].map((c) => String(nameOf(c))) }))
      .filter((e) => e.names.length > 0)
      .map((e) => `(variables.ledger.contains(${celString(e.key)}) ? [${e.names.map(celString).join(', ')}] : [])`)
      .join(' + ');
  const first = formTemplate.placement === 'first';
  const neighbours = exported.filter(
    (t) => t.name !== template.name && t.placement === formTemplate.placement && (first ? t.name < template.name : t.name > template.name),
  );
  for (const list of ['initContainers', 'containers'] as const) {
    const nodes = body[list];
    if (nodes.length === 0) continue;
    const values = nodes.map((n) => containerValue(n, list));
    for (const n of nodes) pushRecord(list, JSON.stringify(String(nameOf(n))));
    ops.push(`(has(object.spec.${list}) ? [] : [JSONPatch{op: 'add', path: '/spec/${list}', value: []}])`);
    const size = `size(object.spec.${list})`;
    const at =
      neighbours.length === 0
        ? first
          ? '0'
          : `(has(object.spec.${list}) ? ${size} : 0)`
        : // The first index past the earlier ones (placed first), or of a later one (placed last).
          `(has(object.spec.${list}) ? (lists.range(${size}).filter(i, ${first ? '!' : ''}(object.spec.${list}[i].name in ${namesIn(neighbours)})) + [${size}])[0] : 0)`;
    ops.push(`[${values.map((v, i) => `JSONPatch{op: 'add', path: '/spec/${list}/' + string(${at} + ${i}), value: ${v}}`).join(', ')}]`);
  }
  // Volumes: added unless the pod has one of that name (the same one: the conflict test ruled out another).
  if (body.volumes.length > 0) {
    const parts = body.volumes.map((node) => {
      const name = String(nameOf(node));
      const absent = `!${listOf('volumes')}.exists(v, v.name == ${celString(name)})`;
      pushRecord('volumes', `(${absent} ? [${celString(JSON.stringify(name))}] : [])`);
      return { absent, value: compiledCel(node, volumeShape, template) };
    });
    ops.push(`(has(object.spec.volumes) ? [] : [JSONPatch{op: 'add', path: '/spec/volumes', value: []}])`);
    ops.push(`[${parts.map((p) => `${p.absent} ? [JSONPatch{op: 'add', path: '/spec/volumes/-', value: ${p.value}}] : []`).join(', ')}].flatten()`);
  }
  // Labels and annotations: added where the pod has no such key (never overwritten); the maps
  // themselves are made by the mutation's first operations when the pod has none (mapsFirst).
  for (const [kind, map, entries] of [
    ['labels', podLabels, body.labels],
    ['annotations', podAnnotations, body.annotations],
  ] as const) {
    if (entries.length === 0) continue;
    const items = entries.map(([key, node]) => ({ key, value: compiledCel(node, { kind: 'scalar' }, template) }));
    for (const { key } of items) pushRecord(kind, `(!${inMap(map, key)} ? [${celString(JSON.stringify(key))}] : [])`);
    ops.push(
      `[${items.map(({ key, value }) => `!${inMap(map, key)} ? [JSONPatch{op: 'add', path: '/metadata/${kind}/${escapePointer(key)}', value: ${value}}] : []`).join(', ')}].flatten()`,
    );
  }
  // App containers (variables.apps): items added by key where the container has none of that key.
  const appEnv = body.appEnv.map((n) => ({ key: String((entryOf(n, 'name') as { value: unknown }).value), node: n }));
  const appMounts = body.appVolumeMounts.map((n) => ({ key: String((entryOf(n, 'mountPath') as { value: unknown }).value), node: n }));
  let appLedger = "''";
  if (appEnv.length + appMounts.length > 0) {
    const c = 'object.spec.containers[i]';
    const kinds = [
      { kind: 'env', field: 'name', items: appEnv, shape: appShape('env') },
      { kind: 'volumeMounts', field: 'mountPath', items: appMounts, shape: appShape('volumeMounts') },
    ].filter((k) => k.items.length > 0);
    const absent = (kind: string, field: string, key: string) => `!(has(${c}.${kind}) && ${c}.${kind}.exists(x, x.${field} == ${celString(key)}))`;
    const perContainer = kinds.map(
      (k) =>
        `(has(${c}.${k.kind}) ? [] : [JSONPatch{op: 'add', path: '/spec/containers/' + string(i) + '/${k.kind}', value: []}]) + [${k.items.map((it) => `${absent(k.kind, k.field, it.key)} ? [JSONPatch{op: 'add', path: '/spec/containers/' + string(i) + '/${k.kind}/-', value: ${compiledCel(it.node, k.shape, template)}}] : []`).join(', ')}].flatten()`,
    );
    ops.push(`variables.apps.map(i, ${perContainer.join(' + ')}).flatten()`);
    // Per app container, what it gets: '"env":["LOG_DIR"],"volumeMounts":["/var/log/app"]', or '' (a variable: read twice below).
    const kindTexts = kinds.map((k) => {
      const list = `[${k.items.map((it) => `${absent(k.kind, k.field, it.key)} ? [${celString(JSON.stringify(it.key))}] : []`).join(', ')}].flatten()`;
      return `(${list}.size() > 0 ? ['"${k.kind}":[' + ${list}.join(',') + ']'] : [])`;
    });
    if (!appItems.some((v) => v.name === appVariable))
      appItems.push({ name: appVariable, expression: `variables.apps.map(i, (${kindTexts.join(' + ')}).join(','))` });
    const items = `variables.${appVariable}`;
    appLedger = `(${items}.exists(s, s != '') ? ',"appContainers":{' + lists.range(size(variables.apps)).filter(j, ${items}[j] != '').map(j, '"' + object.spec.containers[variables.apps[j]].name + '":{' + ${items}[j] + '}').join(',') + '}' : '')`;
  }
  // The ledger entry, keys in the webhook's order (inject/inject.ts): hash, form, params, then what was added.
  const params = [...template.declarations.values()].filter((d) => d.override !== 'none').map((d) => d.name);
  const paramText = (source: 'pod' | 'namespace') =>
    [...params].sort().map((name) => {
      const value = paramCel(template, name);
      const from = paramSource(template, name)[source];
      return `(${from} && ${value} != ${celString(String(template.params[name]))} ? ['"${name}":"' + ${value} + '"'] : [])`;
    });
  const paramList = `[${[...paramText('pod'), ...paramText('namespace')].join(', ')}].flatten()`;
  const paramsLedger = params.length === 0 ? "''" : `${paramList}.size() > 0 ? ',"params":{' + ${paramList}.join(',') + '}' : ''`;
  const form = formTemplate === template ? '' : `,"form":"${formTemplate.form}"`;
  const recorded = record.map(({ key, items }) => {
    const list = items.every((i) => i.startsWith('"'))
      ? `[${items.map(celString).join(', ')}]`
      : `[${items.map((i) => (i.startsWith('"') ? `[${celString(i)}]` : i)).join(', ')}].flatten()`;
    return `(${list}.size() > 0 ? ',"${key}":[' + ${list}.join(',') + ']' : '')`;
  });
  const ledgerEntry = [celString(`"${template.name}":{"hash":"${template.hash}"${form}`), `(${paramsLedger})`, ...recorded, appLedger, "'}'"].join(' + ');
  return { ops: ops.join(' + '), ledgerEntry };
}

/** The ledger's new text with `entry` in its place: templates sorted by name (inject/ledger.ts serializeLedger). */
function ledgerPatch(template: Template, entry: string): string {
  // The entries after this one: the ledger's own template keys (any template, in force or not) sorted after its name.
  const later = `variables.ledger.findAll('"[a-z0-9-]+":\\\\{"hash":').filter(k, k > ${celString(ledgerKey(template.name))}).sort()`;
  const before = `variables.ledger.indexOf(${later}[0])`;
  const last = `variables.ledger.endsWith('{}}') ? variables.ledger.substring(0, size(variables.ledger) - 2) + ${entry} + '}}' : variables.ledger.substring(0, size(variables.ledger) - 2) + ',' + ${entry} + '}}'`;
  const spliced = `${later}.size() > 0 ? variables.ledger.substring(0, ${before}) + ${entry} + ',' + variables.ledger.substring(${before}) : ${last}`;
  const text = `(variables.ledger == '' ? '{"v":1,"templates":{' + ${entry} + '}}' : ${spliced})`;
  return `[JSONPatch{op: 'add', path: '/metadata/annotations/${escapePointer(statusKey)}', value: ${text}}]`;
}

/** When the template is in scope for the pod: what the webhook's selection decides (selection/select.ts). */
function scopeCel(template: Template): string[] {
  const tests = [...selectorCel(template.objectSelector, podLabels), ...selectorCel(template.namespaceSelector, nsLabels)];
  if (!(template.os.includes('linux') && template.os.includes('windows'))) tests.push(`${podOs} in [${template.os.map((os) => `'${os}'`).join(', ')}]`);
  if (template.injection === 'on-request')
    tests.push(
      `${inMap(podAnnotations, AnnotationKeys.request)} && ${podAnnotations}[${celString(AnnotationKeys.request)}].matches(${celString(requestPattern(template))})`,
    );
  return tests;
}

/** The pod's overrides of `template` are all ones the webhook accepts (pipeline/overrides.ts): else it refuses the pod. */
function overridesValidCel(template: Template): string {
  const prefix = `${template.name}${overrideDomain}`;
  const podParams = [...template.declarations.values()].filter((d) => d.override === 'pod');
  const known = podParams.map((d) => overrideKey(template.name, d.name));
  const unknown = `${podAnnotations}.exists(k, k.startsWith(${celString(prefix)}) && !(k in [${known.map(celString).join(', ')}]))`;
  const bad = podParams.map((d) => {
    const pod = podOverride(template, d.name);
    return `(${pod.present} && !(${validValue(d, pod.value)}))`;
  });
  return `!(has(${podAnnotations}) && (${[unknown, ...bad].join(' || ')}))`;
}

/** Empty label and annotation maps where the pod has none: the operations after them add by key. */
function mapsFirst(template: Template): string {
  const maps = [...(template.body.labels.length > 0 ? ['labels'] : []), 'annotations'];
  return maps.map((m) => `(has(object.metadata.${m}) ? [] : [JSONPatch{op: 'add', path: '/metadata/${m}', value: {}}])`).join(' + ');
}

/**
 * The rules that leave `template` out of a pod (pipeline/decision.ts leftOutRules), each as the
 * CEL that is true when it applies: the mutation injects only when none does, and the guard
 * names the first that did as an audit annotation.
 */
function leftOutCel(template: Template): { readonly rule: string; readonly applies: string }[] {
  const containers = [...template.body.initContainers, ...template.body.containers];
  const names = `[${containers.map((n) => celString(String(nameOf(n)))).join(', ')}]`;
  const hasPort = containers.some((n) => {
    const ports = entryOf(n, 'ports');
    return ports !== undefined && !(ports.kind === 'static' && Array.isArray(ports.value) && ports.value.length === 0);
  });
  const keepsGuaranteed = containers.every((n) => guaranteedNode(n, template) !== undefined);
  return [
    // A container of the pod's own with a sidecar's name.
    { rule: 'name-conflict', applies: `${listOf('initContainers')}.exists(c, c.name in ${names}) || ${listOf('containers')}.exists(c, c.name in ${names})` },
    // A volume of the pod's own with a volume's name that is something else.
    ...template.body.volumes.map((node) => {
      const { name, ...rest } = (node as { value: JsonObject }).value;
      return { rule: 'volume-conflict', applies: `${listOf('volumes')}.exists(v, v.name == ${celString(String(name))} && !${holdsCel('v', rest)})` };
    }),
    ...(hasPort ? [{ rule: 'host-network-port', applies: '(has(object.spec.hostNetwork) && object.spec.hostNetwork)' }] : []),
    ...(keepsGuaranteed ? [] : [{ rule: 'qos-class', applies: 'variables.guaranteed' }]),
  ];
}

function mutationCel(
  template: Template,
  set: TemplateSet,
  exported: readonly Template[],
  index: number,
  appItems: { name: string; expression: string }[],
): string {
  const guaranteedForm = [...template.body.initContainers, ...template.body.containers].every((n) => guaranteedNode(n, template) !== undefined);
  const conditions = [
    ...scopeCel(template),
    `!variables.ledger.contains(${celString(ledgerKey(template.name))})`,
    // The cases only the webhook does exactly: pod-level resources (their growth), names the API server refuses anyway.
    `!(${podLevelBudget})`,
    `${listOf('containers')}.all(c, c.name.matches('${dnsLabel}'))`,
    overridesValidCel(template),
    ...leftOutCel(template).map((r) => `!(${r.applies})`),
  ];
  // The app items are the same in every form (one variable); the ledger entry differs by form only (one variable).
  const appVariable = `appItems${index}`;
  const entryVariable = `entry${index}`;
  const sidecarForm = template.endsOnItsOwn ? template : templateInForm(template, 'sidecar');
  const forms = sidecarForm === template ? [template] : [template, sidecarForm];
  const entries = forms.map((f) => formPatch(template, f, exported, false, appVariable, appItems).ledgerEntry);
  appItems.push({ name: entryVariable, expression: entries.length === 1 ? entries[0]! : `variables.runsToCompletion ? ${entries[1]} : ${entries[0]}` });
  const variant = (formTemplate: Template, guaranteed: boolean) => {
    const { ops } = formPatch(template, formTemplate, exported, guaranteed, appVariable, appItems);
    return `${[mapsFirst(template), ops, ledgerPatch(template, `variables.${entryVariable}`)].filter((o) => o !== '').join(' + ')}`;
  };
  const byQos = (formTemplate: Template) =>
    guaranteedForm ? `(variables.guaranteed ? ${variant(formTemplate, true)} : ${variant(formTemplate, false)})` : variant(formTemplate, false);
  const patch = forms.length === 1 ? byQos(template) : `(variables.runsToCompletion ? ${byQos(sidecarForm)} : ${byQos(template)})`;
  return `${conditions.join(' &&\n')}\n? ${patch}\n: []`;
}

// ---------------------------------------------------------------------------------------------

const labels = {
  'app.kubernetes.io/name': 'sidecar-injector',
  'app.kubernetes.io/part-of': 'sidecar-injector',
  'app.kubernetes.io/component': 'exported-templates',
};

const podRules = { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }] };
const matchResources = {
  namespaceSelector: selectorJson(webhookScope.namespaceSelector),
  objectSelector: selectorJson(webhookScope.objectSelector),
};

/** The audit annotation `sidecar-injector-exported-guard/TEMPLATE`: the first rule that left the template out of the pod, if one did. */
function leftOutAnnotation(template: Template): JsonObject {
  const scope = scopeCel(template);
  const rules = leftOutCel(template);
  // Parenthesised: CEL's grammar takes no conditional in a conditional's then-branch.
  // '' when no rule applies: the API server leaves an empty annotation out (and types a string-or-null conditional as dyn, which it refuses).
  const which = rules.reduceRight((otherwise, r) => `((${r.applies}) ? ${celString(r.rule)} : ${otherwise})`, "''");
  return {
    key: template.name,
    valueExpression: `${scope.length === 0 ? 'true' : scope.join(' && ')} && !variables.ledger.contains(${celString(ledgerKey(template.name))}) ? ${which} : ''`,
  };
}

/**
 * What the webhook refuses of any pod in its scope, which the policy cannot refuse: a request
 * for a template that does not exist (selection/select.ts), a pod over the injector's bounds
 * (k8s/pod-validation.ts reviewLimits, k8s/pod.ts maxMetadataEntries).
 */
function podGuardValidations(set: TemplateSet): JsonObject[] {
  const request = `${podAnnotations}[${celString(AnnotationKeys.request)}]`;
  const count = (list: string) => `(has(object.spec.${list}) ? size(object.spec.${list}) : 0)`;
  const entries = (map: string) => `(has(${map}) ? size(${map}) : 0)`;
  return [
    {
      expression: `!${inMap(podAnnotations, AnnotationKeys.request)} || ${request}.split(',').all(n, n.trim() == '' || n.trim() in [${set.templates.map((t) => celString(t.name)).join(', ')}])`,
      message: `the pod's annotation ${AnnotationKeys.request} names a template that does not exist (sidecar-injector check lists them); the sidecar injector refuses such a pod`,
    },
    {
      expression: `${count('containers')} + ${count('initContainers')} + ${count('ephemeralContainers')} <= ${reviewLimits.maxContainers} && ${count('volumes')} <= ${reviewLimits.maxVolumes} && ${entries(podLabels)} <= ${maxMetadataEntries} && ${entries(podAnnotations)} <= ${maxMetadataEntries}`,
      message: `the pod is over the sidecar injector's bounds (${reviewLimits.maxContainers} containers, ${reviewLimits.maxVolumes} volumes, ${maxMetadataEntries} labels or annotations)`,
    },
  ];
}

/**
 * The guard's validations of `template`, on the pod as stored:
 * its overrides are ones the webhook accepts (else the webhook refuses the pod), and a pod
 * that budgets pod-level resources did not go without it (the policy cannot grow them: such
 * a pod is refused loudly rather than started without its sidecar).
 */
function guardValidations(template: Template): JsonObject[] {
  const scope = scopeCel(template);
  const inScope = scope.length === 0 ? 'true' : scope.join(' && ');
  const required =
    template.failurePolicy === 'Fail'
      ? [
          {
            // A required template a rule leaves out: the webhook refuses the pod (pipeline/decision.ts cannotInject).
            expression: `!(${inScope}) || variables.ledger.contains(${celString(ledgerKey(template.name))}) || !(${
              leftOutCel(template)
                .map((r) => `(${r.applies})`)
                .join(' || ') || 'false'
            })`,
            message: `required sidecar ${template.name} cannot be injected: a rule leaves it out of this pod (the API server's audit log names it: sidecar-injector-exported-guard/${template.name}; sidecar-injector why explains it)`,
          },
        ]
      : [];
  return [
    ...required,
    {
      expression: `!(${inScope}) || ${overridesValidCel(template)}`,
      message: `an annotation ${template.name}${overrideDomain}NAME on the pod names a parameter a pod may not override, or a value its declaration refuses (sidecar-injector check shows the template's parameters); the sidecar injector refuses such a pod`,
    },
    {
      expression: `!(${inScope}) || !(${podLevelBudget}) || variables.ledger.contains(${celString(ledgerKey(template.name))})`,
      message: `template ${template.name} is injected by the API server's MutatingAdmissionPolicy, which cannot grow the pod-level resources (spec.resources) by the sidecar's share as the webhook does: remove spec.resources from the pod, or have the webhook inject ${template.name} (delivery: webhook)`,
    },
  ];
}

/**
 * The MutatingAdmissionPolicy of the exportable templates of `set` (or of those named in
 * `only`), its binding, and the ValidatingAdmissionPolicy that refuses the pods the webhook
 * refuses for a bad override. Throws PolicyError when a template named in `only` cannot be
 * exported or does not exist.
 */
export function mutatingPolicies(set: TemplateSet, only?: readonly string[], apiVersion: MutatingPolicyApiVersion = 'v1'): ExportedPolicies {
  const refused: ExportRefusal[] = [];
  const chosen: Template[] = [];
  for (const name of only ?? []) if (!set.byName.has(name)) throw new PolicyError([`no template named ${JSON.stringify(name)} in the directory`]);
  // With templates marked `delivery: policy` (the hybrid install), those; else every one that can be.
  const marked = set.templates.filter((t) => t.delivery === 'policy').map((t) => t.name);
  const wanted = only ?? (marked.length > 0 ? marked : undefined);
  for (const template of set.templates) {
    if (wanted && !wanted.includes(template.name)) continue;
    const reasons = exportProblems(template, set);
    if (reasons.length > 0) refused.push({ template: template.name, reasons });
    else chosen.push(template);
  }
  if (wanted && refused.length > 0) throw new PolicyError(refused.flatMap((r) => r.reasons.map((reason) => `template ${r.template}: ${reason}`)));
  if (chosen.length === 0) return { apiVersion, exported: [], refused, objects: [] };
  // The webhooks' order: the required one is listed first in the configuration
  // (manifests/base/mutatingwebhookconfiguration.yaml), so its templates' volumes and app items
  // go in before the optional ones' (containers take their place by name whatever the order).
  chosen.sort((a, b) => webhookOrder.indexOf(a.failurePolicy) - webhookOrder.indexOf(b.failurePolicy));
  const appItems: { name: string; expression: string }[] = [];
  const paramItems: { name: string; expression: string }[] = [];
  let mutations: JsonObject[];
  paramVariables = new Map();
  try {
    chosen.forEach((t, i) =>
      [...t.declarations.values()]
        .filter((d) => d.override !== 'none')
        .forEach((d, j) => {
          paramItems.push({ name: `param${i}x${j}`, expression: paramValueCel(t, d.name) });
          paramVariables!.set(`${t.name}\0${d.name}`, `param${i}x${j}`);
        }),
    );
    // Each template's containers go in among the others' by name (formPatch), in whatever order the mutations run.
    mutations = chosen.map((t, i) => ({ patchType: 'JSONPatch', jsonPatch: { expression: mutationCel(t, set, chosen, i, appItems) } }));
  } finally {
    paramVariables = undefined;
  }
  const hashes = Object.fromEntries(chosen.map((t) => [`sidecar-injector.io/template-hash.${t.name}`, t.hash]));
  const policy: JsonObject = {
    apiVersion: `admissionregistration.k8s.io/${apiVersion}`,
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: exportedPolicyName, labels, annotations: { 'sidecar-injector.io/templates': chosen.map((t) => t.name).join(','), ...hashes } },
    spec: {
      // A mutation that cannot be evaluated: a required template's pod is refused, as the webhook's failurePolicy: Fail does.
      failurePolicy: chosen.some((t) => t.failurePolicy === 'Fail') ? 'Fail' : 'Ignore',
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: podRules,
      matchConditions: [
        ...webhookMatchConditions.map((c) => ({ name: c.name, expression: c.expression })),
        {
          name: 'within-the-injectors-bounds',
          expression: `${listOf('containers')}.size() + ${listOf('initContainers')}.size() <= ${reviewLimits.maxContainers}`,
        },
      ],
      variables: [
        { name: 'ledger', expression: ledgerVariable },
        { name: 'guaranteed', expression: guaranteedVariable },
        { name: 'runsToCompletion', expression: runsToCompletionVariable },
        { name: 'injectedContainers', expression: injectedContainersCel },
        { name: 'apps', expression: 'lists.range(size(object.spec.containers)).filter(i, !(object.spec.containers[i].name in variables.injectedContainers))' },
        ...paramItems,
        ...appItems,
      ],
      mutations,
    },
  };
  const binding: JsonObject = {
    apiVersion: `admissionregistration.k8s.io/${apiVersion}`,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: exportedPolicyName, labels },
    spec: { policyName: exportedPolicyName, matchResources },
  };
  const guard: JsonObject = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: `${exportedPolicyName}-guard`, labels },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: podRules,
      matchConditions: webhookMatchConditions.map((c) => ({ name: c.name, expression: c.expression })),
      variables: [
        { name: 'ledger', expression: ledgerVariable },
        { name: 'guaranteed', expression: guaranteedVariable },
      ],
      validations: [...podGuardValidations(set), ...chosen.flatMap(guardValidations)],
      // In the API server's audit log, per template the pod went without: the rule that left it out.
      auditAnnotations: chosen.map(leftOutAnnotation),
    },
  };
  const guardBinding: JsonObject = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: `${exportedPolicyName}-guard`, labels },
    spec: { policyName: `${exportedPolicyName}-guard`, validationActions: ['Deny'], matchResources },
  };
  return { apiVersion, exported: chosen.map((t) => t.name), refused, objects: [policy, binding, guard, guardBinding] };
}

/**
 * The names of the containers the ledger lists (every template's, in force or not): never app
 * containers (inject/trust.ts believes a claimed container present in the pod to be a sidecar).
 * Read once per mutation, not once per container. Container names are DNS labels in the
 * ledger's `"containers":[…]` lists; a `"containers":` inside a string is escaped (`\"`).
 */
const injectedContainersCel = `variables.ledger.findAll('"(initC|c)ontainers":\\\\[[^\\\\]]*\\\\]').map(l, l.substring(l.indexOf('[') + 1, size(l) - 1).split(',')).flatten().filter(n, size(n) > 2).map(n, n.substring(1, size(n) - 1))`;

/** The policies as multi-document YAML, under a comment saying what is exported and what is not. */
export function mutatingPoliciesYaml(result: ExportedPolicies): string {
  const header = [
    result.apiVersion === 'v1'
      ? 'Sidecar templates exported as a MutatingAdmissionPolicy (Kubernetes 1.36+): the API server injects them'
      : 'Sidecar templates exported as a MutatingAdmissionPolicy of the beta API (Kubernetes 1.35, with its feature gate): the API server injects them',
    'itself, with no webhook call. Generated by `sidecar-injector policies --mutating`; do not edit: generate',
    'them again when a template changes. See docs/map-export.md.',
    `Exported: ${result.exported.join(', ') || 'none'}.`,
    ...result.refused.map((r) => `Not exported: ${r.template}: ${r.reasons.join('; ')}.`),
  ];
  if (result.objects.length === 0) return `${header.map((l) => `# ${l}`).join('\n')}\n`;
  const documents = result.objects.map((o, i) => {
    const doc = new Document(o);
    if (i === 0) doc.commentBefore = header.map((l) => ` ${l}`).join('\n');
    return doc;
  });
  return documents.map((d) => d.toString({ lineWidth: 0 })).join('---\n');
}
