/** Builds template sets for tests from inline documents or directories. */
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
