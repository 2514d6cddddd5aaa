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
   * Time a new connection has to complete its TLS handshake. The API server's handshake takes
   * milliseconds; a connection that never starts one is closed after this. @default 5000
   */
  readonly handshakeTimeoutMs?: number;
  /**
   * Time a written answer may wait for the client to read it. A client that never reads
   * would otherwise hold the connection and the buffered answer forever. @default 10000
   */
  readonly writeTimeoutMs?: number;
}

export const defaultTimeouts: ServerTimeouts = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 120_000,
  handshakeTimeoutMs: 5_000,
  writeTimeoutMs: 10_000,
};

/**
 * Open TLS connections kept at once. The API server keeps a small pool per replica; each idle
 * TLS connection costs about 60 KB, so this bounds what idle connections can pin (≈ 30 MB).
 * A new connection beyond it is not refused: an idle one is closed instead, never-used ones
 * first, then the least recently used, so that a client hoarding connections can lock neither
 * the API server out nor its busy pooled connections.
 */
const defaultMaxConnections = 500;

/** Requests one connection may have unanswered at once (pipelined): beyond, it is closed. */
const maxUnansweredPerConnection = 2;

/**
 * Connections still in their TLS handshake kept at once, apart from the established ones so that
 * they never keep a completed client out. Beyond it the oldest handshake is closed: a client's
 * real handshake takes milliseconds, so only connections that never start one grow old. A
 * pending handshake holds little (≈ 40 KB with its TLS state): 512 of them about 20 MB.
 */
const defaultMaxHandshakes = 512;

/**
 * Handshakes one source address may have pending: beyond, that source's own oldest is closed,
 * so that one pod opening connections as fast as it can never pushes out another's. Half the
 * bound: the API server opening hundreds of connections at once (a burst of creates) still fits.
 */
const defaultMaxHandshakesPerSource = 256;

/** What to serve and where. */
export interface ServerOptions {
  readonly host: string;
  readonly port: number;
  readonly key: string;
  readonly cert: string;
  /**
   * CA certificates (PEM): clients are asked for a certificate and its verdict is on each
   * connection (`authorized`), for the handler to act on; a connection without one is still
   * accepted (the kubelet's probes present none).
   */
  readonly clientCa?: string;
  readonly timeouts: ServerTimeouts;
  /** Connections kept; beyond, the least recently used idle one is closed. @default defaultMaxConnections */
  readonly maxConnections?: number;
  /** Connections in their TLS handshake kept; beyond, the oldest is closed. @default defaultMaxHandshakes */
  readonly maxHandshakes?: number;
  /** Handshakes one source address may have pending; beyond, its oldest is closed. @default defaultMaxHandshakesPerSource */
  readonly maxHandshakesPerSource?: number;
  /** Paces the write-timeout sweep. @default systemClock */
  readonly clock?: Clock;
}

/** A listening server. */
export interface RunningServer {
  readonly server: https.Server;
  readonly port: number;
  /** Connections in their TLS handshake now. */
  readonly handshakes: () => number;
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
 * request (a hoarder's), oldest first; else one whose answer sweeps have found written and unread
 * for a second (a client that does not read: its slot is not held until the write timeout); else the
 * idle one whose last request is the oldest; else
 * the oldest whose request body is still arriving (a stalled upload: real reviews arrive in
 * milliseconds). The API server's pooled connections carry requests all the time, so they go last.
 */
function evictable(connections: ReadonlyMap<TLSSocket, Connection>, now: number): TLSSocket | undefined {
  let idle: TLSSocket | undefined;
  let idleSince = Infinity;
  let upload: TLSSocket | undefined;
  let uploadSince = Infinity;
  let stuck: TLSSocket | undefined;
  for (const [socket, state] of connections) {
    // An answer written in full that sweeps have found unread for a second: a client that does not read.
    if (state.unflushed !== undefined && !done(state.unflushed) && now - state.unflushedSince >= 1000) stuck ??= socket;
    else if (state.active === 0) {
      if (state.lastRequestAt === 0) return socket;
      if (state.lastRequestAt < idleSince) [idle, idleSince] = [socket, state.lastRequestAt];
    } else if (state.request && !state.request.complete && state.lastRequestAt < uploadSince) {
      [upload, uploadSince] = [socket, state.lastRequestAt];
    }
  }
  return stuck ?? idle ?? upload;
}

/** The key of a TCP connection, the same for its raw socket and for the TLS socket over it. */
const connectionKey = (socket: net.Socket) => `${socket.remoteAddress}|${socket.remotePort}|${socket.localAddress}|${socket.localPort}`;

/**
 * TCP connections whose TLS handshake has not completed, oldest first, bounded in all and per
 * source address: at a bound, the oldest (of all, or of that source) is closed to make room,
 * so a flood of connections that never speak can neither fill the server nor keep a real
 * client's handshake out. A connection leaves when its handshake completes or it closes.
 */
class Handshakes {
  /** Pending connections in arrival order (a Map keeps insertion order). */
  private readonly pending = new Map<string, { socket: net.Socket; source: string }>();
  private readonly perSource = new Map<string, number>();
  constructor(
    private readonly max: number,
    private readonly maxPerSource: number,
  ) {}

  get size(): number {
    return this.pending.size;
  }

  add(socket: net.Socket): void {
    // Reset before it was accepted: it knows no address, and goes by itself.
    if (socket.remoteAddress === undefined) return;
    const key = connectionKey(socket);
    if (this.pending.has(key)) return;
    const source = socket.remoteAddress;
    if ((this.perSource.get(source) ?? 0) >= this.maxPerSource) {
      for (const [oldestKey, entry] of this.pending)
        if (entry.source === source) {
          this.close(oldestKey);
          break;
        }
    }
    if (this.pending.size >= this.max) {
      const oldest = this.pending.keys().next();
      if (!oldest.done) this.close(oldest.value);
    }
    this.pending.set(key, { socket, source });
    this.perSource.set(source, (this.perSource.get(source) ?? 0) + 1);
    socket.once('close', () => this.forget(key, socket));
  }

  /** The handshake over this connection completed. */
  done(socket: net.Socket): void {
    const key = connectionKey(socket);
    const entry = this.pending.get(key);
    if (entry) this.forget(key, entry.socket);
  }

  private close(key: string): void {
    const entry = this.pending.get(key);
    if (!entry) return;
    this.forget(key, entry.socket);
    entry.socket.destroy();
  }

  private forget(key: string, socket: net.Socket): void {
    const entry = this.pending.get(key);
    if (entry?.socket !== socket) return;
    this.pending.delete(key);
    const left = (this.perSource.get(entry.source) ?? 1) - 1;
    if (left > 0) this.perSource.set(entry.source, left);
    else this.perSource.delete(entry.source);
  }
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
      ...(options.clientCa ? { ca: options.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
      minVersion: 'TLSv1.2',
      handshakeTimeout: timeouts.handshakeTimeoutMs ?? defaultTimeouts.handshakeTimeoutMs!,
      // Timeouts are enforced by a periodic sweep; check often so that they bite on time.
      connectionsCheckingInterval: Math.min(1000, timeouts.headersTimeoutMs),
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    },
    (req, res) => {
      const socket = req.socket as TLSSocket;
      const connection = connections.get(socket);
      // HTTP/1.1 pipelining: no client of ours sends a request before reading the answer to the
      // one before (Go's transport, the kubelet, Prometheus), while a client that pipelines and
      // never reads would have every request it packs into a TLS record answered and buffered.
      // A third request while two are unanswered closes the connection.
      if (connection && connection.active >= maxUnansweredPerConnection) {
        socket.destroy();
        return;
      }
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
  const handshakes = new Handshakes(options.maxHandshakes ?? defaultMaxHandshakes, options.maxHandshakesPerSource ?? defaultMaxHandshakesPerSource);
  // Raw TCP connections, before TLS: bounded on their own (no server.maxConnections, which
  // would count them with the established ones and refuse everyone once they fill it).
  server.on('connection', (socket: net.Socket) => handshakes.add(socket));
  server.on('secureConnection', (socket: TLSSocket) => {
    handshakes.done(socket);
    if (connections.size >= maxConnections) {
      const victim = evictable(connections, clock.now());
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
    handshakes: () => handshakes.size,
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
