/** One HTTPS request to a server on 127.0.0.1 (certificate for localhost), answered in full. */
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';

export interface HttpsCall {
  readonly port: number;
  readonly path: string;
  readonly method?: string;
  readonly body?: string | Buffer;
  /** Trusted CA (PEM), unless the agent carries one. */
  readonly ca?: string;
  readonly agent?: https.Agent | false;
  /** Defaults to `content-type: application/json` when there is a body. */
  readonly headers?: Record<string, string>;
}

export interface HttpsAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The server certificate's SHA-256 fingerprint, as the client saw it. */
  readonly fingerprint256: string;
}

export function httpsCall(call: HttpsCall): Promise<HttpsAnswer> {
  const headers = call.headers ?? (call.body === undefined ? {} : { 'content-type': 'application/json' });
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: call.port,
        path: call.path,
        method: call.method ?? (call.body === undefined ? 'GET' : 'POST'),
        servername: 'localhost',
        headers,
        ...(call.ca ? { ca: call.ca } : {}),
        ...(call.agent !== undefined ? { agent: call.agent } : {}),
      },
      (res) => {
        const fingerprint256 = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), fingerprint256 }));
      },
    );
    req.on('error', reject);
    req.end(call.body);
  });
}
