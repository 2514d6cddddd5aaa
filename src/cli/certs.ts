/**
 * `sidecar-injector certs`: certificates without cert-manager. Writes a CA (kept and reused,
 * so that re-running rotates only the serving certificate), a serving certificate for
 * `<service>.<namespace>.svc`, and a kustomize overlay that adds the Secret and sets the
 * webhook's caBundle. Re-running it and re-applying the overlay rotates the certificate; the
 * running injector reloads it without a restart.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseOptions } from '../options.js';
import { certsOptions } from './usage.js';
import { ConfigError } from '../errors.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { quote } from '../quote.js';
import { checkKeyPair } from '../tls/reloader.js';
import { createCa, createServingCertificate, daysLeft, type Pem } from '../tls/certificates.js';

/** What `certs` wrote. */
export interface CertsResult {
  readonly out: string;
  readonly reusedCa: boolean;
  readonly dnsNames: readonly string[];
  readonly notAfter: Date;
}

/** Certificate lifetimes accepted, in days: up to 100 years (X.509 dates end at 9999). */
const maxDays = 36_500;

function positive(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > maxDays) {
    throw new ConfigError([`--${name}: expected a whole number of days from 1 to ${maxDays} (got ${quote(value)})`]);
  }
  return Number(value);
}

async function existingCa(out: string): Promise<Pem | undefined> {
  try {
    const [cert, key] = await Promise.all([readFile(join(out, 'ca.crt'), 'utf8'), readFile(join(out, 'ca.key'), 'utf8')]);
    checkKeyPair(cert, key);
    return daysLeft(cert) > 30 ? { cert, key } : undefined;
  } catch {
    return undefined;
  }
}

/** The overlay's kustomization: the base, the TLS Secret, the caBundle of every webhook (required, optional, SidecarTemplate admission). */
function kustomization(base: string, service: string, namespace: string, caCert: string): string {
  return `# Written by \`sidecar-injector certs\`: the base plus the serving certificate and the CA.
# Contains references to private keys in this directory; do not commit it.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ${base}
secretGenerator:
  - name: ${service}-tls
    namespace: ${namespace}
    type: kubernetes.io/tls
    # With the CA's pair as well: the injector's self-managed certificates adopt it and renew
    # from it (docs/install.md).
    files:
      - tls.crt
      - tls.key
      - ca.crt
      - ca.key
    options:
      # Same name on rotation: the mounted Secret is updated in place and hot-reloaded.
      disableNameSuffixHash: true
patches:
  - target:
      kind: MutatingWebhookConfiguration
      name: ${service}
    patch: |-
${[0, 1, 2].map((i) => `      - op: add\n        path: /webhooks/${i}/clientConfig/caBundle\n        value: ${Buffer.from(caCert).toString('base64')}\n`).join('')}`;
}

/** Runs `certs` with its arguments; returns what it wrote. */
export async function certs(argv: readonly string[]): Promise<CertsResult> {
  const values = parseOptions('certs', certsOptions, argv).values as Partial<Record<keyof typeof certsOptions, string>>;
  const out = values.out ?? join('manifests', 'overlays', 'self-signed');
  const base = values.base ?? join('manifests', 'base');
  const service = values.service ?? 'sidecar-injector';
  const namespace = values.namespace ?? 'sidecar-injector';
  const days = positive(values.days, 'days', 90);
  const caDays = positive(values['ca-days'], 'ca-days', 3650);
  // They become DNS names in the certificate: each must be a DNS-1123 label.
  const names = [`--service ${quote(service)}`, `--namespace ${quote(namespace)}`].filter((_, i) => !isDns1123Label([service, namespace][i]!));
  if (names.length > 0) throw new ConfigError(names.map((n) => `${n}: expected a DNS-1123 label`));
  try {
    await mkdir(out, { recursive: true });
  } catch (err) {
    throw new ConfigError([`--out ${quote(out)}: ${(err as Error).message}`]);
  }
  const previous = await existingCa(out);
  const ca = previous ?? (await createCa(caDays));
  const dnsNames = [`${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`, `${service}.${namespace}`, service];
  const serving = await createServingCertificate(ca, dnsNames, [], days);
  await writeFile(join(out, 'ca.crt'), ca.cert);
  await writeFile(join(out, 'ca.key'), ca.key, { mode: 0o600 });
  await writeFile(join(out, 'tls.crt'), serving.cert);
  await writeFile(join(out, 'tls.key'), serving.key, { mode: 0o600 });
  await writeFile(join(out, 'kustomization.yaml'), kustomization(relative(out, base) || '.', service, namespace, ca.cert));
  return { out, reusedCa: previous !== undefined, dnsNames, notAfter: checkKeyPair(serving.cert, serving.key).notAfter };
}
