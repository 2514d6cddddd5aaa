/**
 * Certificates: a CA, and serving certificates it signs. Used for the throw-away development
 * certificate of a local run, by `sidecar-injector certs`, and by tests.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { generate } from 'selfsigned';

/** PEM texts of a certificate and its private key. */
export interface Pem {
  readonly cert: string;
  readonly key: string;
}

/** PEM texts of a CA and of a serving certificate it signed. */
export interface CertificateBundle {
  readonly caCert: string;
  readonly caKey: string;
  readonly cert: string;
  readonly key: string;
}

const day = 24 * 60 * 60 * 1000;

function validity(days: number, now: number): { notBeforeDate: Date; notAfterDate: Date } {
  // Back-dated a minute: clocks in a cluster are not perfectly in step.
  const notBeforeDate = new Date(now - 60_000);
  return { notBeforeDate, notAfterDate: new Date(notBeforeDate.getTime() + days * day) };
}

/** Creates a CA valid for `days` days from `now` (EC P-256 keys: fast to make, accepted by Go's TLS stack). */
export async function createCa(days: number, commonName = 'sidecar-injector CA', now = Date.now()): Promise<Pem> {
  const ca = await generate([{ name: 'commonName', value: commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    ...validity(days, now),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: ca.cert, key: ca.private };
}

/** Creates a serving certificate for `dnsNames` and `ipAddresses`, signed by `ca`, valid for `days` days from `now`. */
export async function createServingCertificate(
  ca: Pem,
  dnsNames: readonly string[],
  ipAddresses: readonly string[],
  days: number,
  now = Date.now(),
): Promise<Pem> {
  const serving = await generate([{ name: 'commonName', value: dnsNames[0] ?? ipAddresses[0] ?? 'sidecar-injector' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    ...validity(days, now),
    ca: { key: ca.key, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [...dnsNames.map((value) => ({ type: 2 as const, value })), ...ipAddresses.map((ip) => ({ type: 7 as const, ip }))],
      },
    ],
  });
  return { cert: serving.cert, key: serving.private };
}

/** Creates a CA and a serving certificate it signed, both valid for `days` days. */
export async function createCertificates(dnsNames: readonly string[], ipAddresses: readonly string[], days = 365): Promise<CertificateBundle> {
  const ca = await createCa(days);
  const serving = await createServingCertificate(ca, dnsNames, ipAddresses, days);
  return { caCert: ca.cert, caKey: ca.key, cert: serving.cert, key: serving.key };
}

/** Days until a PEM certificate expires (negative when expired). */
export function daysLeft(cert: string, now = Date.now()): number {
  return (new Date(new X509Certificate(cert).validTo).getTime() - now) / day;
}

/**
 * The CA certificates in a PEM file, checked: each block parses and is a CA. Throws with what is
 * wrong (the file, the block) when not.
 */
export async function readCaCertificates(file: string): Promise<string> {
  const text = await readFile(file, 'utf8');
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error(`${file} holds no PEM certificate`);
  for (const [i, block] of blocks.entries()) {
    let certificate: X509Certificate;
    try {
      certificate = new X509Certificate(block);
    } catch (err) {
      throw new Error(`${file}: certificate ${i + 1} does not parse (${(err as Error).message})`, { cause: err });
    }
    if (!certificate.ca) throw new Error(`${file}: certificate ${i + 1} (${certificate.subject.replace(/\n/g, ', ')}) is not a CA`);
  }
  return `${blocks.join('\n')}\n`;
}
