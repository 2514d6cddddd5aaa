/**
 * Enough of the API server's admission chain for a pod create (the test API server calls it
 * through its `admission` hook): every configured mutating webhook is called over HTTPS in
 * order with an AdmissionReview v1 (`dryRun` as asked), its JSONPatch applied; then each
 * validator (a policy, Pod Security, validation) may refuse. A refusal is answered as the API
 * server answers one: a Status with the webhook's or the validator's words. Nothing is stored.
 * One pass, no reinvocation: a chain that needs a second pass is what the preflight's second
 * dry run finds.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import fastJsonPatch from 'fast-json-patch';
import { httpsCall } from './https.js';
import { testCertificates } from './server.js';

/** A mutating webhook: where it listens (127.0.0.1, the test CA) and its path. */
export interface ChainWebhook {
  readonly name: string;
  readonly port: number;
  readonly path: string;
}

/** A validating step: a sentence refuses the pod (HTTP 403, as a policy or Pod Security does). */
export type ChainValidator = (pod: Record<string, any>, namespace: string) => string | undefined;

const status = (code: number, reason: string, message: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message,
  reason,
  code,
});

export class AdmissionChain {
  readonly webhooks: ChainWebhook[] = [];
  readonly validators: ChainValidator[] = [];
  /** Every review sent: webhook name, dryRun, and the pod it carried. */
  readonly calls: { webhook: string; dryRun: boolean; pod: Record<string, any> }[] = [];
  private serial = 0;

  async create(namespace: string, dryRun: boolean, body: unknown): Promise<{ code: number; body: unknown; warnings: string[] }> {
    const warnings: string[] = [];
    if (!dryRun) return { code: 405, body: status(405, 'MethodNotAllowed', 'this test API server stores no pods: create with dryRun=All'), warnings };
    let pod = structuredClone(body) as Record<string, any>;
    pod.metadata = { ...pod.metadata, namespace };
    const serial = ++this.serial;
    for (const webhook of this.webhooks) {
      this.calls.push({ webhook: webhook.name, dryRun, pod: structuredClone(pod) });
      const review = {
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: `00000000-0000-4000-8000-${String(serial).padStart(12, '0')}`,
          kind: { group: '', version: 'v1', kind: 'Pod' },
          resource: { group: '', version: 'v1', resource: 'pods' },
          requestKind: { group: '', version: 'v1', kind: 'Pod' },
          requestResource: { group: '', version: 'v1', resource: 'pods' },
          name: pod.metadata.name ?? '',
          namespace,
          operation: 'CREATE',
          userInfo: { username: 'system:serviceaccount:sidecar-injector:sidecar-injector' },
          object: pod,
          oldObject: null,
          dryRun,
          options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions', ...(dryRun ? { dryRun: ['All'] } : {}) },
        },
      };
      const { caCert } = await testCertificates();
      let answer: Awaited<ReturnType<typeof httpsCall>>;
      try {
        answer = await httpsCall({ port: webhook.port, path: webhook.path, body: JSON.stringify(review), ca: caCert });
      } catch (err) {
        // As kube-apiserver words a webhook with failurePolicy Fail that it cannot reach.
        const message = `Internal error occurred: failed calling webhook "${webhook.name}": failed to call webhook: Post "https://127.0.0.1:${webhook.port}${webhook.path}": ${(err as Error).message}`;
        return { code: 500, body: status(500, 'InternalError', message), warnings };
      }
      if (answer.status !== 200)
        return {
          code: 500,
          body: status(500, 'InternalError', `Internal error occurred: failed calling webhook "${webhook.name}": HTTP ${answer.status}`),
          warnings,
        };
      const response = JSON.parse(answer.text).response;
      // The API server relays each webhook's warnings, a denial's too.
      for (const warning of Array.isArray(response?.warnings) ? response.warnings : []) if (typeof warning === 'string') warnings.push(warning);
      if (!response?.allowed) {
        const code = response?.status?.code ?? 400;
        return {
          code,
          body: status(code, 'BadRequest', `admission webhook "${webhook.name}" denied the request: ${response?.status?.message ?? ''}`),
          warnings,
        };
      }
      if (response.patch) {
        const operations = JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8'));
        pod = fastJsonPatch.applyPatch(pod, operations, true, false).newDocument;
      }
    }
    for (const validator of this.validators) {
      const refusal = validator(pod, namespace);
      if (refusal)
        return { code: 403, body: status(403, 'Forbidden', `pods "${pod.metadata.name ?? pod.metadata.generateName}" is forbidden: ${refusal}`), warnings };
    }
    // As stored (had it been): a name from generateName, a uid, a creation time.
    const name = pod.metadata.name ?? `${pod.metadata.generateName ?? ''}${String(serial).padStart(5, 'x')}`;
    return { code: 201, body: { ...pod, metadata: { ...pod.metadata, name, uid: `uid-${serial}`, creationTimestamp: '2026-01-01T00:00:00Z' } }, warnings };
  }
}

/** A mutating webhook over HTTPS (the test certificate) that answers each review with `respond`. */
export async function startWebhook(respond: (request: Record<string, any>) => Record<string, unknown>): Promise<{ port: number; stop(): Promise<void> }> {
  const { key, cert } = await testCertificates();
  const server = https.createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const { request } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const body = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: request.uid, ...respond(request) } });
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    stop: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
