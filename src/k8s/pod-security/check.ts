/**
 * The shape of one Pod Security check, as upstream's registry holds them
 * (`policy.Check`: an id, a level, and a check per minimum policy version, each of which may
 * override checks of the lower level).
 */
import type { JsonObject } from '../json.js';
import { list, object } from './go-text.js';

/** What every check reads of a pod, read once. */
export interface PodView {
  readonly annotations: JsonObject;
  readonly spec: JsonObject;
  /** `spec.securityContext`. */
  readonly podContext: JsonObject;
  /** Init containers, containers, ephemeral containers (upstream's `visitContainers`). */
  readonly containers: readonly JsonObject[];
}

/** The pod as the checks read it: nothing in it is trusted to be well-formed. */
export function podView(pod: unknown): PodView {
  const metadata = object(object(pod).metadata);
  const spec = object(object(pod).spec);
  return {
    annotations: object(metadata.annotations),
    spec,
    podContext: object(spec.securityContext),
    containers: [...list(spec.initContainers), ...list(spec.containers), ...list(spec.ephemeralContainers)],
  };
}

/** A container's `securityContext`. */
export const context = (container: JsonObject): JsonObject => object(container.securityContext);

/** From v1.25 a Windows pod (`spec.os.name`) is exempt from some restricted checks. */
export const isWindows = (pod: PodView): boolean => object(pod.spec.os).name === 'windows';

/** From v1.35 a pod in a user namespace (`hostUsers: false`) is exempt from some checks. */
export const inUserNamespace = (pod: PodView): boolean => pod.spec.hostUsers === false;

/** `check`, for every pod but those `exempt` says are exempt. */
export function exceptFor(exempt: (pod: PodView) => boolean, check: (pod: PodView) => CheckFailure | undefined) {
  return (pod: PodView): CheckFailure | undefined => (exempt(pod) ? undefined : check(pod));
}

/** A failed check's reason and detail, upstream's words. */
export interface CheckFailure {
  readonly reason: string;
  readonly detail: string;
}

/** The check as it stands from one policy version (v1.`since`) until the next of its versions. */
export interface VersionedCheck {
  /** The minor version of v1 it applies from. */
  readonly since: number;
  /** What changed at `since` (none for a check's first version): the version notes are made of these. */
  readonly change?: string;
  /** Checks of the lower level this one replaces while it applies. */
  readonly overrides?: readonly string[];
  readonly check: (pod: PodView) => CheckFailure | undefined;
}

export interface PodSecurityCheck {
  /** Upstream's check id. */
  readonly id: string;
  readonly level: 'baseline' | 'restricted';
  /** What it forbids, in a few words. */
  readonly forbids: string;
  /** Ascending by `since`. */
  readonly versions: readonly VersionedCheck[];
}
