/**
 * Certificates: a CA and a serving certificate signed by it. Used for the throw-away
 * development certificate of a local run, and by tests.
 */
import { generate } from 'selfsigned';

/** PEM texts of a CA and of a serving certificate it signed. */
export interface CertificateBundle {
  readonly caCert: string;
  readonly caKey: string;
  readonly cert: string;
  readonly key: string;
}

const day = 24 * 60 * 60 * 1000;

/**
 * Creates a CA and a serving certificate for `dnsNames` and `ipAddresses`, valid for
 * `days` days (EC P-256 keys: fast to make, accepted by Go's TLS stack).
 */
export async function createCertificates(dnsNames: readonly string[], ipAddresses: readonly string[], days = 365): Promise<CertificateBundle> {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(notBeforeDate.getTime() + days * day);
  const ca = await generate([{ name: 'commonName', value: 'sidecar-injector CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const serving = await generate([{ name: 'commonName', value: dnsNames[0] ?? ipAddresses[0] ?? 'sidecar-injector' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
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
  return { caCert: ca.cert, caKey: ca.private, cert: serving.cert, key: serving.private };
}
