/**
 * A template in the form the cluster can run. Below Kubernetes 1.29 an init container with
 * `restartPolicy: Always` loses the field and never exits (CONTRACT R-70); a template whose
 * fallback is `container` is then injected in its `container` form: each native sidecar
 * becomes an ordinary container, placed where the template places its containers, ahead of
 * the template's own containers (it was meant to start first). Pure; each form is derived once.
 */
import { deepFreeze, type JsonObject } from '../k8s/json.js';
import type { Compiled, Template, TemplateForm } from './template.js';

const containerForms = new WeakMap<Template, Template>();

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

function nameOf(node: Compiled): unknown {
  if (node.kind === 'static') return (node.value as JsonObject).name;
  if (node.kind === 'object') {
    const entry = node.entries.find(([key]) => key === 'name');
    return entry?.[1].kind === 'static' ? entry[1].value : undefined;
  }
  return undefined;
}

/** `template` in `form`: itself for `native` (or when it has no native sidecars), else its container form. */
export function templateInForm(template: Template, form: TemplateForm): Template {
  if (form === 'native' || template.nativeSidecars.length === 0) return template;
  let derived = containerForms.get(template);
  if (derived) return derived;
  const native = new Set(template.nativeSidecars);
  const moved: Compiled[] = [];
  const kept: Compiled[] = [];
  for (const node of template.body.initContainers) {
    if (native.has(nameOf(node) as string)) moved.push(withoutRestartPolicy(node));
    else kept.push(node);
  }
  derived = Object.freeze({
    ...template,
    form: 'container' as const,
    nativeSidecars: [],
    body: { ...template.body, initContainers: kept, containers: [...moved, ...template.body.containers] },
  });
  containerForms.set(template, derived);
  return derived;
}
