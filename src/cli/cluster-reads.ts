/**
 * What the commands that ask the cluster (`why`, `simulate`) read the same way: one object (a
 * 404 is absent, any other failure an error that says what could not be read), the templates in
 * force as the injector mounts them, and when an object last changed.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { ClusterError, clusterReadFailure, KubernetesApiError } from '../errors.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { getJson } from '../kube-api/request.js';
import { problemLine, servedTemplateObjects } from '../pipeline/template-check.js';
import { stopCandidates } from '../templates/rollout.js';
import { listAll } from '../kube-api/request.js';
import { sidecarTemplateResource } from '../templates/resource.js';
import { loadTemplateDir } from '../templates/load.js';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import type { TemplateSet } from '../templates/set.js';
import type { MutatingPolicyApiVersion } from '../manifests/mutating-policies.js';
import type { CandidateProgress, InPlaceProgress } from '../templates/object-status.js';

const timeoutMs = 15_000;

/** The newest time in an object's managedFields (optionally only of entries that touch `field`), else its creationTimestamp. */
export function lastChanged(metadata: JsonObject, field?: string): string | undefined {
  let newest: string | undefined;
  for (const entry of Array.isArray(metadata.managedFields) ? metadata.managedFields : []) {
    if (!isJsonObject(entry) || typeof entry.time !== 'string') continue;
    if (field && !JSON.stringify(entry.fieldsV1 ?? {}).includes(field)) continue;
    if (newest === undefined || entry.time > newest) newest = entry.time;
  }
  return newest ?? (typeof metadata.creationTimestamp === 'string' ? metadata.creationTimestamp : undefined);
}

export const stringMap = (value: unknown): Record<string, string> => {
  const out: Record<string, string> = Object.create(null);
  if (isJsonObject(value)) for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
};

/** GET, with a 404 as undefined and any other failure a ClusterError that says what could not be read. */
export async function readObject(kubeConfig: KubeConfig, path: string, what: string): Promise<JsonObject | undefined> {
  try {
    const object = await getJson(kubeConfig, path, timeoutMs);
    return isJsonObject(object) ? object : undefined;
  } catch (err) {
    if (err instanceof KubernetesApiError && err.statusCode === 404) return undefined;
    throw clusterReadFailure(what, err);
  }
}

/** Where the templates in force were read, and when they last changed (unknown for a folder). */
export interface TemplatesInForce {
  readonly set: TemplateSet;
  readonly from: string;
  readonly fromCluster: boolean;
  readonly changed?: string;
  /** SidecarTemplates the injector refuses (it serves the others), each with its problems as `check` prints them. */
  readonly refused: readonly { readonly name: string; readonly problems: readonly string[] }[];
  /** Each SidecarTemplate's status as the injector's elected replica wrote it (from the cluster only). */
  readonly objects?: readonly ObjectState[];
}

/** What a SidecarTemplate's status says, as far as a reader takes it (strings cut, counts numbers). */
export interface ObjectState {
  readonly name: string;
  readonly template?: string;
  readonly revision?: string;
  readonly role?: string;
  readonly share?: string;
  readonly state?: string;
  readonly message?: string;
  readonly pods?: { readonly current: number; readonly stale: number; readonly missing: number; readonly leftOut: number };
  /** A candidate's last preflight on the elected replica (a state not written by the injector reads `unknown`). */
  readonly preflight?: Omit<CandidateProgress['preflight'], 'state'> & { readonly state: string; readonly replica?: string };
  /** Why the elected replica halted a candidate. */
  readonly halted?: string;
  /** A candidate's last health look. */
  readonly health?: Omit<NonNullable<CandidateProgress['health']>, 'checkedAt'> & { readonly checkedAt?: string };
  /** In-place updates toward this revision, as the elected replica's last round saw them. */
  readonly inPlace?: Omit<InPlaceProgress, 'checkedAt'> & { readonly checkedAt?: string };
}

/** The fields of `value` that are defined. */
const defined = <T extends Record<string, unknown>>(value: T) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));

/** A SidecarTemplate's status, read defensively: anyone who may write it may write anything. */
export function objectState(object: JsonObject): ObjectState {
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  const status = isJsonObject(object.status) ? object.status : {};
  const text = (value: unknown, max = 200) => (typeof value === 'string' ? value.slice(0, max) : undefined);
  const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : 0);
  const pods = isJsonObject(status.pods) ? status.pods : undefined;
  const preflight = isJsonObject(status.preflight) ? status.preflight : undefined;
  const health = isJsonObject(status.health) ? status.health : undefined;
  const inPlace = isJsonObject(status.inPlace) ? status.inPlace : undefined;
  const halted = text(status.halted, 1000);
  const fields = {
    template: text(status.template, 63),
    revision: text(status.revision, 64),
    role: text(status.role, 20),
    share: text(status.share, 20),
    state: text(status.state, 20),
    message: text(status.message, 300),
  };
  return {
    name: text(metadata.name, 253) ?? '',
    ...defined(fields),
    ...(pods ? { pods: { current: count(pods.current), stale: count(pods.stale), missing: count(pods.missing), leftOut: count(pods.leftOut) } } : {}),
    ...(preflight
      ? {
          preflight: {
            state: text(preflight.state, 20) ?? 'unknown',
            ...defined({
              replica: text(preflight.replica, 253),
              failure: text(preflight.failure, 40),
              message: text(preflight.message, 1000),
              checkedAt: text(preflight.checkedAt, 40),
            }),
          },
        }
      : {}),
    ...(halted !== undefined ? { halted } : {}),
    ...(health
      ? {
          health: {
            pods: count(health.pods),
            restarting: count(health.restarting),
            notReady: count(health.notReady),
            refusedWorkloads: count(health.refusedWorkloads),
            ...defined({ checkedAt: text(health.checkedAt, 40) }),
          },
        }
      : {}),
    ...(inPlace
      ? {
          inPlace: {
            updated: count(inPlace.updated),
            pending: count(inPlace.pending),
            waitingWorkloads: count(inPlace.waitingWorkloads),
            recreateNeeded: count(inPlace.recreateNeeded),
            refused: count(inPlace.refused),
            failed: count(inPlace.failed),
            ...defined({ checkedAt: text(inPlace.checkedAt, 40) }),
          },
        }
      : {}),
  };
}

/**
 * `set` with each candidate stopped unless its SidecarTemplate's status, written by the elected
 * replica for the object's current generation and this revision, says it takes pods (state
 * `Candidate`): a candidate whose preflight is pending or failed, that was halted, or that no
 * replica has looked at yet takes no pod on the replicas, so a command that predicts what they
 * do gives it none either.
 */
function asTheReplicasGate(set: TemplateSet, items: readonly JsonObject[]): TemplateSet {
  if (!set.rollouts) return set;
  const byName = new Map(items.map((item) => [isJsonObject(item.metadata) ? item.metadata.name : undefined, item]));
  const stopped = new Map<string, string>();
  for (const rollout of set.rollouts.values()) {
    if (!rollout.candidate) continue;
    const object = byName.get(rollout.candidate.object ?? rollout.candidate.name);
    const metadata = object && isJsonObject(object.metadata) ? object.metadata : {};
    const status = object && isJsonObject(object.status) ? object.status : {};
    const current = status.revision === rollout.candidate.hash && status.observedGeneration === metadata.generation;
    if (current && status.state === 'Candidate') continue;
    stopped.set(
      rollout.name,
      current && typeof status.message === 'string'
        ? status.message.slice(0, 300)
        : 'its SidecarTemplate has no status for this revision yet: the injector has not let it take pods',
    );
  }
  return stopCandidates(set, stopped);
}

/**
 * The templates in force: a folder, or the cluster's SidecarTemplate objects checked as the
 * injector checks them (an object it refuses is left out here too, and named; a required one
 * refuses the pods it may apply to, as on the replicas), each candidate taking pods only where
 * its status says the replicas let it.
 */
export async function templatesInForce(kubeConfig: KubeConfig, dir: string | undefined): Promise<TemplatesInForce> {
  if (dir !== undefined) return { set: await loadTemplateDir(dir, { allowEmpty: true }), from: dir, fromCluster: false, refused: [] };
  const where = "the cluster's SidecarTemplates";
  let items: JsonObject[];
  try {
    items = (await listAll<JsonObject>(kubeConfig, sidecarTemplateResource.path, { timeoutMs })).items;
  } catch (err) {
    if (err instanceof KubernetesApiError && err.statusCode === 404)
      throw new ClusterError(
        `the cluster has no ${sidecarTemplateResource.kind} resource (${sidecarTemplateResource.path}): is the injector installed? --templates DIR decides with a folder`,
      );
    throw clusterReadFailure(where, err);
  }
  const served = servedTemplateObjects(items);
  const refused = served.refused;
  const set = asTheReplicasGate(served.set, items);
  let changed: string | undefined;
  for (const item of items) {
    const when = isJsonObject(item.metadata) ? lastChanged(item.metadata, 'f:spec') : undefined;
    if (when !== undefined && (changed === undefined || when > changed)) changed = when;
  }
  return {
    set,
    from: items.length === 0 ? `${where} (none: no template is in force)` : where,
    fromCluster: true,
    ...(changed ? { changed } : {}),
    refused: [...refused.entries()].map(([name, problems]) => ({ name, problems: problems.map(problemLine) })),
    objects: items.map(objectState).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
  };
}

/**
 * The templates a command works on: the `--templates` folder when given (checked as `check`
 * checks it), else the cluster's SidecarTemplates as the injector checks them (a refused object
 * named on stderr).
 */
export async function templatesFromFlagOrCluster(
  dir: string | undefined,
  kubeconfig: string | undefined,
  command: string,
  stderr: { write(text: string): unknown },
): Promise<TemplateSet> {
  if (dir !== undefined) return loadTemplateDir(dir);
  const kubeConfig = await loadKubeConfig(kubeconfig, { fallback: 'default', hint: ' (--templates DIR works on a folder without a cluster)' });
  const inForce = await templatesInForce(kubeConfig, undefined);
  for (const refused of inForce.refused.slice(0, 20))
    stderr.write(`${command}: sidecartemplate/${refused.name} is refused by the injector and not in force: ${refused.problems.slice(0, 3).join('; ')}\n`);
  return inForce.set;
}

/**
 * The version of admissionregistration.k8s.io in which the API server serves
 * MutatingAdmissionPolicies, from its discovery: `v1` first, then the beta; undefined when it
 * serves neither (before 1.36 without the feature gate). A group version it does not serve is a 404.
 */
export async function servedMutatingPolicyApi(kubeConfig: KubeConfig): Promise<MutatingPolicyApiVersion | undefined> {
  for (const version of ['v1', 'v1beta1'] as const) {
    const list = await readObject(
      kubeConfig,
      `/apis/admissionregistration.k8s.io/${version}`,
      `the API server's discovery of admissionregistration.k8s.io/${version}`,
    );
    const resources = list && Array.isArray(list.resources) ? list.resources : [];
    if (resources.some((r) => isJsonObject(r) && r.name === 'mutatingadmissionpolicies')) return version;
  }
  return undefined;
}
