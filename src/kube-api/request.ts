/**
 * One GET against the Kubernetes API with the kubeconfig's TLS and credentials, and a timeout
 * of its own (the client library's requests have none we can set per call).
 */
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesApiError } from '../errors.js';

/** GETs `path` (with its query) and parses the JSON answer; rejects with KubernetesApiError on a non-2xx status. */
export async function getJson(kubeConfig: KubeConfig, path: string, timeoutMs: number): Promise<unknown> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('no current cluster in the kubeconfig');
  const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' } };
  await kubeConfig.applyToHTTPSOptions(options);
  const url = new URL(cluster.server + path);
  return new Promise((resolve, reject) => {
    const req = https.request(url, { ...options, agent: undefined, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) return reject(new KubernetesApiError(status, `GET ${path}: HTTP ${status}`));
        try {
          resolve(JSON.parse(text));
        } catch {
          reject(new Error(`GET ${path}: the answer is not JSON`));
        }
      });
    });
    req.on('error', (err) =>
      reject(err.name === 'AbortError' || err.name === 'TimeoutError' ? new Error(`GET ${path}: no answer within ${timeoutMs} ms`) : err),
    );
    req.end();
  });
}
