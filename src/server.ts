/**
 * The HTTPS server: TLS, timeouts, connection limits, listen and a close that delivers every
 * answer already written. It runs whatever request handler it is given (the koa app's callback).
 */
import https from 'node:https';
import net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { systemClock, type Clock } from './clock.js';

/** Timeouts that keep slow, idle or non-reading clients from holding connections forever. */
export interface ServerTimeouts {
  /** Time to receive a request's headers. @default 10000 */
  readonly headersTimeoutMs: number;
  /**
   * Time to receive a whole request. The API server gives a webhook at most its timeoutSeconds
   * (5 s in our manifests, 30 s at most): an upload slower than this serves nobody. @default 10000
   */
  readonly requestTimeoutMs: number;
  /**
   * Idle time before a kept-alive connection is closed. Longer than Node's 5 s default, which
   * resets connections the API server still holds in its pool; above Go's 90 s idle timeout so
   * that the client, not the server, closes idle connections. @default 120000
   */
  readonly keepAliveTimeoutMs: number;
  /**
   * Time a written answer may wait for the client to read it. A client that never reads
   * would otherwise hold the connection and the buffered answer forever. @default 10000
   */
  readonly writeTimeoutMs?: number;
}

export const defaultTimeouts: ServerTimeouts = { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 120_000, writeTimeoutMs: 10_000 };

/**
 * Open TLS connections kept at once. The API server keeps a small pool per replica; each idle
 * TLS connection costs about 60 KB, so this bounds what idle connections can pin (≈ 30 MB).
 * A new connection beyond it is not refused: an idle one is closed instead, never-used ones
 * first, then the least recently used, so that a client hoarding connections can lock neither
 * the API server out nor its busy pooled connections.
 */
const defaultMaxConnections = 500;

/** What to serve and where. */
export interface ServerOptions {
  readonly host: string;
  readonly port: number;
  readonly key: string;
  readonly cert: string;
  readonly timeouts: ServerTimeouts;
  /** Connections kept; beyond, the least recently used idle one is closed. @default defaultMaxConnections */
  readonly maxConnections?: number;
  /** Paces the write-timeout sweep. @default systemClock */
  readonly clock?: Clock;
}

/** A listening server. */
export interface RunningServer {
  readonly server: https.Server;
  readonly port: number;
  /**
   * Stops accepting connections; ends idle ones once their written answers are flushed, and
   * busy ones after their answer; resolves when all are gone. Never cuts an answer short.
   */
  close(): Promise<void>;
}

/** Per-connection state: requests not yet answered, the latest one, and when it came. */
interface Connection {
  active: number;
  /** Time of the last request; 0 while none was sent. */
  lastRequestAt: number;
  /** The latest request: while its body is still arriving, the connection is an upload. */
  request?: IncomingMessage;
  /** Answers not known to be flushed, oldest first (HTTP/1.1 sends them in this order). */
  answers: ServerResponse[];
  /** The oldest answer a sweep found written in full but not flushed, and when it first did. */
  unflushed?: ServerResponse;
  unflushedSince: number;
}

/** True once an answer is flushed to the socket, or can no longer be. */
const done = (res: ServerResponse) => res.writableFinished || res.destroyed;

/**
 * The connection to close to make room, or undefined when every one is answering a request
 * already received (then the new connection is refused instead): an idle one that never sent a
 * request (a hoarder's), oldest first; else the idle one whose last request is the oldest; else
 * the oldest whose request body is still arriving (a stalled upload: real reviews arrive in
 * milliseconds). The API server's pooled connections carry requests all the time, so they go last.
 */
function evictable(connections: ReadonlyMap<TLSSocket, Connection>): TLSSocket | undefined {
  let idle: TLSSocket | undefined;
  let idleSince = Infinity;
  let upload: TLSSocket | undefined;
  let uploadSince = Infinity;
  for (const [socket, state] of connections) {
    if (state.active === 0) {
      if (state.lastRequestAt === 0) return socket;
      if (state.lastRequestAt < idleSince) [idle, idleSince] = [socket, state.lastRequestAt];
    } else if (state.request && !state.request.complete && state.lastRequestAt < uploadSince) {
      [upload, uploadSince] = [socket, state.lastRequestAt];
    }
  }
  return idle ?? upload;
}

/** Starts an HTTPS server with `handler` and resolves once it listens. */
export async function startServer(
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void,
  options: ServerOptions,
): Promise<RunningServer> {
  const { timeouts } = options;
  const writeTimeoutMs = timeouts.writeTimeoutMs ?? defaultTimeouts.writeTimeoutMs!;
  const clock = options.clock ?? systemClock;
  const connections = new Map<TLSSocket, Connection>();
  let closing = false;
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
      const socket = req.socket as TLSSocket;
      const connection = connections.get(socket);
      if (connection) {
        connection.active++;
        connection.lastRequestAt = clock.now();
        connection.request = req;
        while (connection.answers.length > 0 && done(connection.answers[0]!)) connection.answers.shift();
        connection.answers.push(res);
      }
      res.once('close', () => {
        if (connection) connection.active--;
        if (closing && connection?.active === 0) socket.end();
      });
      void handler(req, res);
    },
  );
  const maxConnections = options.maxConnections ?? defaultMaxConnections;
  // Connections still in their TLS handshake are bounded too (and time out after the headers timeout).
  server.maxConnections = 2 * maxConnections;
  server.on('secureConnection', (socket: TLSSocket) => {
    if (connections.size >= maxConnections) {
      const victim = evictable(connections);
      if (!victim) {
        // Every connection is answering a request it has received: this one waits its turn elsewhere.
        socket.destroy();
        return;
      }
      connections.delete(victim);
      victim.destroy();
    }
    connections.set(socket, { active: 0, lastRequestAt: 0, answers: [], unflushedSince: 0 });
    socket.once('close', () => connections.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  // An answer written in full (end() called) must reach its client within the write timeout; a
  // client that does not read it loses the connection instead of pinning the buffered answer.
  // A sweep rather than a timer per answer: answers are flushed at once all but always, and a
  // timer set and cleared on every review costs more than looking at 500 connections now and
  // then. The sweep watches each connection's oldest answer not yet flushed, whatever requests
  // come after it (they cannot be answered before it); the connection goes at most two sweeps
  // (each at most a second, or half the write timeout) later than the write timeout after end().
  const sweep = clock.every(Math.max(10, Math.min(1000, writeTimeoutMs / 2)), () => {
    const now = clock.now();
    for (const [socket, connection] of connections) {
      const { answers } = connection;
      while (answers.length > 0 && done(answers[0]!)) answers.shift();
      const oldest = answers[0];
      if (!oldest?.writableEnded) connection.unflushed = undefined;
      else if (connection.unflushed !== oldest) [connection.unflushed, connection.unflushedSince] = [oldest, now];
      else if (now - connection.unflushedSince >= writeTimeoutMs) socket.destroy();
    }
  });
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        server.once('close', () => sweep.cancel());
        // net.Server's close, not http.Server's: the latter destroys idle connections at once,
        // cutting an answer that is written but not yet flushed to a slow reader.
        net.Server.prototype.close.call(server, () => resolve());
        // end() sends what is buffered, then closes: an idle connection goes once its answer is out.
        for (const [socket, connection] of connections) if (connection.active === 0) socket.end();
      }),
  };
}
