/** seLinuxOptions (baseline): only the container SELinux types, no user or role. */
import type { JsonObject } from '../json.js';
import { context, type PodSecurityCheck, type PodView } from './check.js';
import { joinQuote, object, pluralize, present, setters, sortedSet, str } from './go-text.js';

function checkAllowing(types: readonly string[]) {
  const allowedTypes = new Set(['', ...types]);
  return ({ podContext, containers }: PodView) => {
    const badTypes: string[] = [];
    let setUser = false;
    let setRole = false;
    const bad = (ctx: JsonObject) => {
      if (!present(ctx.seLinuxOptions)) return false;
      const options = object(ctx.seLinuxOptions);
      let valid = true;
      if (!allowedTypes.has(str(options.type))) {
        valid = false;
        badTypes.push(str(options.type));
      }
      if (str(options.user) !== '') {
        valid = false;
        setUser = true;
      }
      if (str(options.role) !== '') {
        valid = false;
        setRole = true;
      }
      return !valid;
    };
    const badPod = bad(podContext);
    const badContainers = containers.filter((c) => bad(context(c)));
    if (!badPod && badContainers.length === 0) return undefined;
    const distinct = sortedSet(badTypes);
    const data = [
      ...(distinct.length > 0 ? [`${pluralize('type', 'types', distinct.length)} ${joinQuote(distinct)}`] : []),
      ...(setUser ? ['user may not be set'] : []),
      ...(setRole ? ['role may not be set'] : []),
    ];
    return {
      reason: 'seLinuxOptions',
      detail: `${setters(badPod, badContainers).join(' and ')} set forbidden securityContext.seLinuxOptions: ${data.join('; ')}`,
    };
  };
}

const containerTypes = ['container_t', 'container_init_t', 'container_kvm_t'];

export const seLinuxOptions: PodSecurityCheck = {
  id: 'seLinuxOptions',
  level: 'baseline',
  forbids: 'SELinux types other than the container ones, any SELinux user or role',
  versions: [
    { since: 0, check: checkAllowing(containerTypes) },
    { since: 31, change: 'SELinux type container_engine_t allowed', check: checkAllowing([...containerTypes, 'container_engine_t']) },
  ],
};
