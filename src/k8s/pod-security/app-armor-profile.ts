/** appArmorProfile (baseline): no AppArmor profile but the runtime's default or a localhost one, by field or annotation. */
import type { JsonObject } from '../json.js';
import { context, type PodSecurityCheck, type PodView } from './check.js';
import { goOrder, goQuote, joinQuote, object, pluralize, present, setters, sortedSet, str } from './go-text.js';

const annotationPrefix = 'container.apparmor.security.beta.kubernetes.io/';
const allowed = (type: unknown) => type === 'RuntimeDefault' || type === 'Localhost';
const bad = (ctx: JsonObject) => present(ctx.appArmorProfile) && !allowed(object(ctx.appArmorProfile).type);

function check({ annotations, podContext, containers }: PodView) {
  const values: string[] = [];
  const badPod = bad(podContext);
  if (badPod) values.push(str(object(podContext.appArmorProfile).type));
  const badContainers = containers.filter((c) => bad(context(c)));
  for (const c of badContainers) values.push(str(object(context(c).appArmorProfile).type));
  const who = setters(badPod, badContainers);
  const forbiddenAnnotations = Object.entries(annotations)
    .filter(([key, value]) => {
      const profile = str(value);
      return key.startsWith(annotationPrefix) && !(profile === '' || profile === 'runtime/default' || profile.startsWith('localhost/'));
    })
    .map(([key, value]) => `${key}=${goQuote(str(value))}`)
    .sort(goOrder);
  const badValues = [...sortedSet(values), ...forbiddenAnnotations];
  if (forbiddenAnnotations.length > 0) who.push(pluralize('annotation', 'annotations', forbiddenAnnotations.length));
  if (who.length === 0) return undefined;
  return {
    reason: pluralize('forbidden AppArmor profile', 'forbidden AppArmor profiles', badValues.length),
    detail: `${who.join(' and ')} must not set AppArmor profile type to ${joinQuote(badValues)}`,
  };
}

export const appArmorProfile: PodSecurityCheck = {
  id: 'appArmorProfile',
  level: 'baseline',
  forbids: 'an AppArmor profile other than RuntimeDefault or Localhost (fields and annotations)',
  versions: [{ since: 0, check }],
};
