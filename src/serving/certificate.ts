/**
 * The serving certificate, a runnable with three sources: files (`--tls-cert`/`--tls-key`,
 * checked to match, reloaded when a Secret update swaps them), the Secret of self-managed
 * certificates (`--tls-secret`: started here, and ready once the Secret holds a pair, made by
 * whichever replica leads), or a throw-away development CA. The server it serves follows every
 * new pair (`follow`); the development CA's file is written only once the server listens
 * (`listening`), so that a second start that cannot listen never replaces the CA of the one
 * that is running.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { KubeConfig } from '@kubernetes/client-node';
import type { CertificateElection, SelfManagedCertificates } from '../certs/self-managed.js';
import type { Config } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { Runnable } from '../runtime/runnable.js';
import { createCertificates } from '../tls/certificates.js';
import { CertificateReloader, checkKeyPair, readKeyPair, type KeyPair } from '../tls/reloader.js';

export class ServingCertificate implements Runnable {
  readonly name = 'certificate';
  private pair: KeyPair | undefined;
  private selfManaged: SelfManagedCertificates | undefined;
  private reloader: CertificateReloader | undefined;
  private devCa: string | undefined;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    /** Self-managed certificates: the cluster, and the one election whose leader writes them. */
    private readonly cluster?: { readonly kubeConfig: KubeConfig; readonly election: CertificateElection },
  ) {}

  /** Resolves once there is a pair to serve (self-managed: once the Secret holds one). */
  async start(): Promise<void> {
    const { config, log } = this;
    if (config.selfManaged) {
      if (!this.cluster) throw new Error('self-managed certificates need the cluster and its leader election');
      const { SelfManagedCertificates } = await import('../certs/self-managed.js');
      this.selfManaged = new SelfManagedCertificates({
        kubeConfig: this.cluster.kubeConfig,
        log: log.child({ component: 'certificates' }),
        namespace: config.namespace,
        election: this.cluster.election,
        // 1 for each fail-closed webhook failing open, on the leader; none on the other replicas.
        onFailingOpen: (webhooks) => {
          this.metrics.webhookFailingOpen.reset();
          for (const name of webhooks ?? []) this.metrics.webhookFailingOpen.set({ webhook: name.slice(0, 100) }, 1);
        },
        ...config.selfManaged,
      });
      this.selfManaged.start();
      log.info({ secret: `${config.namespace}/${config.selfManaged.secretName}` }, 'waiting for the serving certificate in the Secret');
      this.pair = await this.selfManaged.ready();
    } else if (config.tlsCertFile && config.tlsKeyFile) {
      try {
        this.pair = await readKeyPair(config.tlsCertFile, config.tlsKeyFile);
      } catch (err) {
        throw new ConfigError([`cannot use the TLS certificate and key: ${(err as Error).message}`]);
      }
    } else {
      const bundle = await createCertificates(['localhost'], ['127.0.0.1', '::1'], 7);
      this.devCa = bundle.caCert;
      this.pair = checkKeyPair(bundle.cert, bundle.key);
    }
  }

  /** The pair to serve now. */
  current(): KeyPair {
    if (!this.pair) throw new Error('the serving certificate has not started');
    return this.pair;
  }

  /**
   * Once the server listens: writes the development CA (when serving one), logs the pair, and
   * calls `apply` with every later pair (a renewed Secret, swapped files).
   */
  async listening(apply: (pair: KeyPair) => void): Promise<void> {
    const { config, log } = this;
    if (this.devCa !== undefined) {
      const caFile = join(config.devCertDir, 'ca.crt');
      try {
        await mkdir(config.devCertDir, { recursive: true });
        await writeFile(caFile, this.devCa);
      } catch (err) {
        throw new ConfigError([`--dev-cert-dir: cannot write ${caFile}: ${(err as Error).message}`]);
      }
      log.warn(
        { caFile },
        'no --tls-cert/--tls-key given: serving a throw-away development certificate for localhost and 127.0.0.1; trust it with curl --cacert',
      );
    }
    const pair = this.current();
    this.serving(pair, 'serving certificate');
    if (config.tlsCertFile && config.tlsKeyFile) {
      // A Secret update swaps the mounted files: new handshakes get the new pair, open connections keep theirs.
      this.reloader = new CertificateReloader(config.tlsCertFile, config.tlsKeyFile, pair, (next) => apply(next));
      this.reloader.on('reload', (next: KeyPair) => this.serving(next, 'serving certificate reloaded'));
      this.reloader.on('rejected', (err: Error) => log.warn({ err: err.message }, 'serving certificate files hold no valid pair; keeping the current one'));
      this.reloader.start();
    }
    this.selfManaged?.follow(pair, (next) => {
      apply(next);
      this.serving(next, 'serving certificate renewed from the Secret');
    });
  }

  /** A pair the server serves from now: kept, its expiry measured, logged. */
  private serving(pair: KeyPair, message: string): void {
    this.pair = pair;
    this.metrics.certificateExpiry.set(pair.notAfter.getTime() / 1000);
    this.log.info({ notAfter: pair.notAfter.toISOString(), fingerprint256: pair.fingerprint256 }, message);
  }

  /** At a stop, before the lease goes: the self-managed rounds end (one under way finishes); the pair stays served. */
  async quiesce(): Promise<void> {
    await this.selfManaged?.stop();
  }

  status(): unknown {
    const pair = this.pair;
    return (
      this.reloader?.status() ?? this.selfManaged?.status() ?? { notAfter: pair?.notAfter.toISOString() ?? null, fingerprint256: pair?.fingerprint256 ?? null }
    );
  }

  async stop(): Promise<void> {
    this.reloader?.stop();
    await this.selfManaged?.stop();
  }
}
