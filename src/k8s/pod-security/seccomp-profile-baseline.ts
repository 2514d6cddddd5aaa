/** seccompProfile_baseline (baseline): no Unconfined seccomp profile (the annotations below v1.19, the fields from v1.19). */
import type { JsonObject } from '../json.js';
import { context, type PodSecurityCheck, type PodView } from './check.js';
import { goQuote, joinQuote, name, object, pluralize, present, setters, sortedSet, str } from './go-text.js';
import { seccompType, validSeccomp } from './seccomp.js';

const podAnnotation = 'seccomp.security.alpha.kubernetes.io/pod';
const containerAnnotationPrefix = 'container.seccomp.security.alpha.kubernetes.io/';

/** Before v1.19: the seccomp annotations, the pod's and each container's. */
function checkAnnotations({ annotations, containers }: PodView) {
  const valid = (value: string) => value === 'runtime/default' || value === 'docker/default' || value.startsWith('localhost/');
  const forbidden: string[] = [];
  for (const key of [podAnnotation, ...containers.map((c) => containerAnnotationPrefix + name(c))]) {
    if (Object.hasOwn(annotations, key) && !valid(str(annotations[key]))) forbidden.push(`${key}=${goQuote(str(annotations[key]))}`);
  }
  const distinct = sortedSet(forbidden);
  if (distinct.length === 0) return undefined;
  return { reason: 'seccompProfile', detail: `forbidden ${pluralize('annotation', 'annotations', distinct.length)} ${distinct.join(', ')}` };
}

function checkFields({ podContext, containers }: PodView) {
  const bad = (ctx: JsonObject) => present(ctx.seccompProfile) && !validSeccomp(object(ctx.seccompProfile).type);
  const badPod = bad(podContext);
  const badContainers = containers.filter((c) => bad(context(c)));
  if (!badPod && badContainers.length === 0) return undefined;
  const values = sortedSet([...(badPod ? [seccompType(podContext)] : []), ...badContainers.map((c) => seccompType(context(c)))]);
  return {
    reason: 'seccompProfile',
    detail: `${setters(badPod, badContainers).join(' and ')} must not set securityContext.seccompProfile.type to ${joinQuote(values)}`,
  };
}

export const seccompProfileBaseline: PodSecurityCheck = {
  id: 'seccompProfile_baseline',
  level: 'baseline',
  forbids: 'an Unconfined seccomp profile',
  versions: [
    { since: 0, check: checkAnnotations },
    { since: 19, change: 'the seccompProfile fields in place of the seccomp annotations', check: checkFields },
  ],
};
