/**
 * A long-running part of the process (controller-runtime's Runnable): the template store, the
 * namespace and version sources, the event recorder, the rollout controller, the certificates,
 * the HTTPS server, the continuous audit. The manager (manager.ts) starts and stops them in
 * order; each says what it can of its readiness and status.
 */
export interface Runnable {
  /** For the log and /status. */
  readonly name: string;
  /** Starts; resolves once started (a source: once it can be read). A rejection stops what started before it. */
  start(): void | Promise<void>;
  /** Stops; resolves once stopped (what it holds released). Called once, only after a start. */
  stop(): void | Promise<void>;
  /**
   * At the start of a stop, before the lease is released: ends what it does for the leader (a
   * certificate round under way), so the next leader never works beside it. It keeps serving
   * what it has until `stop()`.
   */
  quiesce?(): Promise<void>;
  /** False while it cannot serve yet (a source not synced): the process is not ready. */
  ready?(): boolean;
  /** What /status shows of it. */
  status?(): unknown;
}

/** In what order runnables start (this order) and stop (the reverse). */
export type RunnableGroup =
  /** What reviews read (templates, namespaces, versions): started first, stopped last. */
  | 'source'
  /** Everything else that runs on every replica (Events, certificates, the rollout controller). */
  | 'other'
  /** What takes traffic: started once the rest runs, drained first of what runs everywhere. */
  | 'server'
  /** What runs on the elected replica only (the continuous audit): started while it leads, stopped first. */
  | 'leader';

/** The one leader election leader-only runnables follow (kube-api/lease.ts's LeaderElector). */
export interface LeaderElection {
  start(): void;
  /** Stops electing, releasing the lease when held. */
  stop(): Promise<void>;
  isLeader(): boolean;
  status(): unknown;
  on(event: 'leading' | 'following', listener: () => void): unknown;
}
