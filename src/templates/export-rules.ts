/**
 * Which templates a MutatingAdmissionPolicy can inject exactly as the webhook does
 * (manifests/mutating-policies.ts generates it): a template outside these rules is not exported,
 * with every reason, and one that says `delivery: policy` is refused at load. Pure.
 */
import { AnnotationKeys } from '../k8s/keys.js';
import { isJsonObject } from '../k8s/json.js';
import { labelValueProblem } from '../k8s/label-syntax.js';
import { parseQuantity } from '../k8s/quantity.js';
import { checkPodSecurity, podSecurityPolicies } from '../k8s/pod-security.js';
import { nameOf } from './forms.js';
import type { Reference } from './placeholders.js';
import { render } from './render.js';
import type { TemplateSet } from './set.js';
import type { Compiled, Template } from './template.js';

/** The entry `key` of a compiled object, as a compiled node. */
export function entryOf(node: Compiled, key: string): Compiled | undefined {
  if (node.kind === 'static') {
    const value = isJsonObject(node.value) ? node.value[key] : undefined;
    return value === undefined ? undefined : { kind: 'static', value };
  }
  if (node.kind === 'object') return node.entries.find(([k]) => k === key)?.[1];
  return undefined;
}

/** True when the node renders differently for some pod. */
export function compiledHasPlaceholder(node: Compiled | undefined): boolean {
  if (!node) return false;
  if (node.kind === 'string' || node.kind === 'param') return true;
  if (node.kind === 'array') return node.items.some(compiledHasPlaceholder);
  if (node.kind === 'object') return node.entries.some(([, v]) => compiledHasPlaceholder(v));
  return false;
}

const exportableTypes = new Set(['enum', 'quantity']);
/** JSON and CEL spell these alike (no quote, backslash or control character): safe to splice into the ledger's text. */
const plainText = /^[\x20-\x7e]*$/;
const jsonSafe = (text: string) => plainText.test(text) && !/["\\]/.test(text);

/** The references of a compiled node, anywhere under it. */
export function referencesOf(node: Compiled | undefined, out: Reference[] = []): Reference[] {
  if (!node) return out;
  if (node.kind === 'string') for (const s of node.segments) if (s.kind === 'placeholder') out.push(s.ref);
  if (node.kind === 'param') out.push({ source: 'params', key: node.key });
  if (node.kind === 'array') for (const item of node.items) referencesOf(item, out);
  if (node.kind === 'object') for (const [, v] of node.entries) referencesOf(v, out);
  return out;
}

/** Every reason `template` cannot be exported; empty when it can. */
export function exportProblems(template: Template, set: TemplateSet): string[] {
  const problems: string[] = [];
  const { body } = template;
  if (body.initContainers.length + body.containers.length === 0) problems.push('it adds no container (nothing a policy could recognise as injected)');
  if (body.appEnvFrom.length > 0) problems.push('appContainers.envFrom is not exported (its key is built from two references)');
  if (body.imagePullSecrets.length > 0) problems.push('imagePullSecrets are not exported');
  if (template.placement === 'first' && body.containers.length > 0)
    problems.push('ordinary containers placed first are not exported (the webhook also sets kubectl.kubernetes.io/default-container)');
  if (set.rollouts?.has(template.name)) problems.push('it has a rollout in progress (the webhook picks a revision per pod)');
  for (const [name, declaration] of template.declarations) {
    if (declaration.override === 'none') continue;
    if (!exportableTypes.has(declaration.type))
      problems.push(
        `parameter ${name} is overridable and of type ${declaration.type}: only enum and quantity overrides are checked in CEL as the webhook checks them`,
      );
    if (declaration.type === 'enum' && !declaration.values!.every(jsonSafe))
      problems.push(`parameter ${name} has an enum value with a quote, backslash or control character`);
    if (declaration.type === 'quantity' && !((parseQuantity(declaration.min)?.num ?? 0n) > 0n))
      problems.push(`parameter ${name} is an overridable quantity without a min above zero: the API server reads more spellings as zero than the webhook does`);
  }
  for (const [key, value] of body.labels) {
    if (value.kind !== 'static') problems.push(`label ${key} has a placeholder (the webhook leaves out a label value the API server would refuse)`);
    else if (typeof value.value !== 'string' || labelValueProblem(value.value)) problems.push(`label ${key} has a value the API server refuses`);
  }
  const addedLabels = new Set(set.templates.flatMap((t) => t.body.labels.map(([k]) => k)));
  const addedAnnotations = new Set(set.templates.flatMap((t) => t.body.annotations.map(([k]) => k)));
  const nodes = [...body.initContainers, ...body.containers, ...body.volumes, ...body.appEnv, ...body.appVolumeMounts, ...body.annotations.map(([, v]) => v)];
  for (const ref of nodes.flatMap((n) => referencesOf(n))) {
    if (ref.source === 'pod.labels' && addedLabels.has(ref.key)) problems.push(`it reads the pod label ${ref.key}, which a template adds`);
    if (ref.source === 'pod.annotations' && (addedAnnotations.has(ref.key) || ref.key === AnnotationKeys.status))
      problems.push(`it reads the pod annotation ${ref.key}, which the injector writes`);
  }
  for (const r of template.objectSelector.requirements)
    if (addedLabels.has(r.key)) problems.push(`its objectSelector reads the label ${r.key}, which a template adds`);
  // Keys are compared and recorded as text: they must be the template's own.
  const keyed = [
    ...body.volumes.map((n) => entryOf(n, 'name')),
    ...body.appEnv.map((n) => entryOf(n, 'name')),
    ...body.appVolumeMounts.map((n) => entryOf(n, 'mountPath')),
  ];
  if (keyed.some(compiledHasPlaceholder)) problems.push('a volume name, env name or mountPath has a placeholder');
  for (const node of body.volumes)
    if (node.kind !== 'static') problems.push(`volume ${String(nameOf(node))} has a placeholder (its sameness is tested field by field)`);
  const listOfObjects = (value: unknown): boolean =>
    Array.isArray(value) ? value.some((v) => isJsonObject(v) || Array.isArray(v)) : isJsonObject(value) && Object.values(value).some(listOfObjects);
  for (const node of body.volumes)
    if (node.kind === 'static' && listOfObjects(node.value))
      problems.push(
        `volume ${String(nameOf(node))} holds a list of objects (projected sources, items): the webhook matches its items in any order, with defaults`,
      );
  for (const text of [
    ...body.initContainers.map(nameOf),
    ...body.containers.map(nameOf),
    ...body.volumes.map(nameOf),
    ...body.appEnv.map((n) => (entryOf(n, 'name') as { value?: unknown } | undefined)?.value),
    ...body.appVolumeMounts.map((n) => (entryOf(n, 'mountPath') as { value?: unknown } | undefined)?.value),
    ...body.labels.map(([k]) => k),
    ...body.annotations.map(([k]) => k),
  ]) {
    if (typeof text !== 'string' || !jsonSafe(text)) problems.push(`the key ${JSON.stringify(text)} has a quote, backslash or control character`);
  }
  for (const node of [...body.initContainers, ...body.containers])
    if (compiledHasPlaceholder(entryOf(node, 'securityContext'))) problems.push(`container ${String(nameOf(node))}'s securityContext has a placeholder`);
  problems.push(...podSecurityProblems(template));
  return [...new Set(problems)];
}

/**
 * Whether the template's sidecars can ever make a pod violate Pod Security: rendered with its
 * defaults into a pod that fits "restricted" and into one whose pod-level securityContext does
 * not, they must add no violation of their own (pipeline/pod-security-fit.ts counts only those).
 * The webhook's pod-security rule then never leaves the template out, and the policy needs no copy of it.
 */
function podSecurityProblems(template: Template): string[] {
  const restricted = podSecurityPolicies({ 'pod-security.kubernetes.io/enforce': 'restricted' }).enforce!;
  const app = {
    name: 'app',
    image: 'app',
    securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
  };
  const context = {
    pod: { name: 'probe', generateName: '', namespace: 'probe', serviceAccountName: 'default', labels: {}, annotations: {} },
    namespace: { name: 'probe', labels: {} },
  };
  const rendered = render(template, context);
  const problems: string[] = [];
  for (const podSecurity of [{}, { runAsNonRoot: false, runAsUser: 0, seccompProfile: { type: 'Unconfined' } }]) {
    const before = { spec: { securityContext: podSecurity, containers: [app] } };
    const after = { spec: { ...before.spec, initContainers: rendered.initContainers, containers: [app, ...rendered.containers], volumes: rendered.volumes } };
    const known = new Set(checkPodSecurity(before, restricted).map((v) => `${v.check}\0${v.detail}`));
    const added = checkPodSecurity(after, restricted).filter((v) => !known.has(`${v.check}\0${v.detail}`));
    if (added.length > 0)
      problems.push(
        `its sidecars do not fit Pod Security "restricted" whatever the pod sets (${added.map((v) => v.check).join(', ')}); the webhook decides that per namespace`,
      );
  }
  return problems;
}
