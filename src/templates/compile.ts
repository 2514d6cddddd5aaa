/**
 * Compiling a template document: validated (validate.ts), its values compiled to static JSON or
 * placeholder segments, its overridable values kept to harmless fields (override-reach.ts), and
 * its revision hashed from its content. Pure: takes a parsed YAML document, returns a compiled
 * template or the list of problems, each naming the field.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, deepFreeze, isJsonObject, type JsonObject } from '../k8s/json.js';
import type { TemplateProblem } from '../errors.js';
import { PlaceholderError } from '../errors.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { LabelKeys } from '../k8s/keys.js';
import { hasPlaceholder, parseSegments, renderSegments, type ParamValue, type Reference, type RenderContext, type Segment } from './placeholders.js';
import { compileDeclaration, type ParamDeclaration } from './parameters.js';
import { nearestName, schemaFieldProblems } from '../k8s/schema-fields.js';
import { cut } from '../quote.js';
import {
  appContainerFields,
  templateFailurePolicies,
  templateOptOuts,
  topLevelFields,
  updateStrategies,
  type Compiled,
  type InjectionMode,
  type Placement,
  type Template,
  type TemplateBody,
  type TemplateDelivery,
  type TemplateFailurePolicy,
  type TemplateOptOut,
  type InPlaceFacts,
  type MaxUnavailable,
  type UpdateStrategy,
} from './template.js';
import type { GuaranteedMode } from '../k8s/qos.js';
import {
  checkContainers,
  checkEnv,
  checkEnvFrom,
  checkMounts,
  checkNamedList,
  checkNativeSidecars,
  checkOs,
  checkSelector,
  checkStringMap,
  Problems,
} from './validate.js';
import { overrideReachProblems, type Use } from './override-reach.js';

/** `inPlaceMaxUnavailable` as written (a whole number of pods, or "N%"), or undefined when it is neither. */
function maxUnavailableOf(value: unknown): MaxUnavailable | undefined {
  if (value === undefined) return { pods: 1 };
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 1 && value <= 100_000 ? { pods: value } : undefined;
  const percent = typeof value === 'string' ? /^(100|[1-9][0-9]?)%$/.exec(value)?.[1] : undefined;
  return percent === undefined ? undefined : { percent: Number(percent) };
}

/** The references that depend on the pod or namespace (not literals, not parameters), each once. */
function uniqueReferences(references: readonly Reference[]): Reference[] {
  const seen = new Map<string, Reference>();
  for (const ref of references) {
    if (ref.source === 'literal' || ref.source === 'params') continue;
    seen.set(JSON.stringify(ref), ref);
  }
  return [...seen.values()];
}

/**
 * Compiles a value: map keys are always literal; a string with placeholders becomes segments;
 * a string that is exactly one `{{ params.X }}` keeps the parameter's type.
 * `literalFields` lists property names whose values must not hold placeholders (they name things).
 */
function compileValue(
  value: unknown,
  field: string,
  params: ReadonlySet<string>,
  problems: Problems,
  literalFields: ReadonlySet<string>,
  references: Reference[],
  uses: Use[] = [],
): Compiled {
  if (typeof value === 'string') {
    let segments: Segment[];
    try {
      segments = parseSegments(value, params);
    } catch (err) {
      problems.add(field, err instanceof PlaceholderError ? err.message : String(err));
      return { kind: 'static', value };
    }
    if (!hasPlaceholder(segments)) return { kind: 'static', value };
    for (const segment of segments) {
      if (segment.kind !== 'placeholder') continue;
      references.push(segment.ref);
      if (segment.ref.source === 'params' || segment.ref.source === 'pod.annotations') uses.push({ source: segment.ref.source, key: segment.ref.key, field });
    }
    const lastKey = field.slice(field.lastIndexOf('.') + 1);
    if (literalFields.has(lastKey)) {
      problems.add(field, 'names a thing and must be literal text: placeholders are not allowed here');
      return { kind: 'static', value };
    }
    const only = segments[0];
    if (segments.length === 1 && only?.kind === 'placeholder' && only.ref.source === 'params' && only.fallback === undefined) {
      return { kind: 'param', key: only.ref.key };
    }
    return { kind: 'string', segments };
  }
  if (Array.isArray(value)) {
    const items = value.map((item, i) => compileValue(item, `${field}[${i}]`, params, problems, literalFields, references, uses));
    return items.every((c) => c.kind === 'static') ? { kind: 'static', value: deepFreeze(value) } : { kind: 'array', items };
  }
  if (isJsonObject(value)) {
    const entries = Object.entries(value).map(([k, v]) => {
      if (k.includes('{{')) problems.add(`${field}.${k}`, 'map keys must be literal: placeholders are not allowed in keys');
      return [k, compileValue(v, `${field}.${k}`, params, problems, literalFields, references, uses)] as const;
    });
    return entries.every(([, c]) => c.kind === 'static') ? { kind: 'static', value: deepFreeze(value) } : { kind: 'object', entries };
  }
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return { kind: 'static', value };
  problems.add(field, `unsupported value of type ${typeof value}`);
  return { kind: 'static', value: null };
}

const namingFields = new Set(['name', 'mountPath']);

/** The fields an in-place update may change in a sidecar: `containers[0].image`, `initContainers[2].resources.limits.memory`. */
const inPlaceField = /^(?:init)?[cC]ontainers\[\d+\]\.(?:image|resources(?:\..*)?)$/;
/** A context no placeholder of a value that reads only fixed parameters looks at. */
const noPod: RenderContext = {
  pod: { name: '', generateName: '', namespace: '', serviceAccountName: '', labels: {}, annotations: {} },
  namespace: { name: '', labels: {} },
};

/** The value `node` renders to when it is the same in every pod (literal, or read from fixed parameters only); undefined when it varies. */
function fixedValue(node: Compiled, params: Readonly<Record<string, ParamValue>>, overridable: ReadonlySet<string>): { value: unknown } | undefined {
  switch (node.kind) {
    case 'static':
      return { value: node.value };
    case 'param':
      return overridable.has(node.key) ? undefined : { value: params[node.key] };
    case 'string':
      return node.segments.every((s) => s.kind === 'text' || s.ref.source === 'literal' || (s.ref.source === 'params' && !overridable.has(s.ref.key)))
        ? { value: renderSegments(node.segments, noPod, params) }
        : undefined;
    case 'array': {
      const items = node.items.map((item) => fixedValue(item, params, overridable));
      return items.every((i) => i !== undefined) ? { value: items.map((i) => i!.value) } : undefined;
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, value] of node.entries) {
        const fixed = fixedValue(value, params, overridable);
        if (!fixed) return undefined;
        out[key] = fixed.value;
      }
      return { value: out };
    }
  }
}

/** The field `key` of a compiled container, when it is the same in every pod: `{ value: undefined }` when the container has none. */
function fixedField(
  container: Compiled,
  key: string,
  params: Readonly<Record<string, ParamValue>>,
  overridable: ReadonlySet<string>,
): { value: unknown } | undefined {
  if (container.kind === 'static') return { value: isJsonObject(container.value) ? container.value[key] : undefined };
  if (container.kind !== 'object') return undefined;
  const field = container.entries.find(([k]) => k === key)?.[1];
  return field ? fixedValue(field, params, overridable) : { value: undefined };
}

/**
 * What an in-place update compares (template.ts InPlaceFacts): the content's hash with every
 * sidecar's image and resources blanked and the fixed parameters only those fields read left
 * out, and each image and each sidecar's resources that are the same in every pod.
 */
function inPlaceFactsOf(
  content: Record<string, unknown>,
  body: TemplateBody,
  params: Readonly<Record<string, ParamValue>>,
  overridable: ReadonlySet<string>,
  uses: readonly Use[],
): InPlaceFacts {
  const images = new Map<string, string>();
  const resources = new Map<string, JsonObject>();
  const resourcesText = new Map<string, string>();
  for (const list of ['containers', 'initContainers'] as const) {
    const raws = (content[list] as unknown[] | undefined) ?? [];
    body[list].forEach((compiled, i) => {
      const raw = raws[i];
      if (!isJsonObject(raw) || typeof raw.name !== 'string') return;
      const image = fixedField(compiled, 'image', params, overridable);
      if (typeof image?.value === 'string') images.set(raw.name, image.value);
      const own = fixedField(compiled, 'resources', params, overridable);
      if (own && (own.value === undefined || isJsonObject(own.value))) resources.set(raw.name, (own.value as JsonObject | undefined) ?? {});
      // The resources as written, with the values of the fixed parameters they read (an
      // overridable one's declaration is in the shape): equal texts render alike in every pod.
      const prefix = `${list}[${i}].resources`;
      const read = uses.filter((u) => u.source === 'params' && (u.field === prefix || u.field.startsWith(`${prefix}.`)) && !overridable.has(u.key));
      resourcesText.set(
        raw.name,
        canonicalJson({ resources: raw.resources ?? null, params: Object.fromEntries(read.map((u) => [u.key, params[u.key] ?? null])) }),
      );
    });
  }
  const readElsewhere = new Set(uses.filter((u) => u.source === 'params' && !inPlaceField.test(u.field)).map((u) => u.key));
  const inPlaceOnly = new Set(
    uses.filter((u) => u.source === 'params' && inPlaceField.test(u.field) && !readElsewhere.has(u.key) && !overridable.has(u.key)).map((u) => u.key),
  );
  const blank = (list: unknown) => (Array.isArray(list) ? list.map((c) => (isJsonObject(c) ? { ...c, image: '', resources: {} } : c)) : list);
  const { description: _description, ...rest } = content;
  const shaped: Record<string, unknown> = { ...rest, containers: blank(rest.containers), initContainers: blank(rest.initContainers) };
  if (isJsonObject(rest.parameters)) shaped.parameters = Object.fromEntries(Object.entries(rest.parameters).filter(([key]) => !inPlaceOnly.has(key)));
  return { shape: createHash('sha256').update(canonicalJson(shaped)).digest('hex').slice(0, 12), images, resources, resourcesText };
}

/**
 * Validates and compiles one template document from `file`. Returns the template, or every
 * problem found (each naming the field) so that a person can fix the file in one pass.
 */
export function compileTemplate(doc: unknown, file: string): { template?: Template; problems: TemplateProblem[] } {
  const problems = new Problems(file);
  if (!isJsonObject(doc)) {
    problems.add('', 'a template must be a YAML map');
    return { problems: problems.list };
  }
  // A Kubernetes object in the templates folder (a Deployment, the kustomization's ConfigMap): one problem, not one per field.
  if (typeof doc.kind === 'string' && typeof doc.apiVersion === 'string' && !topLevelFields.has('kind')) {
    problems.add('', `this is a Kubernetes ${cut(doc.kind, 60)}, not a sidecar template (a template has name, containers and the fields of docs/templates.md)`);
    return { problems: problems.list };
  }
  for (const key of Object.keys(doc)) {
    if (topLevelFields.has(key)) continue;
    const near = nearestName(key, [...topLevelFields]);
    problems.add(key, near ? `unknown field (did you mean ${near}?)` : `unknown field (expected one of ${[...topLevelFields].join(', ')})`);
  }
  const name = doc.name;
  if (typeof name !== 'string' || !isDns1123Label(name)) {
    problems.add('name', 'is required and must be a DNS-1123 label (lowercase letters, digits and "-", at most 63)');
  }
  const description = doc.description ?? '';
  if (typeof description !== 'string') problems.add('description', 'must be a string');
  const injection = doc.injection ?? 'automatic';
  if (injection !== 'automatic' && injection !== 'on-request') problems.add('injection', 'must be "automatic" or "on-request"');
  const placement = doc.placement ?? 'last';
  if (placement !== 'first' && placement !== 'last') problems.add('placement', 'must be "first" or "last"');
  if (doc.endsOnItsOwn !== undefined && typeof doc.endsOnItsOwn !== 'boolean') problems.add('endsOnItsOwn', 'must be true or false');
  const delivery = doc.delivery ?? 'webhook';
  if (delivery !== 'webhook' && delivery !== 'policy')
    problems.add(
      'delivery',
      'must be "webhook" (the injector injects it) or "policy" (the MutatingAdmissionPolicy of `sidecar-injector policies --mutating` does)',
    );
  const failurePolicy = doc.failurePolicy ?? 'Fail';
  if (!templateFailurePolicies.includes(failurePolicy as TemplateFailurePolicy)) {
    problems.add('failurePolicy', 'must be "Fail" (required: pods wait for the injector) or "Ignore" (optional)');
  }
  const optOut = doc.optOut ?? 'allow';
  if (!templateOptOuts.includes(optOut as TemplateOptOut))
    problems.add('optOut', 'must be "allow" (a pod labelled sidecar-injector.io/inject=disabled goes without it), "warn" or "deny"');
  else if (optOut !== 'allow' && failurePolicy === 'Ignore')
    problems.add(
      'optOut',
      `"${optOut as string}" is for a required template (failurePolicy: Fail); an optional template's sidecars may always be opted out of`,
    );
  const updateStrategy = doc.updateStrategy ?? 'recreate';
  if (!updateStrategies.includes(updateStrategy as UpdateStrategy))
    problems.add(
      'updateStrategy',
      'must be "recreate" (running pods get a new revision when they are recreated) or "inPlace" (a new image is set in the running pods)',
    );
  const inPlaceMaxUnavailable = maxUnavailableOf(doc.inPlaceMaxUnavailable);
  if (!inPlaceMaxUnavailable)
    problems.add('inPlaceMaxUnavailable', 'must be a whole number of pods from 1 to 100000 (default 1) or a share of a workload\'s pods from "1%" to "100%"');
  if (doc.resourcesManagedElsewhere !== undefined && typeof doc.resourcesManagedElsewhere !== 'boolean')
    problems.add('resourcesManagedElsewhere', 'must be true or false');
  const guaranteedPods = doc.guaranteedPods ?? 'requests-from-limits';
  if (guaranteedPods !== 'requests-from-limits' && guaranteedPods !== 'limits-from-requests') {
    problems.add(
      'guaranteedPods',
      'must be "requests-from-limits" (in a Guaranteed pod its containers request what they limit) or "limits-from-requests" (they limit what they request)',
    );
  }

  const params: Record<string, ParamValue> = {};
  const declarations = new Map<string, ParamDeclaration>();
  if (doc.parameters !== undefined && doc.parameters !== null) {
    if (!isJsonObject(doc.parameters)) problems.add('parameters', 'must be a map of names to values');
    else {
      for (const [key, value] of Object.entries(doc.parameters)) {
        if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) problems.add(`parameters.${key}`, 'parameter names are letters, digits, "_" and "-"');
        if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
          if (typeof value === 'string' && value.includes('{{')) problems.add(`parameters.${key}`, 'parameter values cannot hold placeholders');
          params[key] = value;
        } else if (isJsonObject(value)) {
          const declaration = compileDeclaration(key, value, (field, message) => problems.add(field, message));
          if (declaration) {
            if (typeof declaration.default === 'string' && declaration.default.includes('{{'))
              problems.add(`parameters.${key}.default`, 'cannot hold placeholders');
            params[key] = declaration.default;
            declarations.set(key, declaration);
          } else params[key] = '';
        } else problems.add(`parameters.${key}`, 'must be a string, number or boolean, or a declaration (default, type, override, …)');
      }
    }
  }
  const paramNames = new Set(Object.keys(params));
  const namespaceSelector = checkSelector(doc.namespaceSelector, 'namespaceSelector', problems);
  const objectSelector = checkSelector(doc.objectSelector, 'objectSelector', problems);
  if (optOut !== 'allow' && objectSelector.requirements.some((r) => r.key === LabelKeys.podOptOut))
    problems.add('objectSelector', `names ${LabelKeys.podOptOut}, the opt-out label, which optOut: ${optOut as string} judges: select pods by other labels`);

  const containerNames = new Set<string>();
  const containers = checkNamedList(doc.containers, 'containers', problems, containerNames, 'container');
  const initContainers = checkNamedList(doc.initContainers, 'initContainers', problems, containerNames, 'container');
  const volumeNames = new Set<string>();
  const volumes = checkNamedList(doc.volumes, 'volumes', problems, volumeNames, 'volume');
  checkContainers(containers, 'containers', volumeNames, problems);
  checkContainers(initContainers, 'initContainers', volumeNames, problems);

  let appEnv: unknown[] = [];
  let appEnvFrom: unknown[] = [];
  let appMounts: unknown[] = [];
  const app = doc.appContainers;
  if (app !== undefined && app !== null) {
    if (!isJsonObject(app)) problems.add('appContainers', 'must be a map with env, envFrom and/or volumeMounts');
    else {
      for (const key of Object.keys(app)) {
        if (!appContainerFields.has(key)) {
          const near = nearestName(key, [...appContainerFields]);
          problems.add(`appContainers.${key}`, `unknown field (${near ? `did you mean ${near}? ` : ''}expected env, envFrom or volumeMounts)`);
        }
      }
      appEnv = checkEnv(app.env, 'appContainers.env', problems);
      appEnvFrom = checkEnvFrom(app.envFrom, 'appContainers.envFrom', problems);
      if (app.volumeMounts !== undefined && app.volumeMounts !== null) {
        if (!Array.isArray(app.volumeMounts)) problems.add('appContainers.volumeMounts', 'must be a list');
        else {
          appMounts = app.volumeMounts;
          checkMounts(appMounts, 'appContainers.volumeMounts', volumeNames, problems);
        }
      }
    }
  }
  const labels = checkStringMap(doc.labels, 'labels', problems, true);
  const annotations = checkStringMap(doc.annotations, 'annotations', problems, false);
  const pullSecrets = checkNamedList(doc.imagePullSecrets, 'imagePullSecrets', problems, new Set(), 'imagePullSecret');
  // Every field the Kubernetes schema does not have: the API server would refuse it (or drop it).
  // The fields the schema refuses: a value under one is not blamed again for where it reaches (below).
  const unknownFields: string[] = [];
  const schemaCheck = (items: readonly unknown[], type: string, field: string) =>
    items.forEach((item, i) => {
      for (const problem of schemaFieldProblems(item, type, `${field}[${i}]`)) {
        problems.add(problem.field, problem.message);
        unknownFields.push(problem.field);
      }
    });
  schemaCheck(containers, 'V1Container', 'containers');
  schemaCheck(initContainers, 'V1Container', 'initContainers');
  schemaCheck(volumes, 'V1Volume', 'volumes');
  schemaCheck(appEnv, 'V1EnvVar', 'appContainers.env');
  schemaCheck(appEnvFrom, 'V1EnvFromSource', 'appContainers.envFrom');
  schemaCheck(appMounts, 'V1VolumeMount', 'appContainers.volumeMounts');
  schemaCheck(pullSecrets, 'V1LocalObjectReference', 'imagePullSecrets');
  const os = checkOs(doc.os, [...containers, ...initContainers], problems);
  const native = checkNativeSidecars(doc.nativeSidecars, initContainers, problems);

  const allReferences: Reference[] = [];
  const uses: Use[] = [];
  const compileList = (list: readonly unknown[], field: string) =>
    list.map((item, i) => compileValue(item, `${field}[${i}]`, paramNames, problems, namingFields, allReferences, uses));
  const compileMap = (entries: [string, unknown][], field: string) =>
    entries.map(([k, v]) => [k, compileValue(v, `${field}.${k}`, paramNames, problems, namingFields, allReferences, uses)] as const);
  const body: TemplateBody = {
    containers: compileList(containers, 'containers'),
    initContainers: compileList(initContainers, 'initContainers'),
    volumes: compileList(volumes, 'volumes'),
    appEnv: compileList(appEnv, 'appContainers.env'),
    appEnvFrom: compileList(appEnvFrom, 'appContainers.envFrom'),
    appVolumeMounts: compileList(appMounts, 'appContainers.volumeMounts'),
    labels: compileMap(labels, 'labels'),
    annotations: compileMap(annotations, 'annotations'),
    imagePullSecrets: compileList(pullSecrets, 'imagePullSecrets'),
  };
  const overridable = new Set([...declarations.values()].filter((d) => d.override !== 'none').map((d) => d.name));
  // A value under a field the schema refused (unknown or misplaced) is not blamed again: where it would end up is unknown.
  const under = (field: string) => unknownFields.some((f) => field === f || field.startsWith(`${f}.`) || field.startsWith(`${f}[`));
  const placed = uses.filter((use) => !under(use.field));
  for (const { field, message } of overrideReachProblems(placed, declarations, doc)) problems.add(field, message);
  if (problems.list.length > 0) return { problems: problems.list };
  // The revision is what a pod gets: who delivers it (the webhooks or the exported policy) is no
  // part of it, so moving a template between them leaves every pod that carries it current.
  // Nor is whether a pod may opt out of it: that decides admission, not what a pod carries.
  // Nor how running pods get it, nor who sets its sidecars' resources once it is injected.
  const {
    delivery: _delivery,
    optOut: _optOut,
    updateStrategy: _updateStrategy,
    inPlaceMaxUnavailable: _inPlaceMaxUnavailable,
    resourcesManagedElsewhere: _resourcesManagedElsewhere,
    ...content
  } = doc;
  const canonical = canonicalJson(content);
  const hash = createHash('sha256').update(canonical).digest('hex').slice(0, 12);
  const template: Template = {
    name: name as string,
    description: description as string,
    file,
    hash,
    injection: injection as InjectionMode,
    placement: placement as Placement,
    namespaceSelector,
    objectSelector,
    params: Object.freeze(params),
    declarations,
    overridable,
    body,
    os,
    nativeSidecars: native.names,
    nativeSidecarFallback: native.fallback,
    form: 'native',
    failurePolicy: failurePolicy as TemplateFailurePolicy,
    guaranteedPods: guaranteedPods as GuaranteedMode,
    endsOnItsOwn: doc.endsOnItsOwn === true,
    delivery: delivery as TemplateDelivery,
    optOut: optOut as TemplateOptOut,
    updateStrategy: updateStrategy as UpdateStrategy,
    inPlaceMaxUnavailable: inPlaceMaxUnavailable!,
    resourcesManagedElsewhere: doc.resourcesManagedElsewhere === true,
    inPlaceFacts: inPlaceFactsOf(content, body, params, overridable, uses),
    references: uniqueReferences(allReferences),
    placeholderCount: allReferences.length,
    staticBytes: canonical.length,
  };
  return { template, problems: [] };
}
