/** windowsHostProcess (baseline): no Windows HostProcess container. */
import type { JsonObject } from '../json.js';
import { context, type PodSecurityCheck, type PodView } from './check.js';
import { object, setters } from './go-text.js';

const hostProcess = (ctx: JsonObject) => object(ctx.windowsOptions).hostProcess === true;

function check({ podContext, containers }: PodView) {
  const badPod = hostProcess(podContext);
  const badContainers = containers.filter((c) => hostProcess(context(c)));
  if (!badPod && badContainers.length === 0) return undefined;
  return { reason: 'hostProcess', detail: `${setters(badPod, badContainers).join(' and ')} must not set securityContext.windowsOptions.hostProcess=true` };
}

export const windowsHostProcess: PodSecurityCheck = {
  id: 'windowsHostProcess',
  level: 'baseline',
  forbids: 'Windows HostProcess containers',
  versions: [{ since: 0, check }],
};
