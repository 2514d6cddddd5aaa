/** privileged (baseline): no privileged container. */
import { context, type PodSecurityCheck, type PodView } from './check.js';
import { containerList } from './go-text.js';

function check({ containers }: PodView) {
  const privileged = containers.filter((c) => context(c).privileged === true);
  return privileged.length === 0 ? undefined : { reason: 'privileged', detail: `${containerList(privileged)} must not set securityContext.privileged=true` };
}

export const privileged: PodSecurityCheck = {
  id: 'privileged',
  level: 'baseline',
  forbids: 'privileged containers',
  versions: [{ since: 0, check }],
};
