/** Builders for tests: a pod with what the test needs, and a namespace source that opts namespaces in. */
import { LabelKeys, LabelValues } from '../../src/k8s/keys.js';
import { createLocalNamespaceSource, type NamespaceLabelSource } from '../../src/namespaces/source.js';

/** A local namespace source in which `namespaces` are opted in; every other namespace is not. */
export function optedIn(...namespaces: string[]): NamespaceLabelSource {
  return createLocalNamespaceSource(Object.fromEntries(namespaces.map((ns) => [ns, { [LabelKeys.namespaceOptIn]: LabelValues.enabled }])));
}

/** What a test pod may say about itself; everything else is a Deployment pod's minimum. */
export interface PodShape {
  readonly generateName?: string;
  readonly name?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly containers?: unknown[];
  readonly initContainers?: unknown[];
  readonly volumes?: unknown[];
  /** Further spec fields (os, nodeSelector, …). */
  readonly spec?: Record<string, unknown>;
}

/**
 * A pod as a Deployment creates it (generateName `web-5d8f-`, label app=web, one container
 * `web` running nginx), with `shape` applied. A fresh object on every call.
 */
export function pod(shape: PodShape = {}): Record<string, any> {
  const metadata: Record<string, unknown> = shape.name !== undefined ? { name: shape.name } : { generateName: shape.generateName ?? 'web-5d8f-' };
  metadata.labels = shape.labels ?? { app: 'web' };
  if (shape.annotations) metadata.annotations = shape.annotations;
  const spec: Record<string, unknown> = { containers: shape.containers ?? [{ name: 'web', image: 'nginx:1.27' }], ...shape.spec };
  if (shape.initContainers) spec.initContainers = shape.initContainers;
  if (shape.volumes) spec.volumes = shape.volumes;
  return structuredClone({ apiVersion: 'v1', kind: 'Pod', metadata, spec });
}
