/** capabilities_baseline (baseline): no capability added beyond the container runtime's defaults. */
import { context, type PodSecurityCheck, type PodView } from './check.js';
import { containerList, joinQuote, object, sortedSet, strings } from './go-text.js';

const defaultCapabilities = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);

function check({ containers }: PodView) {
  const nonDefault: string[] = [];
  const badContainers = containers.filter((c) => {
    const added = strings(object(context(c).capabilities).add).filter((cap) => !defaultCapabilities.has(cap));
    nonDefault.push(...added);
    return added.length > 0;
  });
  if (badContainers.length === 0) return undefined;
  return {
    reason: 'non-default capabilities',
    detail: `${containerList(badContainers)} must not include ${joinQuote(sortedSet(nonDefault))} in securityContext.capabilities.add`,
  };
}

export const capabilitiesBaseline: PodSecurityCheck = {
  id: 'capabilities_baseline',
  level: 'baseline',
  forbids: 'capabilities added beyond the runtime defaults',
  versions: [{ since: 0, check }],
};
