/**
 * A sidecar template's schema: the fields a template document may have, and the compiled
 * template admission renders. Validation is in validate.ts, compilation in compile.ts, where an
 * override may reach in override-reach.ts.
 */
import type { JsonObject } from '../k8s/json.js';
import type { GuaranteedMode } from '../k8s/qos.js';
import type { Selector } from '../k8s/selector.js';
import type { ParamValue, Reference, Segment } from './placeholders.js';
import type { ParamDeclaration } from './parameters.js';

/** `automatic`: injected wherever the selectors match; `on-request`: only when the pod names it too. */
export type InjectionMode = 'automatic' | 'on-request';

/** Where a template's containers go in `containers` / `initContainers`. */
export type Placement = 'first' | 'last';

/**
 * What a template's native sidecars (init containers with `restartPolicy: Always`) become
 * where the cluster does not support them (below 1.29): ordinary containers, nothing (the
 * template is skipped), or a denied pod.
 */
export type NativeSidecarFallback = 'container' | 'skip' | 'deny';
export const nativeSidecarFallbacks: readonly NativeSidecarFallback[] = ['container', 'skip', 'deny'];

/**
 * Whether a pod may be created without the template's sidecars while the injector cannot be
 * reached: `Fail` (required: the pod is refused and retried) or `Ignore` (optional). Each class
 * has its own webhook with that failurePolicy (manifests), calling its own path.
 */
export type TemplateFailurePolicy = 'Fail' | 'Ignore';
export const templateFailurePolicies: readonly TemplateFailurePolicy[] = ['Fail', 'Ignore'];

/**
 * What a pod labelled `sidecar-injector.io/inject=disabled` gets from a required template that
 * would otherwise apply to it: created without it (`allow`, the default), created with a warning
 * (`warn`), or refused (`deny`). Honoured by the required webhook (where it is called for such
 * pods) and by the required ValidatingAdmissionPolicies.
 */
export type TemplateOptOut = 'allow' | 'warn' | 'deny';
export const templateOptOuts: readonly TemplateOptOut[] = ['allow', 'warn', 'deny'];

/** Who injects a template: the webhook, or a MutatingAdmissionPolicy (manifests/mutating-policies.ts). */
export type TemplateDelivery = 'webhook' | 'policy';

/**
 * The form a template is injected in: as written (`native`), with its native sidecars as
 * ordinary containers (`container`, clusters below 1.29), or with its ordinary containers as
 * native sidecars (`sidecar`, pods that run to completion: a container that never exits would
 * keep such a pod running for ever).
 */
export type TemplateForm = 'native' | 'container' | 'sidecar';

/**
 * How running pods get a new revision: only by being recreated (`recreate`, the default), or, for
 * a revision that differs from the pod's only in its sidecars' images and resources, by the leader
 * changing them in the running pod (`inPlace`: resources through `pods/resize`, then the images by
 * an update; the kubelet restarts just the containers whose image changed).
 */
export type UpdateStrategy = 'recreate' | 'inPlace';
export const updateStrategies: readonly UpdateStrategy[] = ['recreate', 'inPlace'];

/** How many pods of one workload may have sidecars an in-place update has not yet settled: a number of pods, or a share of the workload's pods. */
export type MaxUnavailable = { readonly pods: number } | { readonly percent: number };

/** `max` for a workload of `pods` pods: a share rounds down, and is never below one pod (else nothing would move). */
export function resolveMaxUnavailable(max: MaxUnavailable, pods: number): number {
  return 'pods' in max ? max.pods : Math.max(1, Math.floor((pods * max.percent) / 100));
}

/**
 * What an in-place update compares between two revisions of a template: the revision's content
 * without its sidecars' images and resources (and the parameters only those fields read), and
 * each sidecar's image and resources where no pod or namespace can change them. Two revisions
 * with one `shape` differ, in every pod, only in the images and the resources: the two fields of
 * a running container Kubernetes lets change (an update sets an image, `pods/resize` resources).
 */
export interface InPlaceFacts {
  readonly shape: string;
  /** Container or init container name → its image; absent where the image varies per pod (an overridable parameter, a pod field). */
  readonly images: ReadonlyMap<string, string>;
  /** Container or init container name → its resources as the template states them (`{}` for none); absent where they vary per pod. */
  readonly resources: ReadonlyMap<string, JsonObject>;
  /** Container or init container name → its resources as written, with the fixed parameters they read: equal texts give every pod the same resources. */
  readonly resourcesText: ReadonlyMap<string, string>;
}

/** A pod's operating system, as `spec.os.name` names it. */
export type PodOs = 'linux' | 'windows';

/**
 * securityContext fields pod validation forbids in the containers of a Windows pod
 * (validateWindows, CONTRACT R-68): a template that supports windows may not set them.
 */
export const linuxOnlySecurityFields = [
  'seLinuxOptions',
  'seccompProfile',
  'appArmorProfile',
  'capabilities',
  'readOnlyRootFilesystem',
  'privileged',
  'allowPrivilegeEscalation',
  'procMount',
  'runAsUser',
  'runAsGroup',
] as const;

/** A compiled value tree: static subtrees are kept as JSON, strings with placeholders as segments. */
export type Compiled =
  | { readonly kind: 'static'; readonly value: unknown }
  | { readonly kind: 'string'; readonly segments: readonly Segment[] }
  | { readonly kind: 'param'; readonly key: string }
  | { readonly kind: 'object'; readonly entries: readonly (readonly [string, Compiled])[] }
  | { readonly kind: 'array'; readonly items: readonly Compiled[] };

/** The parts of a template that are rendered per pod. */
export interface TemplateBody {
  readonly containers: readonly Compiled[];
  readonly initContainers: readonly Compiled[];
  readonly volumes: readonly Compiled[];
  readonly appEnv: readonly Compiled[];
  readonly appEnvFrom: readonly Compiled[];
  readonly appVolumeMounts: readonly Compiled[];
  readonly labels: readonly (readonly [string, Compiled])[];
  readonly annotations: readonly (readonly [string, Compiled])[];
  readonly imagePullSecrets: readonly Compiled[];
}

/** A validated, compiled template, ready to render. */
export interface Template {
  readonly name: string;
  readonly description: string;
  readonly file: string;
  /** The SidecarTemplate it was read from (its metadata.name; a candidate's differs from the template's name); undefined for a bare document. */
  readonly object?: string;
  /** First 12 hex digits of the SHA-256 of the template's canonical JSON; recorded in the ledger. */
  readonly hash: string;
  readonly injection: InjectionMode;
  readonly placement: Placement;
  readonly namespaceSelector: Selector;
  readonly objectSelector: Selector;
  /** Every parameter's value: the fixed ones, and the defaults of declared ones. */
  readonly params: Readonly<Record<string, ParamValue>>;
  /** Declared parameters (a type, rules, who may override), by name; fixed scalars are not here. */
  readonly declarations: ReadonlyMap<string, ParamDeclaration>;
  /** Names of parameters a namespace or pod may override: their rendered values vary per pod. */
  readonly overridable: ReadonlySet<string>;
  readonly body: TemplateBody;
  /** The pod operating systems (`spec.os.name`) the template's containers run on; other pods skip it. */
  readonly os: readonly PodOs[];
  /** Names of its init containers with `restartPolicy: Always` (native sidecars), in order. */
  readonly nativeSidecars: readonly string[];
  /** What they become on clusters without native sidecars. @default 'container' */
  readonly nativeSidecarFallback: NativeSidecarFallback;
  /** `native` as compiled; `container` for the variant templates/forms.ts derives. */
  readonly form: TemplateForm;
  /** Required (`Fail`, the default) or optional (`Ignore`): which webhook injects it. */
  readonly failurePolicy: TemplateFailurePolicy;
  /**
   * How its containers keep a Guaranteed pod Guaranteed: their cpu and memory requests taken
   * from their limits (the default), or their limits from their requests (k8s/qos.ts).
   */
  readonly guaranteedPods: GuaranteedMode;
  /**
   * True when its ordinary containers end on their own (a one-shot uploader): only then may they
   * be ordinary containers of a pod that runs to completion. @default false
   */
  readonly endsOnItsOwn: boolean;
  /**
   * Who injects it: the webhook, or the API server itself through the MutatingAdmissionPolicy
   * `policies --mutating` generates (then the webhooks leave it alone, and every other reader,
   * the audit, `render` and `why`, still expects it in the pods it applies to).
   */
  readonly delivery: TemplateDelivery;
  /** What a pod that opts out gets where the template would apply (a required template only). @default 'allow' */
  readonly optOut: TemplateOptOut;
  /** How running pods get a new revision of it. @default 'recreate' */
  readonly updateStrategy: UpdateStrategy;
  /** With updateStrategy inPlace: how many pods of a workload may be updated (or rolled back) and not yet settled at once. @default { pods: 1 } */
  readonly inPlaceMaxUnavailable: MaxUnavailable;
  /**
   * Its sidecars' resources are someone else's to set once injected (a vertical autoscaler, a
   * person's resize): any resources count as the template's (inject/trust.ts), and an in-place
   * update never resizes them. @default false
   */
  readonly resourcesManagedElsewhere: boolean;
  /** What an in-place update compares (rollout/in-place.ts). */
  readonly inPlaceFacts: InPlaceFacts;
  /** Every value of the pod or namespace the template reads; a rendering depends on these only. */
  readonly references: readonly Reference[];
  /** Placeholders in the template (each may repeat a value in the output): sizes the render cache's accounting. */
  readonly placeholderCount: number;
  /** Size of the template's JSON text: the rendered output is about this size plus the substituted values. */
  readonly staticBytes: number;
}

/** The fields a template document may have. */
export const topLevelFields: ReadonlySet<string> = new Set([
  'name',
  'description',
  'injection',
  'placement',
  'namespaceSelector',
  'objectSelector',
  'parameters',
  'containers',
  'initContainers',
  'volumes',
  'appContainers',
  'labels',
  'annotations',
  'imagePullSecrets',
  'os',
  'nativeSidecars',
  'failurePolicy',
  'endsOnItsOwn',
  'guaranteedPods',
  'delivery',
  'optOut',
  'updateStrategy',
  'inPlaceMaxUnavailable',
  'resourcesManagedElsewhere',
]);
/** The fields of `appContainers`. */
export const appContainerFields: ReadonlySet<string> = new Set(['env', 'envFrom', 'volumeMounts']);
