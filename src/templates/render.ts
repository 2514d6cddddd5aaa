/**
 * Renders a compiled template for one pod. Structure comes only from the template: values
 * from the pod are substituted into string leaves and can never add a key or a list item.
 */
import { TextPattern, ValueMatcher } from '../k8s/contains.js';
import { checkValue, type ParamDeclaration } from './parameters.js';
import { deepFreeze, type JsonObject } from '../k8s/json.js';
import type { Compiled, Template } from './template.js';
import { renderSegments, resolve, type ParamValue, type RenderContext, type Segment } from './placeholders.js';

/** A template rendered for one pod: plain JSON, owned by the caller. */
export interface RenderedTemplate {
  readonly name: string;
  readonly hash: string;
  /** The form rendered (templates/forms.ts): recorded in the ledger so that a second call uses the same. */
  readonly form: Template['form'];
  readonly placement: Template['placement'];
  /** How its containers keep a Guaranteed pod Guaranteed (the template's `guaranteedPods`). */
  readonly guaranteedPods: Template['guaranteedPods'];
  readonly containers: JsonObject[];
  readonly initContainers: JsonObject[];
  readonly volumes: JsonObject[];
  readonly appEnv: JsonObject[];
  readonly appEnvFrom: JsonObject[];
  readonly appVolumeMounts: JsonObject[];
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly imagePullSecrets: JsonObject[];
  /** The parameter values overridden for this rendering, as text: recorded in the ledger. */
  readonly overrides?: Readonly<Record<string, string>>;
}

/** The context a skeleton is built with: reading it is a bug (pod-dependent strings become TextPatterns). */
const noContext = undefined as unknown as RenderContext;

/** What an overridable parameter's field may hold in a pod: a value of its type that its declaration accepts. */
function declaredValue(declaration: ParamDeclaration): ValueMatcher {
  const type = declaration.type === 'integer' || declaration.type === 'number' ? 'number' : declaration.type === 'boolean' ? 'boolean' : 'string';
  // As text too: a label or annotation value, or a field another webhook rewrote as a string.
  return new ValueMatcher((value) => (typeof value === type || typeof value === 'string') && 'value' in checkValue(declaration, String(value)));
}

/** True when the segment's value is the same for every pod: text, a literal, a parameter nobody overrides. */
function fixed(segment: Segment, template: Template): boolean {
  return segment.kind === 'text' || segment.ref.source === 'literal' || (segment.ref.source === 'params' && !template.overridable.has(segment.ref.key));
}

/** The literal text of a pod-dependent string, with "any text" where each pod value (or override) goes. */
function textPattern(segments: readonly Segment[], template: Template): TextPattern {
  const parts: string[] = [''];
  for (const segment of segments) {
    if (segment.kind === 'text') parts[parts.length - 1] += segment.text;
    else if (fixed(segment, template)) parts[parts.length - 1] += renderSegments([segment], noContext, template.params);
    else parts.push('');
  }
  return new TextPattern(parts);
}

function dependsOnPod(segments: readonly Segment[], template: Template): boolean {
  return segments.some((s) => !fixed(s, template));
}

function build(node: Compiled, context: RenderContext, template: Template, params: Readonly<Record<string, ParamValue>>, skeleton = false): unknown {
  switch (node.kind) {
    case 'static':
      // Frozen at compile time: shared, never copied.
      return node.value;
    case 'string':
      if (skeleton && dependsOnPod(node.segments, template)) return textPattern(node.segments, template);
      return renderSegments(node.segments, context, params);
    case 'param':
      // An overridable parameter alone in a field: any value its declaration accepts, of its type.
      if (skeleton && template.overridable.has(node.key)) return declaredValue(template.declarations.get(node.key)!);
      return params[node.key];
    case 'array':
      return node.items.map((item) => build(item, context, template, params, skeleton));
    case 'object': {
      const out: JsonObject = {};
      for (const [key, value] of node.entries) out[key] = build(value, context, template, params, skeleton);
      return out;
    }
  }
}

/** A template's renderings, most recent last, keyed by the values the template reads; bounded in count and bytes. */
interface RenderCache {
  readonly entries: Map<string, { readonly rendered: RenderedTemplate; readonly bytes: number }>;
  bytes: number;
}

const cache = new WeakMap<Template, RenderCache>();
/**
 * Bounds of each template's cache. Pods of one ReplicaSet share their values, so a few hundred
 * entries go far; values referenced by a template can be long (an annotation), so renderings
 * whose values exceed `maxKeyBytes` are not cached at all, and the total is bounded in bytes.
 */
export const renderCacheLimits = { entries: 256, maxKeyBytes: 2048, bytes: 4 * 1024 * 1024 } as const;

/**
 * Renders `template` with the values in `context`. Pure; never throws for any pod value. The
 * result is deeply frozen and may be shared with other calls that read the same values: a
 * rendering depends only on the template and the values it references, so pods of one
 * Deployment render once.
 */
export function render(template: Template, context: RenderContext, overrides?: Readonly<Record<string, ParamValue>>): RenderedTemplate {
  // Overridden values are part of what a rendering depends on.
  const values = JSON.stringify(template.references.map((ref) => resolve(ref, context, template.params) ?? null));
  const key = overrides ? `${values}${JSON.stringify(overrides)}` : values;
  let cached = cache.get(template);
  if (!cached) cache.set(template, (cached = { entries: new Map(), bytes: 0 }));
  const hit = cached.entries.get(key);
  if (hit) return hit.rendered;
  const rendered = deepFreeze(
    overrides
      ? {
          ...renderFresh(template, context, false, { ...template.params, ...overrides }),
          overrides: Object.fromEntries(Object.entries(overrides).map(([k, v]) => [k, String(v)])),
        }
      : renderFresh(template, context, false, template.params),
  );
  // Long values are rare and would pin memory: render them, do not keep them.
  if (key.length > renderCacheLimits.maxKeyBytes) return rendered;
  // Each substituted value can appear in several fields: count it once per reference use.
  const bytes = 2 * key.length * Math.max(1, template.placeholderCount) + template.staticBytes;
  cached.entries.set(key, { rendered, bytes });
  cached.bytes += bytes;
  while (cached.entries.size > renderCacheLimits.entries || cached.bytes > renderCacheLimits.bytes) {
    const [oldestKey, oldest] = cached.entries.entries().next().value as [string, { bytes: number }];
    cached.entries.delete(oldestKey);
    cached.bytes -= oldest.bytes;
  }
  return rendered;
}

/** What the render cache of `template` holds: entries and the bytes accounted (for tests). */
export function renderCacheSize(template: Template): { entries: number; bytes: number } {
  const cached = cache.get(template);
  return { entries: cached?.entries.size ?? 0, bytes: cached?.bytes ?? 0 };
}

/** A template rendered without a pod: pod-dependent strings are TextPatterns. Deeply frozen, computed once. */
export type Skeleton = RenderedTemplate;
const skeletons = new WeakMap<Template, Skeleton>();

/**
 * The part of a template's output that is the same for every pod. An item in a pod that
 * contains this (fields the API server defaulted may be added) is what the template adds;
 * it is how a ledger's claim is checked against the pod (see inject/trust.ts).
 */
export function skeletonOf(template: Template): Skeleton {
  let skeleton = skeletons.get(template);
  if (!skeleton) {
    const fresh = renderFresh(template, noContext, true, template.params);
    // Resources someone else sets once the sidecar is in (resourcesManagedElsewhere): any are the template's.
    const ownResources = (list: readonly JsonObject[]) => list.map((c) => ({ ...c, resources: anyResources }));
    const owned = template.resourcesManagedElsewhere
      ? { ...fresh, containers: ownResources(fresh.containers), initContainers: ownResources(fresh.initContainers) }
      : fresh;
    skeletons.set(template, (skeleton = deepFreeze(owned)));
  }
  return skeleton;
}

/** Any container resources at all (a template whose sidecars' resources are managed elsewhere). */
const anyResources = new ValueMatcher(() => true);

function renderFresh(template: Template, context: RenderContext, skeleton: boolean, params: Readonly<Record<string, ParamValue>>): RenderedTemplate {
  const list = (nodes: readonly Compiled[]) => nodes.map((n) => build(n, context, template, params, skeleton) as JsonObject);
  const map = (entries: readonly (readonly [string, Compiled])[]) => {
    const out: Record<string, string> = {};
    for (const [key, value] of entries) {
      const built = build(value, context, template, params, skeleton);
      out[key] = built instanceof TextPattern || built instanceof ValueMatcher ? (built as unknown as string) : String(built);
    }
    return out;
  };
  const { body } = template;
  return {
    name: template.name,
    hash: template.hash,
    form: template.form,
    placement: template.placement,
    guaranteedPods: template.guaranteedPods,
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
