/**
 * Required sidecars held by the API server itself: for every required template
 * (`failurePolicy: Fail`) a ValidatingAdmissionPolicy and its binding
 * (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30). The binding selects the pods the
 * template applies to — its selectors combined with the opt-in and opt-out labels and the
 * namespaces the webhooks never see; the policy's matchConditions add what labels cannot say
 * (mirror pods, the pod's operating system, the on-request annotation); its validations check
 * that the pod as stored carries each container of the template, by name, in the list the
 * template uses, running the template's image repository. The policy sees the final pod, after
 * every mutating webhook: a sidecar removed or changed after us is caught there.
 *
 * The rules are admission's (selection/select.ts, k8s/pod.ts podOs, pipeline/admit.ts): a
 * required template that applies and cannot be injected denies the pod, so every admitted pod
 * it applies to carries it. Pure: a template set in, plain objects and their YAML out.
 * docs/required-policies.md says what they guarantee and how to run them.
 *
 * Cost (the API server's runtime cost, k8s.io/apiserver pkg/apis/cel/config.go, counted as
 * cel-go interpreter/runtimecost.go does): VAP expressions are compiled against a dynamic
 * `object`, so there is no estimate at creation; each expression is stopped at PerCallLimit
 * (1,000,000) while it runs, and all of a binding's expressions share RuntimeCELCostBudget
 * (10,000,000; matchConditions 2,500,000). Every expression here is linear in the pod with a
 * small factor, and `costBounds` computes its bound from the shapes below:
 * - a validation first checks the injector's own bound on containers (250,
 *   k8s/pod-validation.ts reviewLimits) with `size()` (cost 1), so no list longer than that is
 *   ever walked;
 * - each walk is an `exists` whose step compares the name with a literal (a string `==` costs
 *   a tenth of the shorter side: at most 7 for a 63-character name), about 12 a step;
 * - the image is tested on at most one container per list (names are unique in a pod, and
 *   validating admission runs after pod validation) and only when it is at most 1,024
 *   characters long: `matches` costs ceil(0.1 × (1 + subject)) × ceil(0.25 × pattern), so an
 *   image of 3 MiB is refused before the regular expression sees it;
 * - the on-request test is one `matches` over the annotation, at most 256 KiB (R-66).
 */
import { Document } from 'yaml';
import { PolicyError } from '../errors.js';
import { imageReference } from '../k8s/contains.js';
import type { JsonObject } from '../k8s/json.js';
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { osNodeLabels } from '../k8s/pod.js';
import { goSpaceClass, trimSpace } from '../k8s/space.js';
import { maxAnnotationBytes, reviewLimits } from '../k8s/pod-validation.js';
import type { Selector } from '../k8s/selector.js';
import { celString } from '../k8s/cel.js';
import { matchConditions as webhookMatchConditions } from '../pipeline/match-conditions.js';
import type { TemplateSet } from '../templates/set.js';
import type { Compiled, Template } from '../templates/template.js';

/** What the API server does with a failed validation of the binding: refuse, warn the client, record in the audit log. */
export type ValidationAction = 'Deny' | 'Warn' | 'Audit';
export const validationActions: readonly ValidationAction[] = ['Deny', 'Warn', 'Audit'];

/** Until an operator switches to Deny: the client is warned and the audit log records it. */
export const defaultValidationActions: readonly ValidationAction[] = ['Warn', 'Audit'];

/**
 * The pods the webhooks are called for at all (manifests/base/mutatingwebhookconfiguration.yaml,
 * held equal by a test): opted-in namespaces except the system ones and the injector's own,
 * pods not opted out. Admission never sees the others, so no policy may judge them.
 */
export const webhookScope = {
  namespaceSelector: {
    matchExpressions: [
      { key: LabelKeys.namespaceOptIn, operator: 'In', values: [LabelValues.enabled] },
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', 'sidecar-injector'] },
    ],
  },
  objectSelector: { matchExpressions: [{ key: LabelKeys.podOptOut, operator: 'NotIn', values: [LabelValues.disabled] }] },
} as const;

/** The API server's CEL limits (k8s.io/apiserver pkg/apis/cel/config.go). */
export const celLimits = { perCall: 1_000_000, perBinding: 10_000_000, matchConditions: 2_500_000 } as const;

/** Longest image a policy tests against its pattern: longer than any image reference (name ≤ 255, tag ≤ 128, digest). */
export const maxImageLength = 1024;

/** One generated policy with its binding, and what it cannot check. */
export interface RequiredPolicy {
  readonly template: string;
  /** What it holds: the template's sidecars in the pods it applies to, or its optOut in the pods that opt out. */
  readonly subject: 'sidecars' | 'opt-out';
  readonly policy: JsonObject;
  readonly binding: JsonObject;
  /** Sentences on what this policy does not check (an image a pod may override), for the YAML and stderr. */
  readonly notes: readonly string[];
  /** Worst-case runtime cost of each expression, and the sum the binding spends (see the module comment). */
  readonly cost: { readonly maxPerExpression: number; readonly perBinding: number; readonly matchConditions: number };
}

/** Options of `requiredPolicies`. */
export interface PolicyOptions {
  /** @default ['Warn', 'Audit'] */
  readonly validationActions?: readonly ValidationAction[];
}

/** Reads `Warn,Audit` or `Deny`; returns the actions or the problem as a sentence. The API server refuses Deny with Warn. */
export function parseValidationActions(text: string): readonly ValidationAction[] | string {
  const words = text.split(',').map(trimSpace);
  const unknown = words.filter((w) => !validationActions.includes(w as ValidationAction));
  if (unknown.length > 0 || words.length === 0) {
    return `--validation-actions ${JSON.stringify(text.slice(0, 100))}: each must be one of ${validationActions.join(', ')} (e.g. Warn,Audit or Deny)`;
  }
  const actions = [...new Set(words as ValidationAction[])];
  if (actions.length !== words.length) return `--validation-actions ${JSON.stringify(text)}: an action is named twice`;
  if (actions.includes('Deny') && actions.includes('Warn'))
    return `--validation-actions ${text}: Deny and Warn cannot be combined (the API server refuses it); use Deny or Deny,Audit`;
  return actions;
}

/** A place a pod may hold a template's container in: spec.containers, or spec.initContainers with or without restartPolicy: Always. */
type Place = 'container' | 'native-sidecar' | 'init-container';

/** One container a pod must carry. */
interface RequiredContainer {
  readonly name: string;
  /** Accepted places, in the template's own form first. */
  readonly places: readonly Place[];
  /** Accepted repository spellings; undefined: the image is not checked (see `imageNote`). */
  readonly repositories?: readonly string[];
  /** The repositories as a person names them (Docker Hub's defaults spelled out). */
  readonly shown?: readonly string[];
  readonly imageNote?: string;
}

/** A repository as a regular expression that RE2 and ECMAScript read alike: `.` in a class, nothing else special. */
const plainRepository = /^[A-Za-z0-9._/:-]+$/;
const regexRepository = (repository: string): string => repository.replace(/\./g, '[.]');

/** The spellings a container runtime reads as the same repository (Docker Hub's defaults, k8s/contains.ts). */
function spellings(image: string): string[] {
  const { name } = imageReference(image);
  const library = 'docker.io/library/';
  if (name.startsWith(library)) {
    const short = name.slice(library.length);
    return [short, `library/${short}`, `docker.io/${short}`, name];
  }
  if (name.startsWith('docker.io/')) return [name.slice('docker.io/'.length), name];
  return [name];
}

/** Every value a string node can render to, when they are known in advance and few; else undefined. */
function possibleValues(node: Compiled | undefined, template: Template): string[] | undefined {
  const ofParam = (key: string): string[] | undefined => {
    if (!template.overridable.has(key)) return [String(template.params[key] ?? '')];
    const declaration = template.declarations.get(key);
    return declaration?.type === 'enum' && declaration.values ? [...declaration.values] : undefined;
  };
  if (!node) return undefined;
  if (node.kind === 'static') return typeof node.value === 'string' ? [node.value] : undefined;
  if (node.kind === 'param') return ofParam(node.key);
  if (node.kind !== 'string') return undefined;
  let values = [''];
  for (const segment of node.segments) {
    let parts: string[] | undefined;
    if (segment.kind === 'text') parts = [segment.text];
    else if (segment.ref.source === 'literal') parts = [segment.ref.text];
    else if (segment.ref.source === 'params') parts = ofParam(segment.ref.key)?.map((v) => (v === '' ? (segment.fallback ?? '') : v));
    if (!parts) return undefined;
    values = values.flatMap((v) => parts.map((p) => v + p));
    if (values.length > 64) return undefined;
  }
  return values;
}

function field(node: Compiled, key: string): Compiled | undefined {
  if (node.kind === 'static') {
    const value = (node.value as JsonObject)[key];
    return value === undefined ? undefined : { kind: 'static', value };
  }
  if (node.kind === 'object') return node.entries.find(([k]) => k === key)?.[1];
  return undefined;
}

/** The template's containers with where they go and the repositories they may run. */
function requiredContainers(template: Template): RequiredContainer[] {
  const native = new Set(template.nativeSidecars);
  const out: RequiredContainer[] = [];
  const add = (node: Compiled, list: 'containers' | 'initContainers') => {
    // Names are literal text (templates/template.ts refuses placeholders in them), so the node is static.
    const nameNode = field(node, 'name');
    const name = nameNode?.kind === 'static' ? String(nameNode.value) : '';
    let places: Place[];
    // A pod that runs to completion gets a template's ordinary containers as native sidecars (templates/forms.ts, the sidecar form).
    if (list === 'containers') places = template.endsOnItsOwn ? ['container'] : ['container', 'native-sidecar'];
    else if (!native.has(name)) places = ['init-container'];
    // Clusters below 1.29 get the ordinary-container form of a template whose fallback is container (templates/forms.ts).
    else places = template.nativeSidecarFallback === 'container' ? ['native-sidecar', 'container'] : ['native-sidecar'];
    const values = possibleValues(field(node, 'image'), template);
    const repositories = values?.every((v) => plainRepository.test(imageReference(v).name)) ? [...new Set(values.flatMap(spellings))].sort() : undefined;
    // An image a namespace or pod may override to any value its pattern allows, or one built from the
    // pod's values: only the name can be checked (the injector checks the value against the declaration).
    const imageNote = repositories
      ? undefined
      : `the image of container ${name} is not checked (it depends on the pod, its namespace or an override); only its name and place are`;
    const shown = repositories ? [...new Set(values!.map((v) => imageReference(v).name))].sort() : undefined;
    out.push({ name, places, ...(repositories ? { repositories, shown } : {}), ...(imageNote ? { imageNote } : {}) });
  };
  for (const node of template.body.initContainers) add(node, 'initContainers');
  for (const node of template.body.containers) add(node, 'containers');
  return out;
}

const initList = 'object.spec.initContainers';
const mainList = 'object.spec.containers';
const sizeOf = (list: string) => `(has(${list}) ? size(${list}) : 0)`;
/** The injector's own bound, checked in O(1) before any list is walked (module comment). */
const withinBound = `${sizeOf(mainList)} + ${sizeOf(initList)} <= ${reviewLimits.maxContainers}`;

/** The regular expression an image of `container` must match: one of its repository spellings, then any tag or digest. */
function imagePattern(container: RequiredContainer): string | undefined {
  if (!container.repositories) return undefined;
  return `^(?:${container.repositories.map(regexRepository).join('|')})(?:[:@][^/]*)?$`;
}

const isNative = "has(c.restartPolicy) && c.restartPolicy == 'Always'";

/** True when the pod holds `container` in `place`, with its image. */
function heldIn(container: RequiredContainer, place: Place): string {
  const pattern = imagePattern(container);
  const test = [
    `c.name == ${celString(container.name)}`,
    ...(place === 'native-sidecar' ? [isNative] : place === 'init-container' ? [`!(${isNative})`] : []),
    ...(pattern ? [`has(c.image) && size(c.image) <= ${maxImageLength} && c.image.matches(${celString(pattern)})`] : []),
  ].join(' && ');
  const list = place === 'container' ? mainList : initList;
  return `(has(${list}) && ${list}.exists(c, ${test}))`;
}

function anyWithName(name: string): string {
  const exists = (list: string) => `(has(${list}) && ${list}.exists(c, c.name == ${celString(name)}))`;
  return `${exists(initList)} || ${exists(mainList)}`;
}

const placeText: Record<Place, string> = {
  'native-sidecar': 'as a native sidecar (spec.initContainers with restartPolicy: Always)',
  container: 'in spec.containers',
  'init-container': 'in spec.initContainers',
};

/** What the pod must hold, as a person reads it. */
function requirementText(container: RequiredContainer): string {
  const image = container.shown ? ` running ${container.shown.join(' or ')} (any tag or digest)` : '';
  return `a container named ${container.name}${image} ${container.places.map((p) => placeText[p]).join(', or ')}`;
}

function remedy(template: Template): string {
  // A template that refuses the opt-out (optOut: deny) is not told to be opted out of.
  const optOut =
    template.injection === 'on-request'
      ? `; or remove ${template.name} from the pod's annotation ${AnnotationKeys.request}`
      : template.optOut === 'deny'
        ? ''
        : `; or label the pod ${LabelKeys.podOptOut}=${LabelValues.disabled} (no sidecars at all)`;
  return `The sidecar injector adds it when the pod is created: check that the injector is running and that no later admission webhook removes or changes it, then create the pod again${optOut}.`;
}

/** The pod's operating system as admission reads it (k8s/pod.ts podOs): spec.os.name, else an OS node selector, else required node affinity on Windows in every term, else linux. */
const requiredTerms = 'object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution';
const selectorOs = (label: string) =>
  `has(object.spec.nodeSelector) && '${label}' in object.spec.nodeSelector && object.spec.nodeSelector['${label}'] in ['linux', 'windows'] ? object.spec.nodeSelector['${label}'] : `;
export const podOs =
  '(has(object.spec.os) && has(object.spec.os.name) ? object.spec.os.name : ' +
  osNodeLabels.map(selectorOs).join('') +
  `has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && has(${requiredTerms}) && has(${requiredTerms}.nodeSelectorTerms) && size(${requiredTerms}.nodeSelectorTerms) > 0 && ` +
  `${requiredTerms}.nodeSelectorTerms.all(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in [${osNodeLabels.map((l) => `'${l}'`).join(', ')}] && e.operator == 'In' && has(e.values) && size(e.values) > 0 && e.values.all(v, v == 'windows'))) ? 'windows' : 'linux')`;

/** The white space selection/select.ts trims from each requested name (k8s/space.ts: Go's, which CEL's trim() removes too). */
const trimmed = `[${goSpaceClass}]*`;

/** The on-request pattern: the comma-separated list names the template, spaces trimmed. */
export const requestPattern = (template: Template) => `(^|,)${trimmed}${template.name}${trimmed}(,|$)`;

function conditions(template: Template): JsonObject[] {
  const out: JsonObject[] = webhookMatchConditions.map((c) => ({ name: c.name, expression: c.expression }));
  if (!(template.os.includes('linux') && template.os.includes('windows'))) {
    out.push({ name: 'runs-on-a-supported-os', expression: `${podOs} in [${template.os.map((os) => `'${os}'`).join(', ')}]` });
  }
  if (template.injection === 'on-request') {
    // One regular expression (cost: module comment); its class is written with CEL escapes.
    out.push({
      name: 'requests-the-template',
      expression: `has(object.metadata.annotations) && '${AnnotationKeys.request}' in object.metadata.annotations && object.metadata.annotations['${AnnotationKeys.request}'].matches(${celString(requestPattern(template))})`,
    });
  }
  return out;
}

function validation(template: Template, container: RequiredContainer): JsonObject {
  const requirement = requirementText(container);
  const unchecked = container.imageNote ? ` (${container.imageNote})` : '';
  const lead = `template ${template.name} is required for this pod and needs ${requirement}${unchecked}`;
  const missing = `required sidecar missing: ${lead}; the pod has no container named ${container.name}. ${remedy(template)}`;
  const altered = `required sidecar altered: ${lead}; the pod's container ${container.name} is not that (another list or another image). ${remedy(template)}`;
  const tooLarge = `required sidecar not checked: the pod has more than ${reviewLimits.maxContainers} containers and init containers, which the sidecar injector refuses; ${lead}.`;
  return {
    expression: `${withinBound} && (${container.places.map((p) => heldIn(container, p)).join(' || ')})`,
    message: `required sidecar missing or altered: ${lead}. ${remedy(template)}`,
    messageExpression: `!(${withinBound}) ? ${celString(tooLarge)} : ${anyWithName(container.name)} ? ${celString(altered)} : ${celString(missing)}`,
  };
}

const ceilTenth = (n: number) => Math.ceil(n * 0.1);
const matchesCost = (subject: number, pattern: number) => Math.ceil(0.1 * (1 + subject)) * Math.ceil(0.25 * pattern);
/** A step of `exists` whose body compares a name: the loop's own work (3), the select (2), the comparison, and slack. */
const stepCost = (name: string) => 3 + 2 + ceilTenth(Math.min(63, name.length)) + 5;
const listWalk = (name: string) => reviewLimits.maxContainers * stepCost(name) + 10;

/** Worst-case runtime cost of a validation's expression and of its messageExpression (two expressions, one budget). */
function validationCost(container: RequiredContainer): [expression: number, message: number] {
  const pattern = imagePattern(container);
  const imageCost = pattern ? 10 + matchesCost(maxImageLength, pattern.length) : 0;
  // The messageExpression is evaluated for every validation, passed or not: it walks both lists by name.
  return [20 + container.places.length * (listWalk(container.name) + imageCost + 10), 20 + 2 * listWalk(container.name)];
}

function conditionCost(template: Template, condition: JsonObject): number {
  return condition.name === 'requests-the-template' ? 30 + matchesCost(maxAnnotationBytes, requestPattern(template).length) : 30;
}

export function selectorJson(...selectors: (Selector | { readonly matchExpressions: readonly JsonObject[] })[]): JsonObject {
  const expressions: JsonObject[] = [];
  const seen = new Set<string>();
  for (const selector of selectors) {
    const list: readonly JsonObject[] =
      'requirements' in selector
        ? selector.requirements.map((r) => ({
            key: r.key,
            operator: r.operator,
            ...(r.operator === 'In' || r.operator === 'NotIn' ? { values: [...r.values] } : {}),
          }))
        : selector.matchExpressions;
    for (const expression of list) {
      const text = JSON.stringify(expression);
      if (seen.has(text)) continue;
      seen.add(text);
      expressions.push({ ...expression, ...(expression.values ? { values: [...(expression.values as string[])] } : {}) });
    }
  }
  return { matchExpressions: expressions };
}

/**
 * Labels and annotations a template adds that a required template's policy reads: the policy
 * sees the pod after injection, admission before, so they would judge different pods.
 */
function conflicts(set: TemplateSet, required: readonly Template[]): string[] {
  const problems: string[] = [];
  for (const guarded of required) {
    const readLabels = new Set([LabelKeys.podOptOut as string, ...guarded.objectSelector.requirements.map((r) => r.key)]);
    for (const other of set.templates) {
      for (const [key] of other.body.labels) {
        if (readLabels.has(key))
          problems.push(`template ${other.name} adds the pod label ${key}, which the policy of required template ${guarded.name} reads: drop one or the other`);
      }
      for (const [key] of other.body.annotations) {
        if (key === AnnotationKeys.request || key === AnnotationKeys.mirror)
          problems.push(`template ${other.name} adds the pod annotation ${key}, which the policy of required template ${guarded.name} reads: drop it`);
      }
    }
  }
  return problems;
}

const labelsOf = (template: Template) => ({
  'app.kubernetes.io/name': 'sidecar-injector',
  'app.kubernetes.io/part-of': 'sidecar-injector',
  'app.kubernetes.io/component': 'required-sidecar-policy',
  'sidecar-injector.io/template': template.name,
});

/**
 * The policy and binding of every required template of `set`, sorted by template name.
 * Throws PolicyError when a policy could not judge the pods admission judges (a template adds
 * a label or annotation a policy reads) or when an expression could exceed the API server's
 * cost limits.
 */
export function requiredPolicies(set: TemplateSet, options: PolicyOptions = {}): RequiredPolicy[] {
  const actions = options.validationActions ?? defaultValidationActions;
  const required = set.templates.filter((t) => t.failurePolicy === 'Fail');
  const problems = conflicts(set, required);
  const out: RequiredPolicy[] = [];
  for (const template of required) {
    const name = `sidecar-injector-required-${template.name}`;
    const containers = requiredContainers(template);
    // A template that adds no container leaves nothing a policy could find (and a policy needs a validation).
    if (containers.length === 0) {
      if (template.optOut !== 'allow') out.push(optOutPolicy(template));
      continue;
    }
    const matchConditions = conditions(template);
    const validations = containers.map((c) => validation(template, c));
    const perValidation = containers.flatMap(validationCost);
    const perCondition = matchConditions.map((c) => conditionCost(template, c));
    const cost = {
      maxPerExpression: Math.max(...perValidation, ...perCondition),
      perBinding: perValidation.reduce((a, b) => a + b, 0),
      matchConditions: perCondition.reduce((a, b) => a + b, 0),
    };
    if (cost.maxPerExpression > celLimits.perCall || cost.perBinding > celLimits.perBinding || cost.matchConditions > celLimits.matchConditions) {
      problems.push(
        `template ${template.name}: its policy could cost ${JSON.stringify(cost)} at run time, over the API server's limits ${JSON.stringify(celLimits)}`,
      );
    }
    const metadata = { name, labels: labelsOf(template), annotations: { 'sidecar-injector.io/template-hash': template.hash } };
    const policy: JsonObject = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata,
      spec: {
        // An expression that cannot be evaluated counts as a failed validation (then validationActions decide).
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }],
        },
        matchConditions,
        validations,
      },
    };
    const binding: JsonObject = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name, labels: labelsOf(template) },
      spec: {
        policyName: name,
        validationActions: [...actions],
        matchResources: {
          // LabelSelector requirements are ANDed: the webhooks' scope and the template's own selector.
          namespaceSelector: selectorJson(webhookScope.namespaceSelector, template.namespaceSelector),
          objectSelector: selectorJson(webhookScope.objectSelector, template.objectSelector),
        },
      },
    };
    out.push({
      template: template.name,
      subject: 'sidecars',
      policy,
      binding,
      notes: containers.flatMap((c) => (c.imageNote ? [`${template.name}: ${c.imageNote}`] : [])),
      cost,
    });
    if (template.optOut !== 'allow') out.push(optOutPolicy(template));
  }
  if (problems.length > 0) throw new PolicyError(problems);
  return out;
}

/** The expression true for a pod that carries the opt-out label. */
const optedOut = `has(object.metadata.labels) && '${LabelKeys.podOptOut}' in object.metadata.labels && object.metadata.labels['${LabelKeys.podOptOut}'] == '${LabelValues.disabled}'`;

/**
 * The policy of a required template that does not let pods opt out (`optOut: warn` or `deny`):
 * its binding selects the opted-out pods the template would otherwise apply to (the pods the
 * template's own policy never sees), and refuses them (deny) or warns (warn) whatever
 * `--validation-actions` says: the template's author chose. It holds while the injector is down.
 */
function optOutPolicy(template: Template): RequiredPolicy {
  const name = `sidecar-injector-required-${template.name}-opt-out`;
  const matchConditions = conditions(template);
  const stopRequesting = template.injection === 'on-request' ? `, or stop requesting it in annotation ${AnnotationKeys.request}` : '';
  const message = `pod has label ${LabelKeys.podOptOut}=${LabelValues.disabled}, and the required template ${template.name} applies to it and ${template.optOut === 'deny' ? 'does not let a pod opt out (optOut: deny)' : 'asks that pods run it (optOut: warn)'}: remove the label${stopRequesting}, or ask the platform team to change the template's selectors or optOut`;
  const perCondition = matchConditions.map((c) => conditionCost(template, c));
  const validationCost = 40;
  const cost = {
    maxPerExpression: Math.max(validationCost, ...perCondition),
    perBinding: validationCost,
    matchConditions: perCondition.reduce((a, b) => a + b, 0),
  };
  const labels = { ...labelsOf(template), 'app.kubernetes.io/component': 'required-sidecar-opt-out-policy' };
  const opted = { matchExpressions: [{ key: LabelKeys.podOptOut, operator: 'In', values: [LabelValues.disabled] }] };
  return {
    template: template.name,
    subject: 'opt-out',
    policy: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name, labels },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }],
        },
        matchConditions,
        validations: [{ expression: `!(${optedOut})`, message }],
      },
    },
    binding: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name, labels },
      spec: {
        policyName: name,
        validationActions: template.optOut === 'deny' ? ['Deny'] : ['Warn', 'Audit'],
        matchResources: {
          namespaceSelector: selectorJson(webhookScope.namespaceSelector, template.namespaceSelector),
          objectSelector: selectorJson(opted, template.objectSelector),
        },
      },
    },
    notes: [],
    cost,
  };
}

/** The policies as multi-document YAML for GitOps, each pair under a comment naming its template. */
export function policiesYaml(policies: readonly RequiredPolicy[]): string {
  const header = [
    'ValidatingAdmissionPolicies holding the required sidecars (templates with failurePolicy: Fail) in the',
    'API server itself. Generated by `sidecar-injector policies`; do not edit: generate them again when a',
    'template changes. See docs/required-policies.md.',
  ];
  if (policies.length === 0) return `${[...header, 'No template is required: nothing to guard.'].map((l) => `# ${l}`).join('\n')}\n`;
  const documents = policies.flatMap((p, i) => {
    const policy = new Document(p.policy);
    policy.commentBefore = [
      ...(i === 0 ? [...header.map((l) => ` ${l}`), ''] : []),
      ` Template ${p.template}${p.subject === 'opt-out' ? ', the pods labelled to opt out of it' : ''}: worst-case CEL cost ${p.cost.maxPerExpression} per expression, ${p.cost.perBinding} per binding.`,
      ...p.notes.map((n) => ` Note: ${n}.`),
    ].join('\n');
    return [policy, new Document(p.binding)];
  });
  return documents.map((d) => d.toString({ lineWidth: 0 })).join('---\n');
}
