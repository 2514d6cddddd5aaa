/** References to Kubernetes objects, as ownerReferences and an Event's `regarding` hold them. */
import { isJsonObject } from './json.js';

/** A reference to a Kubernetes object. */
export interface ObjectReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
}

/** A namespace as an Event's subject (where a bare pod's events go). */
export function namespaceReference(namespace: string): ObjectReference {
  return { apiVersion: 'v1', kind: 'Namespace', namespace, name: namespace };
}

const kindRe = /^[A-Z][A-Za-z0-9]{0,62}$/;
const nameRe = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const apiVersionRe = /^(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?v[0-9][a-z0-9]{0,15}$/;
const uidRe = /^[A-Za-z0-9-]{1,64}$/;

/**
 * The controlling owner among a pod's `ownerReferences`, when it is one an object could have:
 * a kind, a name and an apiVersion of the shapes the API server allows (a pod reaches a webhook
 * unvalidated: an owner's name can be megabytes, its kind can hold a newline). Undefined otherwise.
 */
export function controllingOwner(references: unknown, namespace: string): ObjectReference | undefined {
  if (!Array.isArray(references)) return undefined;
  for (const ref of references) {
    if (!isJsonObject(ref) || ref.controller !== true) continue;
    const { apiVersion, kind, name, uid } = ref;
    if (typeof kind !== 'string' || !kindRe.test(kind) || typeof name !== 'string' || !nameRe.test(name)) return undefined;
    if (typeof apiVersion !== 'string' || !apiVersionRe.test(apiVersion)) return undefined;
    return { apiVersion, kind, namespace, name, ...(typeof uid === 'string' && uidRe.test(uid) ? { uid } : {}) };
  }
  return undefined;
}
