/**
 * Self-managed certificates, the pure half: what the Secret holds, whether it must be renewed,
 * and the patch that puts its CA into the webhook configuration. No I/O, no clock (the time
 * is an argument): the controller in self-managed.ts does the reading and writing.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { Pem } from '../tls/certificates.js';

/** The Secret's keys: the serving pair (as kubernetes.io/tls requires), the CA's pair, and the trust bundle. */
export const SecretKeys = {
  cert: 'tls.crt',
  key: 'tls.key',
  /** The CAs the webhook trusts (PEM): the current CA first, then the one it replaced while that is still valid. */
  caBundle: 'ca.crt',
  caKey: 'ca.key',
} as const;

/**
 * Annotation of the MutatingWebhookConfiguration: names of webhooks (comma-separated) shipped
 * with `failurePolicy: Ignore` that get `Fail` once their caBundle holds the CA. Before that
 * the API server cannot verify the injector, and a Fail webhook would refuse every pod it matches.
 */
export const failClosedAnnotation = 'sidecar-injector.io/fail-closed-webhooks';
/**
 * The fail-closed webhooks the injector has armed once, written in the patch that arms them: a
 * webhook named here is never armed again, so an operator's `failurePolicy: Ignore` (during an
 * incident, or from git) stays as the operator set it.
 */
export const armedAnnotation = 'sidecar-injector.io/armed-webhooks';

/** The comma-separated names of an annotation of `configuration`. */
function namesIn(configuration: unknown, annotation: string): Set<string> {
  const value = (configuration as { metadata?: { annotations?: Record<string, unknown> } })?.metadata?.annotations?.[annotation];
  return new Set(
    typeof value === 'string'
      ? value
          .split(',')
          .map((n) => n.trim())
          .filter(Boolean)
      : [],
  );
}

/** What a valid Secret holds, parsed. */
export interface StoredCertificates {
  readonly ca: Pem;
  /** PEM certificates of the trust bundle, the current CA first. */
  readonly bundle: readonly string[];
  readonly serving: Pem;
}

/** What the leader does with the Secret. */
export type CertificatePlan =
  | { readonly action: 'keep' }
  /** A new serving certificate from the same CA: the caBundle stays. */
  | { readonly action: 'issue-serving'; readonly reason: string }
  /** A new CA and serving certificate; `stillTrusted` are CAs to keep in the bundle until they expire. */
  | { readonly action: 'issue-all'; readonly reason: string; readonly stillTrusted: readonly string[] }
  /**
   * The Secret stays, but its bundle gains `carried`: CAs the webhooks trust now that it lacks
   * (someone replaced the Secret's CA): replicas may still serve certificates they signed.
   */
  | { readonly action: 'extend-bundle'; readonly reason: string; readonly carried: readonly string[] };

/** Certificates read from a bundle, at most this many (a Secret is attacker-sized only up to 1 MiB, but we never need more). */
const maxBundleCertificates = 4;
const pemCertificate = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\r\n]{1,16384}-----END CERTIFICATE-----/g;

/** The PEM certificates in `text`, in order, at most four. */
export function splitCertificates(text: string): string[] {
  return [...text.matchAll(pemCertificate)].slice(0, maxBundleCertificates).map((m) => `${m[0]}\n`);
}

function decode(data: Record<string, unknown>, key: string): string | undefined {
  const value = Object.hasOwn(data, key) ? data[key] : undefined;
  return typeof value === 'string' && value.length <= 64 * 1024 ? Buffer.from(value, 'base64').toString('utf8') : undefined;
}

/** A Secret's `data` → the certificates it holds, or why it holds none usable. */
export function parseSecretData(data: unknown): StoredCertificates | { readonly problem: string } {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return { problem: 'the Secret has no data' };
  const record = data as Record<string, unknown>;
  const [cert, key, bundleText, caKey] = [SecretKeys.cert, SecretKeys.key, SecretKeys.caBundle, SecretKeys.caKey].map((k) => decode(record, k));
  if (!cert || !key || !bundleText || !caKey) return { problem: `the Secret lacks one of ${Object.values(SecretKeys).join(', ')}` };
  const bundle = splitCertificates(bundleText);
  if (bundle.length === 0) return { problem: `${SecretKeys.caBundle} holds no PEM certificate` };
  try {
    const ca = new X509Certificate(bundle[0]!);
    if (!ca.ca) return { problem: `the first certificate of ${SecretKeys.caBundle} is not a CA` };
    if (!ca.checkPrivateKey(createPrivateKey(caKey))) return { problem: `${SecretKeys.caKey} is not the key of the CA` };
    if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) return { problem: `${SecretKeys.key} is not the key of ${SecretKeys.cert}` };
  } catch (err) {
    return { problem: `the Secret holds no valid certificates: ${(err as Error).message}` };
  }
  return { ca: { cert: bundle[0]!, key: caKey }, bundle, serving: { cert, key } };
}

/** True when less than a third of the certificate's lifetime is left at `now`. */
function dueForRenewal(cert: X509Certificate, now: number): boolean {
  const from = new Date(cert.validFrom).getTime();
  const to = new Date(cert.validTo).getTime();
  return to - now < (to - from) / 3;
}

/** The DNS names of a certificate's subjectAltName. */
function dnsNamesOf(cert: X509Certificate): Set<string> {
  return new Set(
    (cert.subjectAltName ?? '')
      .split(', ')
      .filter((n) => n.startsWith('DNS:'))
      .map((n) => n.slice(4)),
  );
}

/** PEM text of a certificate, normalised as a bundle is read back (for comparing). */
const same = (a: string, b: string) => a.trim() === b.trim();

/**
 * The CAs the webhook configuration's caBundles trust now, each once, that are CAs still valid at
 * `now`: a replica may be serving a certificate one of them signed (it reads the Secret every few
 * seconds, not at once), so none of them may leave the trust before every replica has moved on.
 */
export function trustedByConfiguration(configuration: unknown, now: number): string[] {
  const webhooks = (configuration as { webhooks?: unknown })?.webhooks;
  const out: string[] = [];
  for (const hook of Array.isArray(webhooks) ? webhooks : []) {
    const bundle = (hook as { clientConfig?: { caBundle?: unknown } })?.clientConfig?.caBundle;
    if (typeof bundle !== 'string' || bundle.length > 64 * 1024) continue;
    for (const pem of splitCertificates(Buffer.from(bundle, 'base64').toString('utf8'))) {
      if (out.some((o) => same(o, pem))) continue;
      try {
        const cert = new X509Certificate(pem);
        if (cert.ca && new Date(cert.validTo).getTime() > now) out.push(pem);
      } catch {
        // Not a certificate: nothing a replica can serve from.
      }
    }
  }
  return out;
}

/**
 * The caBundle to write: `bundle` (what the Secret holds or is about to hold) first, then every
 * CA the configuration, as read just before the write, trusts and is still valid, at most four.
 * A round planned on an older read (two replicas leading at once during a hand-over) may not
 * know the CA another replica has just made and served: it must not drop it from the trust.
 */
export function bundleToTrust(bundle: readonly string[], configuration: unknown, now: number): string[] {
  const extra = trustedByConfiguration(configuration, now).filter((pem) => !bundle.some((b) => same(b, pem)));
  return splitCertificates([...bundle, ...extra].join(''));
}

/**
 * What to do with the Secret at `now`: issue everything when it is missing, unusable or its CA
 * is in the last third of its life; a serving certificate when that one is, when the CA did not
 * sign it, or when it lacks one of `dnsNames`; else keep it. `trusted` (trustedByConfiguration)
 * are the CAs the webhooks trust now: whatever is issued, they stay in the bundle while they are
 * valid, so that no replica still serving from one of them is refused in between.
 */
export function planCertificates(
  stored: StoredCertificates | { readonly problem: string } | undefined,
  now: number,
  dnsNames: readonly string[],
  trusted: readonly string[] = [],
): CertificatePlan {
  if (stored === undefined) return { action: 'issue-all', reason: 'the Secret does not exist', stillTrusted: trusted };
  if ('problem' in stored) return { action: 'issue-all', reason: stored.problem, stillTrusted: trusted };
  const ca = new X509Certificate(stored.ca.cert);
  const carried = trusted.filter((t) => !stored.bundle.some((b) => same(b, t)));
  if (dueForRenewal(ca, now)) {
    const stillTrusted = [...(new Date(ca.validTo).getTime() > now ? [stored.ca.cert] : []), ...carried];
    return { action: 'issue-all', reason: `the CA expires at ${new Date(ca.validTo).toISOString()}`, stillTrusted };
  }
  if (carried.length > 0)
    return {
      action: 'extend-bundle',
      reason: `the webhooks trust ${carried.length === 1 ? 'a CA' : `${carried.length} CAs`} the Secret's bundle lacks; replicas may still serve certificates signed by ${carried.length === 1 ? 'it' : 'them'}`,
      carried,
    };
  const serving = new X509Certificate(stored.serving.cert);
  if (!serving.verify(ca.publicKey)) return { action: 'issue-serving', reason: 'the serving certificate is not signed by the CA' };
  const names = dnsNamesOf(serving);
  const missing = dnsNames.filter((n) => !names.has(n));
  if (missing.length > 0) return { action: 'issue-serving', reason: `the serving certificate lacks ${missing.join(', ')}` };
  if (dueForRenewal(serving, now)) return { action: 'issue-serving', reason: `the serving certificate expires at ${new Date(serving.validTo).toISOString()}` };
  return { action: 'keep' };
}

/** The DNS names a Service is called by from the API server. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [`${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`, `${service}.${namespace}`, service];
}

/** The fail-closed webhooks of `configuration` (its annotation names them): each one's failurePolicy, and whether the injector armed it once. */
function failClosedWebhooks(configuration: unknown): { name: string; failurePolicy: unknown; armedOnce: boolean }[] {
  const config = configuration as { webhooks?: unknown };
  const failClosed = namesIn(configuration, failClosedAnnotation);
  const armedOnce = namesIn(configuration, armedAnnotation);
  const webhooks = Array.isArray(config?.webhooks) ? (config.webhooks as { name?: unknown; failurePolicy?: unknown }[]) : [];
  return webhooks
    .filter((w): w is { name: string; failurePolicy?: unknown } => typeof w?.name === 'string' && failClosed.has(w.name))
    .map((w) => ({ name: w.name, failurePolicy: w.failurePolicy, armedOnce: armedOnce.has(w.name) }));
}

/** The fail-closed webhooks of `configuration` never armed by the injector and not `Fail` now. */
export function unarmed(configuration: unknown): string[] {
  return failClosedWebhooks(configuration)
    .filter((w) => !w.armedOnce && w.failurePolicy !== 'Fail')
    .map((w) => w.name);
}

/**
 * The fail-closed webhooks the injector armed once whose failurePolicy is not `Fail` now: an
 * operator lowered them (during an incident, or from git), and the injector never arms a webhook
 * twice, so they fail open until someone sets them back. Never forgotten silently.
 */
export function failingOpen(configuration: unknown): string[] {
  return failClosedWebhooks(configuration)
    .filter((w) => w.armedOnce && w.failurePolicy !== 'Fail')
    .map((w) => w.name);
}

/**
 * The strategic merge patch (webhooks are merged by name) that writes `caBundle` into every
 * webhook of `configuration` and, when `arm`, arms the fail-closed ones never armed before,
 * recording them (armedAnnotation); undefined when nothing is to change. It carries the
 * resourceVersion read: a configuration changed meanwhile is refused (409).
 */
export function webhookPatch(
  configuration: unknown,
  caBundle: string,
  arm = true,
): { readonly patch: Record<string, unknown>; readonly webhooks: string[] } | undefined {
  const config = configuration as { metadata?: { resourceVersion?: unknown; annotations?: Record<string, unknown> }; webhooks?: unknown };
  const webhooks = Array.isArray(config?.webhooks) ? (config.webhooks as unknown[]) : [];
  const toArm = new Set(arm ? unarmed(configuration) : []);
  const changes: Record<string, unknown>[] = [];
  for (const hook of webhooks) {
    const { name, clientConfig } = (hook ?? {}) as { name?: unknown; clientConfig?: { caBundle?: unknown } };
    if (typeof name !== 'string') continue;
    const change: Record<string, unknown> = {};
    if (clientConfig?.caBundle !== caBundle) change.clientConfig = { caBundle };
    if (toArm.has(name)) change.failurePolicy = 'Fail';
    if (Object.keys(change).length > 0) changes.push({ name, ...change });
  }
  if (changes.length === 0) return undefined;
  const resourceVersion = config.metadata?.resourceVersion;
  const armed = changes.filter((c) => c.failurePolicy === 'Fail').map((c) => c.name as string);
  const record = armed.length > 0 ? { annotations: { [armedAnnotation]: [...namesIn(configuration, armedAnnotation), ...armed].join(',') } } : {};
  return {
    patch: { metadata: { ...(typeof resourceVersion === 'string' ? { resourceVersion } : {}), ...record }, webhooks: changes },
    webhooks: changes.map((c) => c.name as string),
  };
}
