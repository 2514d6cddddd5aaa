/**
 * Self-managed certificates (as Gatekeeper's cert-controller and Kyverno do it): the replica
 * holding the lease keeps a CA and a serving certificate for the Service's DNS names in a
 * Secret of its namespace, writes the CA into the caBundle of every webhook of its own
 * MutatingWebhookConfiguration, and renews both when a third of their lifetime is left. Every
 * replica reads the Secret and serves its current certificate, picking up renewals without a
 * restart. The order of writes keeps the API server trusting whatever a replica serves: a new
 * CA goes into the caBundle (beside the old one) before the Secret carries certificates it signed.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CertificateControllerError, KubernetesApiError } from '../errors.js';
import { readyEndpointBehind } from '../kube-api/endpoints.js';
import { requestJson } from '../kube-api/request.js';
import { createCa, createServingCertificate, type Pem } from '../tls/certificates.js';
import { checkKeyPair, type KeyPair } from '../tls/reloader.js';
import {
  SecretKeys,
  bundleToTrust,
  parseSecretData,
  planCertificates,
  serviceDnsNames,
  splitCertificates,
  trustedByConfiguration,
  failingOpen,
  unarmed,
  webhookPatch,
  type CertificatePlan,
} from './plan.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

export interface SelfManagedCertificatesOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** The namespace of the Secret and the Service. */
  readonly namespace: string;
  readonly secretName: string;
  readonly webhookConfigurationName: string;
  /** The Service the API server calls: the certificate carries its DNS names. */
  readonly serviceName: string;
  /**
   * The process's one leader election (kube-api/lease.ts): the elected replica writes the
   * Secret and the webhooks' caBundle; the others only read. Started and stopped by its owner.
   */
  readonly election: CertificateElection;
  /** The clock certificates are made and judged by. @default Date.now */
  readonly now?: () => number;
  /** @default 3650 */
  readonly caDays?: number;
  /** @default 365 */
  readonly certDays?: number;
  /** How often the Secret is read (and, on the leader, reconciled) once a certificate is served. @default 10000 */
  readonly intervalMs?: number;
  /**
   * Whether a replica is ready behind the Service: the fail-closed webhooks are armed only then,
   * since a `Fail` webhook with no ready endpoint refuses every pod it selects. @default the
   * Service's EndpointSlices hold a ready endpoint (readyEndpointBehind)
   */
  readonly readyBehindService?: () => Promise<boolean>;
  /**
   * Told after each of the leader's rounds which fail-closed webhooks it armed now fail open
   * (failingOpen), and `undefined` on a replica that does not lead (it does not read them).
   */
  readonly onFailingOpen?: (webhooks: readonly string[] | undefined) => void;
}

/** What the certificates need of the leader election. */
export interface CertificateElection {
  isLeader(): boolean;
  on(event: 'leading', listener: () => void): unknown;
  off(event: 'leading', listener: () => void): unknown;
}

/** What /status shows. */
export interface SelfManagedStatus {
  readonly secret: string;
  readonly webhookConfiguration: string;
  readonly leading: boolean;
  readonly notAfter: string | null;
  readonly fingerprint256: string | null;
  readonly lastError: string | null;
  /**
   * The fail-closed webhooks the injector armed that an operator set to fail open (failurePolicy
   * not `Fail`), as the leader last read them; null on a replica that does not lead.
   */
  readonly failingOpen: readonly string[] | null;
}

/** What one reconciliation did. */
export interface Reconciled {
  readonly plan: CertificatePlan['action'];
  readonly reason?: string;
  /** Webhooks whose caBundle or failurePolicy was patched. */
  readonly patchedWebhooks: readonly string[];
}

/** How long a request to the API server may take. */
const requestTimeoutMs = 5000;
/** How often the Secret is read while no certificate is served yet. */
const waitingIntervalMs = 1000;

/**
 * Emits `certificate` (KeyPair) each time the Secret holds a new valid serving pair, `leading`
 * when this replica is elected to write certificates, and `failed` (Error) when a read or a
 * write fails (the next round tries again).
 */
export class SelfManagedCertificates extends EventEmitter {
  private readonly now: () => number;
  private readonly dnsNames: string[];
  private readonly secretPath: string;
  private readonly configurationPath: string;
  private pair: KeyPair | undefined;
  private lastError: string | null = null;
  private failOpen: readonly string[] | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private round: Promise<void> | undefined;

  constructor(private readonly options: SelfManagedCertificatesOptions) {
    super();
    this.now = options.now ?? Date.now;
    this.dnsNames = serviceDnsNames(options.serviceName, options.namespace);
    this.secretPath = apiPath(apiResources.secrets, { namespace: options.namespace });
    this.configurationPath = apiPath(apiResources.mutatingWebhookConfigurations, { name: options.webhookConfigurationName });
  }

  /** A new leader reconciles at once: a missing Secret is made without waiting a round. */
  private readonly leading = () => {
    this.emit('leading');
    this.soon(0);
  };

  /** The pair served now (undefined until the Secret first held one). */
  current(): KeyPair | undefined {
    return this.pair;
  }

  isLeader(): boolean {
    return this.options.election.isLeader();
  }

  status(): SelfManagedStatus {
    return {
      secret: `${this.options.namespace}/${this.options.secretName}`,
      webhookConfiguration: this.options.webhookConfigurationName,
      leading: this.options.election.isLeader(),
      notAfter: this.pair?.notAfter.toISOString() ?? null,
      fingerprint256: this.pair?.fingerprint256 ?? null,
      lastError: this.lastError,
      failingOpen: this.failOpen ?? null,
    };
  }

  /** Starts the rounds (read the Secret; on the leader, reconcile first). */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.options.election.on('leading', this.leading);
    this.soon(0);
  }

  /** Resolves with the first valid pair the Secret holds (at once when one is served already). */
  ready(): Promise<KeyPair> {
    if (this.pair) return Promise.resolve(this.pair);
    return new Promise((resolve) => this.once('certificate', resolve));
  }

  /** Calls `apply` with every pair served after `since` (at once when the current one is already newer). */
  follow(since: KeyPair, apply: (pair: KeyPair) => void): void {
    this.on('certificate', apply);
    if (this.pair && this.pair !== since) apply(this.pair);
  }

  /** Stops the rounds. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.round;
    this.options.election.off('leading', this.leading);
  }

  private soon(delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.runRound(), delayMs);
    this.timer.unref();
  }

  private async runRound(): Promise<void> {
    if (this.round) return;
    this.round = (async () => {
      // The Secret is read even when the leader's reconcile failed (a webhook configuration not
      // there yet, a refused patch): a pair already in it is served all the same.
      const failures: Error[] = [];
      if (this.options.election.isLeader()) await this.reconcile().catch((err: Error) => failures.push(err));
      else this.failOpen = undefined;
      this.options.onFailingOpen?.(this.failOpen);
      await this.refresh().catch((err: Error) => failures.push(err));
      this.lastError = failures.length > 0 ? failures.map((e) => e.message).join('; ') : null;
      for (const err of failures) {
        this.options.log.warn({ err: err.message }, 'self-managed certificates: round failed; trying again');
        this.emit('failed', err);
      }
    })();
    await this.round;
    this.round = undefined;
    this.soon(this.pair ? (this.options.intervalMs ?? 10_000) : waitingIntervalMs);
  }

  /** Reads the Secret and takes its serving pair when it is new and valid; returns the pair served. */
  async refresh(): Promise<KeyPair | undefined> {
    const secret = await this.readSecret();
    const stored = parseSecretData(secret?.data);
    if ('problem' in stored) {
      if (secret) this.options.log.warn({ problem: stored.problem }, 'the certificate Secret holds no usable pair; keeping the current one');
      return this.pair;
    }
    if (stored.serving.cert === this.pair?.cert && stored.serving.key === this.pair.key) return this.pair;
    this.pair = checkKeyPair(stored.serving.cert, stored.serving.key);
    this.emit('certificate', this.pair);
    return this.pair;
  }

  /**
   * The leader's work, one round: make or renew what the Secret holds, and make the webhook
   * configuration trust its CA (and arm the fail-closed webhooks). Safe to run on any replica:
   * every write carries the resourceVersion read, so a concurrent writer makes it fail (409).
   */
  async reconcile(): Promise<Reconciled> {
    const secret = await this.readSecret();
    const stored = secret ? parseSecretData(secret.data) : undefined;
    const now = this.now();
    // What the webhooks trust now stays trusted: replicas switch certificates seconds apart.
    // (No configuration yet: nothing is trusted; trust() below says it is missing.)
    const configuration = await this.readConfiguration().catch((err: unknown) => {
      if (err instanceof CertificateControllerError && err.cause instanceof KubernetesApiError && err.cause.statusCode === 404) return undefined;
      throw err;
    });
    // No configuration at all: nothing fails open (and nothing stale is reported).
    this.noteFailingOpen(configuration ?? {});
    const trusted = trustedByConfiguration(configuration, now);
    const plan = planCertificates(stored, now, this.dnsNames, trusted);
    if (plan.action === 'keep' && stored && !('problem' in stored)) {
      return { plan: plan.action, patchedWebhooks: await this.trust(stored.bundle) };
    }
    this.options.log.info({ reason: 'reason' in plan ? plan.reason : undefined, action: plan.action }, 'issuing certificates');
    const previous = stored && !('problem' in stored) ? stored : undefined;
    let ca: Pem;
    let bundle: readonly string[];
    let serving: Pem;
    if (plan.action === 'extend-bundle' && previous) {
      // The same CA and serving certificate; the bundle carries what the webhooks still trust.
      ca = previous.ca;
      bundle = splitCertificates([...previous.bundle, ...plan.carried].join('\n'));
      serving = previous.serving;
    } else if (plan.action === 'issue-serving' && previous) {
      ca = previous.ca;
      bundle = previous.bundle;
      serving = await createServingCertificate(ca, this.dnsNames, [], this.options.certDays ?? 365, now);
    } else {
      ca = await createCa(this.options.caDays ?? 3650, 'sidecar-injector CA', now);
      // In the form a bundle is read back in (one newline after each), so the caBundle compares equal.
      bundle = splitCertificates([ca.cert, ...(plan.action === 'issue-all' ? plan.stillTrusted : [])].join('\n'));
      serving = await createServingCertificate(ca, this.dnsNames, [], this.options.certDays ?? 365, now);
    }
    const patched = new Set<string>();
    // Trust first: replicas serve what the Secret holds as soon as they read it. (A first install,
    // with nothing served and nothing trusted yet: the Secret first, so that the required webhook
    // is armed only once there is a certificate to serve.)
    if (secret || trusted.length > 0) for (const name of await this.trust(bundle)) patched.add(name);
    await this.writeSecret(secret, ca, bundle, serving);
    for (const name of await this.trust(bundle)) patched.add(name);
    return { plan: plan.action, ...('reason' in plan ? { reason: plan.reason } : {}), patchedWebhooks: [...patched] };
  }

  /** Remembers which armed webhooks fail open now, and logs a change of that list. */
  private noteFailingOpen(configuration: unknown): void {
    const now = failingOpen(configuration);
    if (now.join(',') !== (this.failOpen ?? []).join(','))
      this.options.log[now.length > 0 ? 'warn' : 'info'](
        { webhooks: now },
        now.length > 0
          ? 'fail-closed webhooks set to fail open by someone else: pods they match are created without their required sidecars while the injector is unreachable; set failurePolicy back to Fail'
          : 'no fail-closed webhook fails open',
      );
    this.failOpen = now;
  }

  private async readConfiguration(): Promise<unknown> {
    try {
      return await requestJson(this.options.kubeConfig, 'GET', this.configurationPath, requestTimeoutMs);
    } catch (err) {
      throw explain(err, `get MutatingWebhookConfiguration ${this.options.webhookConfigurationName}`);
    }
  }

  private async readSecret(): Promise<Record<string, any> | undefined> {
    try {
      return (await requestJson(
        this.options.kubeConfig,
        'GET',
        apiPath(apiResources.secrets, { namespace: this.options.namespace, name: this.options.secretName }),
        requestTimeoutMs,
      )) as Record<string, any>;
    } catch (err) {
      if (err instanceof KubernetesApiError && err.statusCode === 404) return undefined;
      throw explain(err, `get Secret ${this.options.namespace}/${this.options.secretName}`);
    }
  }

  /** Creates the Secret, or updates the one read (its other keys, labels and annotations kept). */
  private async writeSecret(existing: Record<string, any> | undefined, ca: Pem, bundle: readonly string[], serving: Pem): Promise<void> {
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    const data = {
      [SecretKeys.cert]: b64(serving.cert),
      [SecretKeys.key]: b64(serving.key),
      [SecretKeys.caBundle]: b64(bundle.join('')),
      [SecretKeys.caKey]: b64(ca.key),
    };
    const { namespace, secretName } = this.options;
    try {
      if (existing) {
        await requestJson(
          this.options.kubeConfig,
          'PUT',
          apiPath(apiResources.secrets, { namespace: this.options.namespace, name: secretName }),
          requestTimeoutMs,
          {
            body: { ...existing, data: { ...existing.data, ...data } },
          },
        );
      } else {
        await requestJson(this.options.kubeConfig, 'POST', this.secretPath, requestTimeoutMs, {
          body: {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: {
              name: secretName,
              namespace,
              labels: { 'app.kubernetes.io/name': 'sidecar-injector', 'app.kubernetes.io/managed-by': 'sidecar-injector' },
            },
            type: 'kubernetes.io/tls',
            data,
          },
        });
      }
    } catch (err) {
      throw explain(err, `${existing ? 'update' : 'create'} Secret ${namespace}/${secretName}`);
    }
    this.options.log.info({ secret: `${namespace}/${secretName}` }, existing ? 'certificate Secret renewed' : 'certificate Secret created');
  }

  /**
   * Puts `bundle` into every webhook's caBundle, and arms the fail-closed ones once a replica is
   * ready behind the Service; returns the webhooks patched.
   */
  private async trust(bundle: readonly string[]): Promise<string[]> {
    const name = this.options.webhookConfigurationName;
    const configuration = await this.readConfiguration();
    const toArm = unarmed(configuration);
    const arm = toArm.length > 0 && (await this.readyToArm(toArm));
    const change = webhookPatch(configuration, Buffer.from(bundleToTrust(bundle, configuration, this.now()).join('')).toString('base64'), arm);
    if (!change) return [];
    try {
      // Named: a GitOps tool or Helm that applies server-side sees whose the fields are.
      await requestJson(this.options.kubeConfig, 'PATCH', `${this.configurationPath}?fieldManager=sidecar-injector`, requestTimeoutMs, {
        body: change.patch,
        contentType: 'application/strategic-merge-patch+json',
      });
    } catch (err) {
      throw explain(err, `patch MutatingWebhookConfiguration ${name}`);
    }
    this.options.log.info({ webhookConfiguration: name, webhooks: change.webhooks, ...(arm ? { armed: toArm } : {}) }, 'webhook caBundle written');
    return change.webhooks;
  }

  /** Whether the fail-closed webhooks may be armed now: a replica answers behind the Service. A failed look says no, and why. */
  private async readyToArm(webhooks: readonly string[]): Promise<boolean> {
    const { kubeConfig, namespace, serviceName } = this.options;
    try {
      if (await (this.options.readyBehindService ?? (() => readyEndpointBehind(kubeConfig, namespace, serviceName)))()) return true;
      this.options.log.info(
        { webhooks, service: `${namespace}/${serviceName}` },
        'fail-closed webhooks not armed yet: no replica is ready behind the Service (a Fail webhook without one refuses every pod)',
      );
    } catch (err) {
      this.options.log.warn(
        { webhooks, err: explain(err, `list EndpointSlices of Service ${namespace}/${serviceName}`).message },
        'fail-closed webhooks not armed: whether a replica is ready behind the Service could not be read',
      );
    }
    return false;
  }
}

/** An API error with what was attempted, and for 403 the RBAC rule that is missing. */
function explain(err: unknown, what: string): CertificateControllerError {
  if (err instanceof KubernetesApiError && err.statusCode === 403) {
    return new CertificateControllerError(`${what}: forbidden (HTTP 403): the service account needs the rule for it (manifests/base/certificates-rbac.yaml)`, {
      cause: err,
    });
  }
  if (err instanceof KubernetesApiError && err.statusCode === 404) return new CertificateControllerError(`${what}: not found (HTTP 404)`, { cause: err });
  if (err instanceof KubernetesApiError && err.statusCode === 409)
    return new CertificateControllerError(`${what}: changed meanwhile (HTTP 409); the next round reads it again`, { cause: err });
  return new CertificateControllerError(`${what}: ${(err as Error).message}`, { cause: err });
}
