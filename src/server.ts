/**
 * The HTTPS server: TLS, timeouts, listen and close. It runs whatever request handler it is
 * given (the koa app's callback).
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Timeouts that keep slow or idle clients from holding connections forever. */
export interface ServerTimeouts {
  /** Time to receive a request's headers. @default 10000 */
  readonly headersTimeoutMs: number;
  /** Time to receive a whole request. @default 30000 */
  readonly requestTimeoutMs: number;
  /**
   * Idle time before a kept-alive connection is closed. Longer than Node's 5 s default, which
   * resets connections the API server still holds in its pool; above Go's 90 s idle timeout so
   * that the client, not the server, closes idle connections. @default 120000
   */
  readonly keepAliveTimeoutMs: number;
}

export const defaultTimeouts: ServerTimeouts = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 120_000 };

/** What to serve and where. */
export interface ServerOptions {
  readonly host: string;
  readonly port: number;
  readonly key: string;
  readonly cert: string;
  readonly timeouts: ServerTimeouts;
}

/** A listening server. */
export interface RunningServer {
  readonly server: https.Server;
  readonly port: number;
  /** Stops accepting connections, closes idle ones and resolves when all are gone. */
  close(): Promise<void>;
}

/** Starts an HTTPS server with `handler` and resolves once it listens. */
export async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void, options: ServerOptions): Promise<RunningServer> {
  const { timeouts } = options;
  const server = https.createServer(
    {
      key: options.key,
      cert: options.cert,
      minVersion: 'TLSv1.2',
      handshakeTimeout: timeouts.headersTimeoutMs,
      // Timeouts are enforced by a periodic sweep; check often so that they bite on time.
      connectionsCheckingInterval: Math.min(1000, timeouts.headersTimeoutMs),
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    },
    (req, res) => {
      void handler(req, res);
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
