/**
 * "Does the pod's item hold what the template adds?" Pure.
 *
 * Between our answer and the next call the API server defaults fields, the
 * ServiceAccount plugin appends its token mount to every container, and every
 * resource quantity comes back in canonical form (`0.1` → `100m`, `1024Mi` → `1Gi`). So an
 * item of ours is recognised by containment, not equality: every field of the template's
 * skeleton is present with the same value; lists of objects may hold more items; strings
 * that depend on the pod match any string; quantities compare by value; an image matches
 * across a registry mirror or a digest pin.
 */
import { guaranteedContainer, type GuaranteedMode } from './qos.js';
import { sameQuantity } from './quantity.js';
import { isJsonObject } from './json.js';

/**
 * A string of a template's skeleton that depends on the pod: its literal text, in order, with
 * any text where the placeholders were (`--prop=tag={{ pod.namespace }}.app` → `--prop=tag=`,
 * `.app`). Matched without regular expressions, in linear time, whatever a pod sends.
 */
export class TextPattern {
  /** `parts[0]` is the prefix, the last part the suffix; any text may stand between parts. */
  constructor(readonly parts: readonly string[]) {}

  matches(text: string): boolean {
    const { parts } = this;
    const first = parts[0]!;
    const last = parts[parts.length - 1]!;
    if (parts.length === 1) return text === first;
    if (text.length < first.length + last.length || !text.startsWith(first) || !text.endsWith(last)) return false;
    // Each middle part at its leftmost place after the previous: enough when every gap is "any text".
    let at = first.length;
    const end = text.length - last.length;
    for (let i = 1; i < parts.length - 1; i++) {
      const found = text.indexOf(parts[i]!, at);
      if (found === -1 || found + parts[i]!.length > end) return false;
      at = found + parts[i]!.length;
    }
    return true;
  }
}

/** Any string: a value wholly taken from the pod. */
export const anyValue = new TextPattern(['', '']);

/**
 * A value of a template's skeleton that varies per pod but obeys a rule: an overridable
 * parameter alone in a field is any value its declaration accepts (of its type), not any value.
 */
export class ValueMatcher {
  constructor(readonly accepts: (value: unknown) => boolean) {}
}

/** Fields whose values are Kubernetes quantities (compared by value, as the API server rewrites them). */
const quantityParents: ReadonlySet<string> = new Set(['requests', 'limits']);
const quantityFields: ReadonlySet<string> = new Set(['sizeLimit']);

/**
 * Fields the API server defaults inside the objects of a container (ports, probes, env
 * sources, resources); any other field a pod adds inside them makes the container someone
 * else's (a `privileged: true` of its own, say).
 */
const defaultedNestedFields: ReadonlySet<string> = new Set([
  'protocol',
  'hostPort',
  'timeoutSeconds',
  'periodSeconds',
  'successThreshold',
  'failureThreshold',
  'scheme',
  'apiVersion',
  'requests',
]);

/** True when two scalars are equal, or are the same Kubernetes quantity written differently. */
export function sameScalar(a: unknown, b: unknown): boolean {
  return a === b || sameQuantity(a, b);
}

/** An image reference split as the container runtime reads it: registry, repository, tag, digest. */
export function imageReference(image: string): { name: string; tag: string | undefined; digest: string | undefined } {
  const at = image.indexOf('@');
  const digest = at === -1 ? undefined : image.slice(at + 1);
  const withoutDigest = at === -1 ? image : image.slice(0, at);
  const slash = withoutDigest.lastIndexOf('/');
  const colon = withoutDigest.lastIndexOf(':');
  const tag = colon > slash ? withoutDigest.slice(colon + 1) : undefined;
  let name = colon > slash ? withoutDigest.slice(0, colon) : withoutDigest;
  // Docker Hub's defaults, as the runtime applies them: nginx → docker.io/library/nginx.
  const parts = name.split('/');
  if (parts.length === 1 || !/[.:]|^localhost$/.test(parts[0]!)) name = `docker.io/${parts.length === 1 ? 'library/' : ''}${name}`;
  return { name, tag, digest };
}

/**
 * True when `actual` runs the image `expected` names: the same registry and repository (with
 * Docker Hub's defaults spelled out), and the same tag — or no tag but a digest, as digest-pinning
 * policies rewrite it. Another registry is another image: a webhook that rewrites our sidecar's
 * registry after us makes it look like someone else's container (with a warning, no patch).
 */
export function sameImage(expected: string, actual: string): boolean {
  if (expected === actual) return true;
  const a = imageReference(expected);
  const b = imageReference(actual);
  if (a.name !== b.name) return false;
  if (a.digest !== undefined && a.digest !== b.digest) return false;
  return a.tag === b.tag || (b.tag === undefined && b.digest !== undefined);
}

/**
 * Fields the API server (or a webhook that adds to every container's lists) may add to a
 * container we injected; any other field the template does not set (a `command` of one's own)
 * makes the container someone else's.
 */
const addableContainerFields: ReadonlySet<string> = new Set([
  'terminationMessagePath',
  'terminationMessagePolicy',
  'imagePullPolicy',
  'resources',
  // Defaulted for containers with requests where in-place resize is on (SetDefaults_Pod).
  'resizePolicy',
  'volumeMounts',
  'env',
  'envFrom',
]);

/**
 * True when the container `actual` is the template's container `skeleton` (see the module
 * comment), as rendered into any pod or, given the template's `guaranteedPods`, as rendered
 * into a Guaranteed one (its cpu and memory requests taken from its limits, or its limits from
 * its requests: that way only).
 */
export function containsContainer(skeleton: unknown, actual: unknown, guaranteedPods?: GuaranteedMode): boolean {
  if (containsRendered(skeleton, actual)) return true;
  if (!isJsonObject(skeleton) || guaranteedPods === undefined) return false;
  const kept = guaranteedContainer(skeleton, guaranteedPods, () => true);
  return kept !== undefined && containsRendered(kept, actual);
}

function containsRendered(skeleton: unknown, actual: unknown): boolean {
  if (!isJsonObject(skeleton) || !isJsonObject(actual)) return false;
  for (const field in actual) if (!Object.hasOwn(skeleton, field) && !addableContainerFields.has(field)) return false;
  // The container's own fields are checked above; inside them, only defaulted fields may be extra.
  for (const field in skeleton) {
    if (!Object.hasOwn(actual, field) || !contains(skeleton[field], actual[field], field, quantityParents.has(field), true)) return false;
  }
  return true;
}

/**
 * True when `actual` holds everything `skeleton` says (see the module comment). `key` is the
 * field compared; quantities compare by value only where Kubernetes has quantities
 * (`resources.requests`/`limits`, `sizeLimit`); `strict` (inside a container) refuses fields in
 * nested objects beyond those the API server defaults.
 */
export function contains(skeleton: unknown, actual: unknown, key = '', inQuantities = false, strict = false): boolean {
  if (skeleton instanceof TextPattern) return typeof actual === 'string' && skeleton.matches(actual);
  if (skeleton instanceof ValueMatcher) return skeleton.accepts(actual);
  if (Array.isArray(skeleton)) {
    if (!Array.isArray(actual)) return false;
    if (skeleton.every((item) => !isJsonObject(item) || item instanceof TextPattern || item instanceof ValueMatcher)) {
      // Lists of strings (command, args, capabilities): same length, same order.
      return skeleton.length === actual.length && skeleton.every((item, i) => contains(item, actual[i], key, inQuantities, strict));
    }
    return skeleton.every((item) => actual.some((candidate) => contains(item, candidate, key, inQuantities, strict)));
  }
  if (isJsonObject(skeleton)) {
    if (!isJsonObject(actual)) return false;
    if (strict) for (const field in actual) if (!Object.hasOwn(skeleton, field) && !defaultedNestedFields.has(field)) return false;
    for (const field in skeleton) {
      if (!Object.hasOwn(actual, field)) return false;
      if (!contains(skeleton[field], actual[field], field, inQuantities || quantityParents.has(field), strict)) return false;
    }
    return true;
  }
  if (key === 'image' && typeof skeleton === 'string' && typeof actual === 'string') return sameImage(skeleton, actual);
  return inQuantities || quantityFields.has(key) ? sameScalar(skeleton, actual) : skeleton === actual;
}
