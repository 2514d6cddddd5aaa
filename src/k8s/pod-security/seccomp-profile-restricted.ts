/** seccompProfile_restricted (restricted, from v1.19): the pod or every container sets RuntimeDefault or Localhost. */
import { context, exceptFor, isWindows, type PodSecurityCheck, type PodView } from './check.js';
import { containerList, joinQuote, object, present, setters, sortedSet } from './go-text.js';
import { seccompType, validSeccomp } from './seccomp.js';

function check({ podContext, containers }: PodView) {
  const podSet = present(podContext.seccompProfile);
  const badPod = podSet && !validSeccomp(object(podContext.seccompProfile).type);
  const podValid = podSet && !badPod;
  const badContainers = containers.filter((c) => present(context(c).seccompProfile) && !validSeccomp(object(context(c).seccompProfile).type));
  if (badPod || badContainers.length > 0) {
    const values = sortedSet([...(badPod ? [seccompType(podContext)] : []), ...badContainers.map((c) => seccompType(context(c)))]);
    return {
      reason: 'seccompProfile',
      detail: `${setters(badPod, badContainers).join(' and ')} must not set securityContext.seccompProfile.type to ${joinQuote(values)}`,
    };
  }
  const unset = containers.filter((c) => !present(context(c).seccompProfile));
  if (!podValid && unset.length > 0)
    return {
      reason: 'seccompProfile',
      detail: `pod or ${containerList(unset)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
    };
  return undefined;
}

// Overriding seccompProfile_baseline, Windows pods included: from v1.25 they are exempt from both.
const overrides = ['seccompProfile_baseline'];

export const seccompProfileRestricted: PodSecurityCheck = {
  id: 'seccompProfile_restricted',
  level: 'restricted',
  forbids: 'a seccomp profile that is not RuntimeDefault or Localhost, or none',
  versions: [
    { since: 19, overrides, check },
    { since: 25, change: 'Windows pods exempt', overrides, check: exceptFor(isWindows, check) },
  ],
};
