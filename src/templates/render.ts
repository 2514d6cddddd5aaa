/**
 * Renders a compiled template for one pod. Structure comes only from the template: values
 * from the pod are substituted into string leaves and can never add a key or a list item.
 */
import type { Compiled, JsonObject, Template } from './template.js';
import { renderSegments, type RenderContext } from './placeholders.js';

/** A template rendered for one pod: plain JSON, owned by the caller. */
export interface RenderedTemplate {
  readonly name: string;
  readonly hash: string;
  readonly placement: Template['placement'];
  readonly containers: JsonObject[];
  readonly initContainers: JsonObject[];
  readonly volumes: JsonObject[];
  readonly appEnv: JsonObject[];
  readonly appEnvFrom: JsonObject[];
  readonly appVolumeMounts: JsonObject[];
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly imagePullSecrets: JsonObject[];
}

/** A deep copy of plain JSON, so that rendered output never shares objects with the template. */
export function cloneJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map(cloneJson) as T;
  if (typeof value === 'object' && value !== null) {
    const out: JsonObject = {};
    for (const key of Object.keys(value)) out[key] = cloneJson((value as JsonObject)[key]);
    return out as T;
  }
  return value;
}

function build(node: Compiled, context: RenderContext, template: Template): unknown {
  switch (node.kind) {
    case 'static':
      return cloneJson(node.value);
    case 'string':
      return renderSegments(node.segments, context, template.params);
    case 'param':
      return template.params[node.key];
    case 'array':
      return node.items.map((item) => build(item, context, template));
    case 'object': {
      const out: JsonObject = {};
      for (const [key, value] of node.entries) out[key] = build(value, context, template);
      return out;
    }
  }
}

/** Renders `template` with the values in `context`. Pure; never throws for any pod value. */
export function render(template: Template, context: RenderContext): RenderedTemplate {
  const list = (nodes: readonly Compiled[]) => nodes.map((n) => build(n, context, template) as JsonObject);
  const map = (entries: readonly (readonly [string, Compiled])[]) => {
    const out: Record<string, string> = {};
    for (const [key, value] of entries) out[key] = String(build(value, context, template));
    return out;
  };
  const { body } = template;
  return {
    name: template.name,
    hash: template.hash,
    placement: template.placement,
    containers: list(body.containers),
    initContainers: list(body.initContainers),
    volumes: list(body.volumes),
    appEnv: list(body.appEnv),
    appEnvFrom: list(body.appEnvFrom),
    appVolumeMounts: list(body.appVolumeMounts),
    labels: map(body.labels),
    annotations: map(body.annotations),
    imagePullSecrets: list(body.imagePullSecrets),
  };
}
