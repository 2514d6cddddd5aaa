/** hostPathVolumes (baseline): no hostPath volume. */
import type { PodSecurityCheck, PodView } from './check.js';
import { joinQuote, list, name, pluralize, present } from './go-text.js';

function check({ spec }: PodView) {
  const hostPaths = list(spec.volumes).filter((v) => present(v.hostPath));
  if (hostPaths.length === 0) return undefined;
  return { reason: 'hostPath volumes', detail: `${pluralize('volume', 'volumes', hostPaths.length)} ${joinQuote(hostPaths.map(name))}` };
}

export const hostPathVolumes: PodSecurityCheck = {
  id: 'hostPathVolumes',
  level: 'baseline',
  forbids: 'hostPath volumes',
  versions: [{ since: 0, check }],
};
