/** hostProbesAndHostLifecycle (baseline, from v1.34): no probe or lifecycle handler aimed at another host. */
import { isJsonObject } from '../json.js';
import type { PodSecurityCheck, PodView } from './check.js';
import { joinQuote, name, object, pluralize, sortedSet, str } from './go-text.js';

/** A handler's httpGet and tcpSocket hosts that are set (not ""). */
const hostsOf = (handler: unknown): string[] =>
  isJsonObject(handler) ? [object(handler.httpGet).host, object(handler.tcpSocket).host].map(str).filter((host) => host !== '') : [];

function check({ containers }: PodView) {
  const names: string[] = [];
  const hosts: string[] = [];
  for (const c of containers) {
    const lifecycle = object(c.lifecycle);
    const found = [c.livenessProbe, c.readinessProbe, c.startupProbe, lifecycle.postStart, lifecycle.preStop].flatMap(hostsOf);
    if (found.length > 0) {
      names.push(name(c));
      hosts.push(...found);
    }
  }
  if (names.length === 0) return undefined;
  const badContainers = sortedSet(names);
  const badHosts = sortedSet(hosts);
  return {
    reason: 'probe or lifecycle host',
    detail: `${pluralize('container', 'containers', badContainers.length)} ${joinQuote(badContainers)} ${pluralize('uses', 'use', badContainers.length)} ${pluralize('probe or lifecycle host', 'probe or lifecycle hosts', badHosts.length)} ${joinQuote(badHosts)}`,
  };
}

export const hostProbesAndHostLifecycle: PodSecurityCheck = {
  id: 'hostProbesAndHostLifecycle',
  level: 'baseline',
  forbids: 'a host in a probe or lifecycle handler',
  versions: [{ since: 34, check }],
};
