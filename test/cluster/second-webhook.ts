/**
 * Another mutating webhook beside the injector, as clusters have them (a policy engine, another
 * injector): served by the test process on the world's loopback and registered with a URL
 * clientConfig for the pods of one namespace. Its configuration's name sorts after
 * `sidecar-injector`, so it runs after the injector, and a change it makes has the API server
 * call the injector again (reinvocationPolicy: IfNeeded).
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { ExecutionContext } from 'ava';
import { testCertificates } from '../helpers/server.js';
import { eventually, joinWorld, type Json } from './helpers.js';

export interface SecondWebhook {
  /** The pods it was sent, as it received them (what the chain had made of them by then). */
  readonly seen: Json[];
}

/** Waits until a dry-run pod created in `namespace` comes back as `holds` says (a new webhook or policy is in force). */
export async function inForce(namespace: string, holds: (pod: Json) => boolean, what: string): Promise<void> {
  const { kube } = joinWorld();
  const probe = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'in-force-probe' },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }] },
  };
  await eventually(`${what} in force`, async () => holds(await kube.create(`/api/v1/namespaces/${namespace}/pods?dryRun=All`, probe)));
}

/**
 * A webhook for the pods of `namespace` that records each pod it is sent and answers with the
 * JSON patch `patchFor` returns (none when empty). Resolves once the API server calls it.
 */
export async function testWebhook(t: ExecutionContext, namespace: string, patchFor: (pod: Json) => Json[]): Promise<SecondWebhook> {
  const { kube } = joinWorld();
  const certs = await testCertificates();
  const seen: Json[] = [];
  const server = https.createServer({ key: certs.key, cert: certs.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const pod = review.request.object;
      seen.push(pod);
      const patch = patchFor(pod);
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: review.apiVersion,
          kind: 'AdmissionReview',
          response: {
            uid: review.request.uid,
            allowed: true,
            ...(patch.length ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') } : {}),
          },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const name = `zz-test-webhook-${namespace}`;
  await kube.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name },
    webhooks: [
      {
        name: 'mutate.test-webhook.example',
        admissionReviewVersions: ['v1'],
        clientConfig: { url: `https://127.0.0.1:${port}/`, caBundle: Buffer.from(certs.caCert).toString('base64') },
        rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }],
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
        sideEffects: 'None',
        failurePolicy: 'Fail',
        reinvocationPolicy: 'Never',
        timeoutSeconds: 5,
      },
    ],
  });
  t.teardown(async () => {
    await kube.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${name}`);
    server.close();
  });
  // The API server reads webhook configurations through an informer: in force a moment later.
  await inForce(namespace, () => seen.length > 0, 'the test webhook');
  seen.length = 0;
  return { seen };
}

/** A webhook that adds `annotation: seen` to every pod of `namespace` (once). */
export function annotatingWebhook(t: ExecutionContext, namespace: string, annotation: string): Promise<SecondWebhook> {
  const escaped = annotation.replace(/~/g, '~0').replace(/\//g, '~1');
  return testWebhook(t, namespace, (pod) =>
    pod.metadata.annotations?.[annotation] === 'seen'
      ? []
      : pod.metadata.annotations
        ? [{ op: 'add', path: `/metadata/annotations/${escaped}`, value: 'seen' }]
        : [{ op: 'add', path: '/metadata/annotations', value: { [annotation]: 'seen' } }],
  );
}

/** A webhook that changes nothing and records what the API server sends it for the pods of `namespace`. */
export function recordingWebhook(t: ExecutionContext, namespace: string): Promise<SecondWebhook> {
  return testWebhook(t, namespace, () => []);
}
