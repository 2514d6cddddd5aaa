/** Builds template sets for tests from inline documents or directories. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { createTemplateSet, type TemplateSet } from '../../src/templates/set.js';
import { compileTemplate } from '../../src/templates/compile.js';
import type { Template } from '../../src/templates/template.js';

/** Compiles documents into a set; throws with the problems when one is invalid. */
export function templateSet(...docs: unknown[]): TemplateSet {
  const templates: Template[] = docs.map((doc, i) => {
    const { template, problems } = compileTemplate(doc, `t${i}.yaml`);
    if (!template) throw new Error(JSON.stringify(problems));
    return template;
  });
  return createTemplateSet(templates);
}

/** A log shipper: emptyDir shared with app containers, env and mount in each, sidecar last. */
export const logShipperDoc = {
  name: 'logs',
  containers: [
    {
      name: 'log-shipper',
      image: 'fluent/fluent-bit:3',
      env: [{ name: 'APP', value: "{{ pod.labels.app | default 'none' }}" }],
      volumeMounts: [{ name: 'app-logs', mountPath: '/var/log/app', readOnly: true }],
    },
  ],
  volumes: [{ name: 'app-logs', emptyDir: {} }],
  appContainers: {
    env: [{ name: 'LOG_DIR', value: '/var/log/app' }],
    envFrom: [{ configMapRef: { name: 'logging-env' } }],
    volumeMounts: [{ name: 'app-logs', mountPath: '/var/log/app' }],
  },
  labels: { 'logging.example.com/shipped': 'true' },
  annotations: { 'logging.example.com/by': '{{ pod.namespace }}' },
  imagePullSecrets: [{ name: 'registry' }],
};

/** A proxy as a native sidecar, first, on request. */
export const proxyDoc = {
  name: 'proxy',
  injection: 'on-request',
  placement: 'first',
  initContainers: [{ name: 'proxy', image: 'envoyproxy/envoy:v1', restartPolicy: 'Always', ports: [{ containerPort: 15001 }] }],
};

/** A template document as the SidecarTemplate object that holds it (its name the object's). */
export function templateObject(doc: { name: string } & Record<string, unknown>, extra: { generation?: number; uid?: string } = {}): Record<string, any> {
  const { name, ...spec } = doc;
  return {
    apiVersion: 'sidecar-injector.io/v1alpha1',
    kind: 'SidecarTemplate',
    metadata: { name, ...(extra.generation !== undefined ? { generation: extra.generation, uid: extra.uid ?? `uid-${name}` } : {}) },
    spec,
  };
}

/**
 * The bundled example `name` (templates/NAME.yaml, a SidecarTemplate manifest) as the bare
 * template document's YAML, text for text: its comments, then `name: NAME`, then the spec's lines
 * one level out (so that a test may edit it as it edits any template file).
 */
export function bareExampleText(name: string): string {
  const lines = readFileSync(join('templates', `${name}.yaml`), 'utf8').split('\n');
  const header = lines.slice(
    0,
    lines.findIndex((l) => l.startsWith('apiVersion:')),
  );
  const body = lines.slice(lines.indexOf('spec:') + 1).map((l) => l.replace(/^ {2}/, ''));
  return [...header, `name: ${name}`, ...body].join('\n');
}

/** A template's YAML (bare document or manifest text) as the manifest of a revision: object `object`, spec.name the template's, spec.rollout `rollout`. */
export function revisionManifestText(text: string, object: string, rollout: Record<string, unknown>): string {
  const doc = parse(text) as Record<string, any>;
  const { name, ...spec } = doc.kind === 'SidecarTemplate' ? { name: doc.metadata.name, ...doc.spec } : doc;
  return stringify(
    { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name: object }, spec: { name, ...spec, rollout } },
    { lineWidth: 0 },
  );
}

/** Stores every bundled example (templates/*.yaml) in the fake API server, as `kubectl apply -k templates/` would. */
export function applyExamples(api: { applyTemplate(name: string, spec: Record<string, any>): unknown }): void {
  for (const file of readdirSync('templates')
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort()) {
    const manifest = parse(readFileSync(join('templates', file), 'utf8')) as Record<string, any>;
    api.applyTemplate(manifest.metadata.name, manifest.spec);
  }
}
