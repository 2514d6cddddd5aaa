/**
 * One shape for the three things that reload under a running server: the template set, the
 * serving certificate and the cluster's namespace labels. Each starts and stops, gives the
 * value in force and a status for /status, can be asked to reload now, and says what
 * happened with two events: `reload` (a new value is in force) and `rejected` (an Error; the
 * last good value stays). Modelled on controller-runtime's certwatcher.
 */
import type { EventEmitter } from 'node:events';

/** Something reloaded in the background; `T` is its value, `S` its status. */
export interface Reloadable<T, S> extends Pick<EventEmitter, 'on' | 'once' | 'off'> {
  /** Begins watching (files, a list and watch). */
  start(): void;
  /** Ends watching; the value in force stays readable. */
  stop(): void;
  /** The value in force. */
  current(): T;
  /** What /status shows. */
  status(): S;
  /** Reads the source now and takes a changed, valid value into use; resolves when done. */
  reloadNow(): Promise<void>;
}
