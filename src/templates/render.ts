/**
 * Renders a compiled template for one pod. Structure comes only from the template: values
 * from the pod are substituted into string leaves and can never add a key or a list item.
 */
import { deepFreeze, type Compiled, type JsonObject, type Template } from './template.js';
import { renderSegments, resolve, type RenderContext } from './placeholders.js';

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

function build(node: Compiled, context: RenderContext, template: Template): unknown {
  switch (node.kind) {
    case 'static':
      // Frozen at compile time: shared, never copied.
      return node.value;
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

/** Most recent renderings per template, keyed by the values the template reads. */
const cache = new WeakMap<Template, Map<string, RenderedTemplate>>();
/** Entries kept per template: pods of one ReplicaSet share their values, so a few hundred go far. */
const cacheEntries = 256;

/**
 * Renders `template` with the values in `context`. Pure; never throws for any pod value. The
 * result is deeply frozen and may be shared with other calls that read the same values: a
 * rendering depends only on the template and the values it references, so pods of one
 * Deployment render once.
 */
export function render(template: Template, context: RenderContext): RenderedTemplate {
  const key = JSON.stringify(template.references.map((ref) => resolve(ref, context, template.params) ?? null));
  let entries = cache.get(template);
  if (!entries) cache.set(template, (entries = new Map()));
  const hit = entries.get(key);
  if (hit) return hit;
  const rendered = deepFreeze(renderFresh(template, context));
  if (entries.size >= cacheEntries) entries.delete(entries.keys().next().value as string);
  entries.set(key, rendered);
  return rendered;
}

function renderFresh(template: Template, context: RenderContext): RenderedTemplate {
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
