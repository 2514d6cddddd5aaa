/**
 * The test world's own client of the real API server: plain HTTPS with a bearer token, JSON in
 * and out, no retries and no caching, so that a test sees exactly what the API server answered.
 * The injector never uses this: it talks to the cluster with its own code and its own identity.
 */
import https from 'node:https';

export type Json = Record<string, any>;

export interface Answer {
  readonly status: number;
  readonly body: Json;
  readonly text: string;
  readonly headers: Record<string, string | string[] | undefined>;
}

/** An API request that did not get a 2xx. */
export class ApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly answer: Answer,
  ) {
    super(`${method} ${path}: ${answer.status} ${answer.body.message ?? answer.text.slice(0, 500)}`);
  }
}

export interface KubeOptions {
  /** https://host:port */
  readonly server: string;
  /** PEM of the API server's CA. */
  readonly ca: string;
  readonly token: string;
}

export class Kube {
  private readonly agent: https.Agent;
  private readonly url: URL;

  constructor(readonly options: KubeOptions) {
    this.url = new URL(options.server);
    this.agent = new https.Agent({ ca: options.ca, keepAlive: true, maxSockets: 32 });
  }

  /** One request; the answer whatever its status. */
  request(method: string, path: string, body?: unknown, contentType = 'application/json', timeoutMs = 60_000): Promise<Answer> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: this.url.hostname,
          port: this.url.port,
          method,
          path,
          agent: this.agent,
          headers: {
            authorization: `Bearer ${this.options.token}`,
            accept: 'application/json',
            ...(payload === undefined ? {} : { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) }),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: Json;
            try {
              parsed = text ? JSON.parse(text) : {};
            } catch {
              parsed = {};
            }
            resolve({ status: res.statusCode ?? 0, body: parsed, text, headers: res.headers });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** A request that must succeed (2xx); its body. */
  async call(method: string, path: string, body?: unknown, contentType?: string): Promise<Json> {
    const answer = await this.request(method, path, body, contentType);
    if (answer.status < 200 || answer.status > 299) throw new ApiError(method, path, answer);
    return answer.body;
  }

  get(path: string): Promise<Json> {
    return this.call('GET', path);
  }

  /** The object, or undefined on 404. */
  async find(path: string): Promise<Json | undefined> {
    const answer = await this.request('GET', path);
    if (answer.status === 404) return undefined;
    if (answer.status < 200 || answer.status > 299) throw new ApiError('GET', path, answer);
    return answer.body;
  }

  create(path: string, object: unknown): Promise<Json> {
    return this.call('POST', path, object);
  }

  /** A merge patch (RFC 7386). */
  mergePatch(path: string, patch: unknown): Promise<Json> {
    return this.call('PATCH', path, patch, 'application/merge-patch+json');
  }

  /** A strategic merge patch. */
  strategicPatch(path: string, patch: unknown): Promise<Json> {
    return this.call('PATCH', path, patch, 'application/strategic-merge-patch+json');
  }

  /** Deletes; a 404 is fine. */
  async delete(path: string, options: Json = {}): Promise<void> {
    const answer = await this.request('DELETE', path, { kind: 'DeleteOptions', apiVersion: 'v1', ...options });
    if (answer.status !== 404 && (answer.status < 200 || answer.status > 299)) throw new ApiError('DELETE', path, answer);
  }

  close(): void {
    this.agent.destroy();
  }
}
