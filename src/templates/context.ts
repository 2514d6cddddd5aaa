/** The values a template is rendered with, read from the pod as received and its namespace. Pure. */
import type { PodParts } from '../k8s/pod.js';
import type { RenderContext } from './placeholders.js';

/** The pod's own labels and annotations: without those the injector added (see inject/ledger.ts). */
export interface OwnMetadata {
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

/** The values templates are rendered with: the pod's own labels and annotations, its name or generateName, its namespace. */
export function contextFor(
  parts: PodParts,
  requestName: string,
  namespace: string,
  own: OwnMetadata,
  namespaceLabels: Readonly<Record<string, string>>,
): RenderContext {
  const { metadata, spec } = parts;
  const generateName = typeof metadata.generateName === 'string' ? metadata.generateName : '';
  const name = typeof metadata.name === 'string' && metadata.name ? metadata.name : generateName.replace(/-+$/, '');
  const serviceAccountName =
    typeof spec.serviceAccountName === 'string' && spec.serviceAccountName
      ? spec.serviceAccountName
      : typeof spec.serviceAccount === 'string' && spec.serviceAccount
        ? spec.serviceAccount
        : 'default';
  return {
    pod: { name: name || requestName, generateName, namespace, serviceAccountName, labels: own.labels, annotations: own.annotations },
    namespace: { name: namespace, labels: namespaceLabels },
  };
}
