/**
 * A template in the form the pod and the cluster can run. Pure; each form is derived once.
 *
 * - `container`: below Kubernetes 1.29 an init container with `restartPolicy: Always` loses
 *   the field and never exits (kubernetes/enhancements KEP-753); a template whose fallback is
 *   `container` is then injected with each native sidecar as an ordinary container, placed
 *   where the template places its containers, ahead of its own containers (it was meant to
 *   start first).
 * - `sidecar`: a pod that runs to completion (a Job's, `restartPolicy` Never or OnFailure) ends
 *   only when all its containers end, so a sidecar that runs until stopped must not be one of
 *   them: the template's ordinary containers become native sidecars (init containers with
 *   `restartPolicy: Always`, after its own native sidecars), which the kubelet stops once the
 *   app containers have ended.
 */
import { deepFreeze, type JsonObject } from '../k8s/json.js';
import type { Compiled, Template, TemplateForm } from './template.js';

const derivedForms = { container: new WeakMap<Template, Template>(), sidecar: new WeakMap<Template, Template>() };

/** The init container's compiled node without `restartPolicy`. */
function withoutRestartPolicy(node: Compiled): Compiled {
  switch (node.kind) {
    case 'static': {
      const { restartPolicy: _dropped, ...rest } = node.value as JsonObject;
      return { kind: 'static', value: deepFreeze(rest) };
    }
    case 'object':
      return { kind: 'object', entries: node.entries.filter(([key]) => key !== 'restartPolicy') };
    default:
      return node;
  }
}

/** The container's compiled node with `restartPolicy: Always`. */
function withRestartAlways(node: Compiled): Compiled {
  const always: Compiled = { kind: 'static', value: 'Always' };
  switch (node.kind) {
    case 'static':
      return { kind: 'static', value: deepFreeze({ ...(node.value as JsonObject), restartPolicy: 'Always' }) };
    case 'object':
      return { kind: 'object', entries: [...node.entries.filter(([key]) => key !== 'restartPolicy'), ['restartPolicy', always]] };
    default:
      return node;
  }
}

/** The name of a compiled container, when it is static (template.ts requires it). */
export function nameOf(node: Compiled): unknown {
  if (node.kind === 'static') return (node.value as JsonObject).name;
  if (node.kind === 'object') {
    const entry = node.entries.find(([key]) => key === 'name');
    return entry?.[1].kind === 'static' ? entry[1].value : undefined;
  }
  return undefined;
}

/** Whether `template` needs the `sidecar` form in a pod that runs to completion: it has ordinary containers that do not end on their own. */
export function runsUntilStopped(template: Template): boolean {
  return !template.endsOnItsOwn && template.body.containers.length > 0;
}

/**
 * The containers `form` moves, and the list they land in: what a ledger entry recorded in that
 * form must hold for the form to be believed (inject/trust.ts).
 */
export function movedBy(template: Template, form: TemplateForm): { readonly list: 'containers' | 'initContainers'; readonly names: readonly string[] } {
  if (form === 'container') return { list: 'containers', names: template.nativeSidecars };
  if (form === 'sidecar') return { list: 'initContainers', names: template.body.containers.map((c) => nameOf(c) as string) };
  return { list: 'initContainers', names: [] };
}

/** `template` in `form`: itself for `native`, else the derived form (itself when the form would move nothing). */
export function templateInForm(template: Template, form: TemplateForm): Template {
  if (form === 'native' || template.form !== 'native') return template;
  if (form === 'container' ? template.nativeSidecars.length === 0 : template.body.containers.length === 0) return template;
  let derived = derivedForms[form].get(template);
  if (derived) return derived;
  derived = form === 'container' ? containerForm(template) : sidecarForm(template);
  derivedForms[form].set(template, derived);
  return derived;
}

function containerForm(template: Template): Template {
  const native = new Set(template.nativeSidecars);
  const moved: Compiled[] = [];
  const kept: Compiled[] = [];
  for (const node of template.body.initContainers) {
    if (native.has(nameOf(node) as string)) moved.push(withoutRestartPolicy(node));
    else kept.push(node);
  }
  return Object.freeze({
    ...template,
    form: 'container' as const,
    nativeSidecars: [],
    body: { ...template.body, initContainers: kept, containers: [...moved, ...template.body.containers] },
  });
}

function sidecarForm(template: Template): Template {
  const moved = template.body.containers.map(withRestartAlways);
  return Object.freeze({
    ...template,
    form: 'sidecar' as const,
    nativeSidecars: [...template.nativeSidecars, ...moved.map((c) => nameOf(c) as string)],
    body: { ...template.body, containers: [], initContainers: [...template.body.initContainers, ...moved] },
  });
}
