/**
 * Serving certificate files that change under a running server. A mounted Secret is updated
 * by swapping a `..data` symlink, so both files change at once, but a reader can straddle the
 * swap: a pair is only taken when the key matches the certificate. Changes are noticed by
 * watching the directories and, because file events are unreliable on some volume types, by a
 * periodic check as well (as controller-runtime's certwatcher does).
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { Reloadable } from '../reloadable.js';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { WatchedFiles } from '../fs/watched-check.js';

/** A certificate and its key, checked to belong together. */
export interface KeyPair {
  readonly cert: string;
  readonly key: string;
  /** When the serving certificate expires. */
  readonly notAfter: Date;
  readonly fingerprint256: string;
}

/** Checks that `key` is the private key of `cert` and reads the certificate's expiry. Throws otherwise. */
export function checkKeyPair(cert: string, key: string): KeyPair {
  const x509 = new X509Certificate(cert);
  if (!x509.checkPrivateKey(createPrivateKey(key))) throw new Error('the private key does not belong to the certificate');
  return { cert, key, notAfter: new Date(x509.validTo), fingerprint256: x509.fingerprint256 };
}

/** Reads and checks a key pair from files. */
export async function readKeyPair(certFile: string, keyFile: string): Promise<KeyPair> {
  const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  return checkKeyPair(cert, key);
}

/** What /status shows about the serving certificate. */
export interface CertificateStatus {
  readonly notAfter: string;
  readonly fingerprint256: string;
}

/**
 * Watches a certificate and key file and calls `apply` with each new valid pair. Emits `reload`
 * (pair) after applying one and `rejected` (err) when the files hold no valid pair (the last
 * good pair stays in use).
 */
export class CertificateReloader extends WatchedFiles implements Reloadable<KeyPair, CertificateStatus> {
  constructor(
    private readonly certFile: string,
    private readonly keyFile: string,
    private pair: KeyPair,
    private readonly apply: (pair: KeyPair) => void,
    intervalMs = 10_000,
  ) {
    super([dirname(certFile), dirname(keyFile)], intervalMs);
  }

  /** The pair in use. */
  current(): KeyPair {
    return this.pair;
  }

  status(): CertificateStatus {
    return { notAfter: this.pair.notAfter.toISOString(), fingerprint256: this.pair.fingerprint256 };
  }

  protected async checkOnce(): Promise<void> {
    try {
      const pair = await readKeyPair(this.certFile, this.keyFile);
      if (pair.cert !== this.pair.cert || pair.key !== this.pair.key) {
        this.apply(pair);
        this.pair = pair;
        this.emit('reload', pair);
      }
    } catch (err) {
      this.emit('rejected', err);
    }
  }
}
