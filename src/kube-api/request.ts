/**
 * One GET against the Kubernetes API with the kubeconfig's TLS and credentials, and a timeout
 * of its own (the client library's requests have none we can set per call).
 */
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesApiError, ResponseTooLargeError } from '../errors.js';

/**
 * What a read asks for: whole objects, or metadata only (PartialObjectMetadata: names, labels,
 * annotations, ownerReferences, no spec or status), so that a list of 100,000 pods stays small
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables).
 */
export type Representation = 'object' | 'metadata';

/** Metadata only (Representation): each request sends the `Accept` its kind needs (acceptFor). */
export const metadataOnly: Representation = 'metadata';

/** The kinds of read, which the API server answers in different forms. */
export type ReadKind = 'get' | 'list' | 'watch';

const metadataList = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const metadataObject = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

/**
 * The `Accept` header of one read. The API server takes the first clause it can serve and only
 * then converts, so the List form must lead for a list and the single form for a GET and a
 * watch (each event is one object): the other way round a GET is 406 and a watch ends at its
 * first event (CONTRACT.md section 12; client-go's metadata client does the same).
 */
export function acceptFor(representation: Representation, kind: ReadKind): string {
  if (representation === 'object') return 'application/json';
  return kind === 'list' ? metadataList : metadataObject;
}

/** MicroTime as the API server writes it (events, leases): RFC 3339 with six fractional digits. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** The `message` of a Status the API server answered with, cut to 1,000 characters; undefined for any other text. */
function statusMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { kind?: unknown; message?: unknown };
    return body?.kind === 'Status' && typeof body.message === 'string' ? body.message.slice(0, 1000) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The most bytes one answer may have unless the read says otherwise: above any one object etcd
 * stores (1.5 MiB by default) with room, and small enough that the parsed answer fits well in the
 * Deployment's heap. A list page is bounded by listPages's own, smaller bound.
 */
export const defaultMaxResponseBytes = 16 * 1024 * 1024;

/**
 * GETs one object or one list page at `path` (with its query) as `representation`, and parses
 * the JSON answer; rejects with KubernetesApiError on a non-2xx status, and with
 * ResponseTooLargeError once the answer passes `maxBytes`.
 */
export function getJson(
  kubeConfig: KubeConfig,
  path: string,
  timeoutMs: number,
  representation: Representation = 'object',
  kind: 'get' | 'list' = 'get',
  maxBytes = defaultMaxResponseBytes,
): Promise<unknown> {
  return requestJson(kubeConfig, 'GET', path, timeoutMs, { accept: acceptFor(representation, kind), maxBytes });
}

/** At most this many Warning headers are read from one answer, each cut to this many characters: a webhook chooses their number and length. */
const maxWarnings = 20;
const maxWarningLength = 1000;

/**
 * The texts of an answer's Warning headers, as the API server writes them (`299 - "text"`,
 * RFC 7234, backslash escapes): admission webhooks' warnings among them. `rawHeaders` is Node's
 * flat name, value list (repeated headers stay apart there).
 */
export function warningTexts(rawHeaders: readonly string[]): string[] {
  const texts: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length && texts.length < maxWarnings; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'warning') continue;
    // Node reads header bytes as latin1; the API server writes the text's UTF-8 bytes.
    const quoted = /^\d{3} \S+ "((?:[^"\\]|\\.)*)"/.exec(Buffer.from(rawHeaders[i + 1]!, 'latin1').toString('utf8'));
    if (quoted) texts.push(quoted[1]!.replace(/\\(.)/g, '$1').slice(0, maxWarningLength));
  }
  return texts;
}

/**
 * One request with the kubeconfig's TLS and credentials, and a timeout of its own: `body` is
 * sent as JSON with `contentType` (a merge patch, a strategic merge patch, an object). The
 * answer is parsed as JSON; a non-2xx status rejects with KubernetesApiError; an answer past
 * `maxBytes` is cut off unread and rejects with ResponseTooLargeError. `onWarnings` is given
 * the answer's Warning texts (warningTexts), when it has any.
 */
export async function requestJson(
  kubeConfig: KubeConfig,
  method: 'GET' | 'POST' | 'PUT' | 'PATCH',
  path: string,
  timeoutMs: number,
  {
    accept = 'application/json',
    body,
    contentType = 'application/json',
    maxBytes = defaultMaxResponseBytes,
    onWarnings,
  }: { accept?: string; body?: unknown; contentType?: string; maxBytes?: number; onWarnings?: (warnings: string[]) => void } = {},
): Promise<unknown> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('no current cluster in the kubeconfig');
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const headers: Record<string, string | number> = { accept, ...(payload ? { 'content-type': contentType, 'content-length': payload.length } : {}) };
  const options: https.RequestOptions = { method, headers };
  await kubeConfig.applyToHTTPSOptions(options);
  const url = new URL(cluster.server + path);
  return new Promise((resolve, reject) => {
    const req = https.request(url, { ...options, agent: undefined, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      if (onWarnings) {
        const warnings = warningTexts(res.rawHeaders);
        if (warnings.length > 0) onWarnings(warnings);
      }
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes <= maxBytes) return void chunks.push(c);
        // Settled here, before the errors the cut-off raises on the request and the response.
        chunks.length = 0;
        const tooLarge = new ResponseTooLargeError(path, maxBytes);
        reject(tooLarge);
        req.destroy(tooLarge);
      });
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) return reject(new KubernetesApiError(status, `${method} ${path}: HTTP ${status}`, statusMessage(text)));
        try {
          resolve(text ? JSON.parse(text) : undefined);
        } catch {
          reject(new Error(`${method} ${path}: the answer is not JSON`));
        }
      });
    });
    req.on('error', (err) =>
      reject(err.name === 'AbortError' || err.name === 'TimeoutError' ? new Error(`${method} ${path}: no answer within ${timeoutMs} ms`) : err),
    );
    req.end(payload);
  });
}

/** Options of a paginated list. */
export interface ListOptions {
  /** Items per page (`limit`). @default 500 */
  readonly pageSize?: number;
  /** Timeout of each page. @default 60000 */
  readonly timeoutMs?: number;
  /** Whole objects, or `metadataOnly` for names, labels, annotations and owners only. @default 'object' */
  readonly accept?: Representation;
  /** Called once per page (to stop early, or to observe progress). */
  readonly stopped?: () => boolean;
  /** Told when an expired continue token makes the list start over. */
  readonly onRestart?: () => void;
  /**
   * The most bytes one page may have. A page past it is asked for again with half the items,
   * down to one (and the next page with twice the items that fitted, up to pageSize); one object
   * past it fails the list with ResponseTooLargeError. So a page of
   * tenants' megabyte objects costs its bound, never the heap. @default 4 MiB (etcd holds objects up to 1.5 MiB)
   */
  readonly maxPageBytes?: number;
}

/** listPages's bound on one page. */
export const defaultMaxPageBytes = 4 * 1024 * 1024;

/**
 * A collection page by page (`limit`, `continue`), each page handed to `onPage` and then
 * dropped: a list of 100,000 pods never sits in memory at once. An expired continue token
 * (410, after etcd compaction) restarts the list from the beginning (`onRestart` is told, and
 * must forget what it was given), at most three times. Resolves with the list's resourceVersion.
 */
export async function listPages<T>(kubeConfig: KubeConfig, path: string, options: ListOptions, onPage: (items: readonly T[]) => void): Promise<string> {
  type Page = { metadata?: { resourceVersion?: string; continue?: string }; items?: T[] };
  const separator = path.includes('?') ? '&' : '?';
  const maxPageBytes = options.maxPageBytes ?? defaultMaxPageBytes;
  // Halved while a page is too large, doubled again after each page that fits, up to pageSize (a
  // continue token may be used with any limit): a few large objects cost a few small pages, not
  // one request per object for the rest of the list.
  const pageSize = options.pageSize ?? 500;
  let limit = pageSize;
  const fetchPage = async (token: string): Promise<Page> => {
    for (;;) {
      const query = new URLSearchParams({ limit: String(limit) });
      if (token) query.set('continue', token);
      try {
        const page = (await getJson(kubeConfig, `${path}${separator}${query}`, options.timeoutMs ?? 60_000, options.accept, 'list', maxPageBytes)) as Page;
        limit = Math.min(pageSize, limit * 2);
        return page;
      } catch (err) {
        if (!(err instanceof ResponseTooLargeError) || limit === 1) throw err;
        limit = Math.max(1, Math.floor(limit / 2));
      }
    }
  };
  for (let attempt = 0; ; attempt++) {
    let token = '';
    let resourceVersion = '';
    try {
      do {
        const page = await fetchPage(token);
        onPage(Array.isArray(page.items) ? page.items : []);
        resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
        token = page.metadata?.continue ?? '';
        if (options.stopped?.()) return resourceVersion;
      } while (token);
      return resourceVersion;
    } catch (err) {
      if (!(err instanceof KubernetesApiError && err.statusCode === 410 && token && attempt < 3)) throw err;
      options.onRestart?.();
    }
  }
}

/** Every item of a collection (listPages, gathered). */
export async function listAll<T>(kubeConfig: KubeConfig, path: string, options: ListOptions = {}): Promise<{ items: T[]; resourceVersion: string }> {
  let items: T[] = [];
  const resourceVersion = await listPages<T>(
    kubeConfig,
    path,
    {
      ...options,
      onRestart: () => {
        items = [];
        options.onRestart?.();
      },
    },
    (page) => {
      for (const item of page) items.push(item);
    },
  );
  return { items, resourceVersion };
}
