/** capabilities_restricted (restricted, from v1.22): every container drops ALL and adds nothing but NET_BIND_SERVICE. */
import type { JsonObject } from '../json.js';
import { context, exceptFor, isWindows, type PodSecurityCheck, type PodView } from './check.js';
import { containerList, joinQuote, object, present, sortedSet, strings } from './go-text.js';

function check({ containers }: PodView) {
  const notDropping: JsonObject[] = [];
  const adding: JsonObject[] = [];
  const forbidden: string[] = [];
  for (const c of containers) {
    const capabilities = context(c).capabilities;
    if (!present(capabilities)) {
      notDropping.push(c);
      continue;
    }
    if (!strings(object(capabilities).drop).includes('ALL')) notDropping.push(c);
    const added = strings(object(capabilities).add).filter((cap) => cap !== 'NET_BIND_SERVICE');
    if (added.length > 0) {
      adding.push(c);
      forbidden.push(...added);
    }
  }
  const problems = [
    ...(notDropping.length > 0 ? [`${containerList(notDropping)} must set securityContext.capabilities.drop=["ALL"]`] : []),
    ...(adding.length > 0 ? [`${containerList(adding)} must not include ${joinQuote(sortedSet(forbidden))} in securityContext.capabilities.add`] : []),
  ];
  return problems.length === 0 ? undefined : { reason: 'unrestricted capabilities', detail: problems.join('; ') };
}

// Overriding capabilities_baseline from v1.22, Windows pods included: from v1.25 they are exempt from both.
const overrides = ['capabilities_baseline'];

export const capabilitiesRestricted: PodSecurityCheck = {
  id: 'capabilities_restricted',
  level: 'restricted',
  forbids: 'capabilities not dropping ALL, or adding any but NET_BIND_SERVICE',
  versions: [
    { since: 22, overrides, check },
    { since: 25, change: 'Windows pods exempt', overrides, check: exceptFor(isWindows, check) },
  ],
};
