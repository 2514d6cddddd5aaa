/**
 * Ports a template's containers listen on without declaring them. The injector sees a listening
 * port only where a container declares it (`ports`): the hostNetwork rule (decisions:
 * host-network-port) leaves a template out of pods on the node's network only then, since there
 * every port, loopback included, is the node's. A port a container's arguments or command take
 * from a parameter named for a port (`adminPort`, `metrics_port`, `port`) and that no `ports`
 * entry of that container declares may be one it listens on and does not say (or one it dials):
 * `check` and SidecarTemplate admission warn about it, for the author to judge. A heuristic: a
 * port given through env, a literal, or a parameter named otherwise goes unseen. Pure.
 */
import { entryOf, referencesOf } from './export-rules.js';
import { nameOf } from './forms.js';
import type { Compiled, Template } from './template.js';

/** A parameter named for a port: `port`, or a name ending in `Port`, `_port` or `-port`. */
const portParameter = /(?:^port|Port|[_-]port)$/;

/** The parameters a compiled value refers to, anywhere under it. */
function parametersIn(...nodes: (Compiled | undefined)[]): Set<string> {
  return new Set(nodes.flatMap((node) => referencesOf(node).flatMap((ref) => (ref.source === 'params' ? [ref.key] : []))));
}

/** The literal `containerPort`s of a `ports` list. */
function literalPorts(node: Compiled | undefined): Set<string> {
  const items: readonly Compiled[] =
    node?.kind === 'static' && Array.isArray(node.value)
      ? (node.value as unknown[]).map((value): Compiled => ({ kind: 'static', value }))
      : node?.kind === 'array'
        ? node.items
        : [];
  const out = new Set<string>();
  for (const item of items) {
    const port = entryOf(item, 'containerPort');
    if (port?.kind === 'static') out.add(String(port.value));
  }
  return out;
}

/** One port a container's arguments name and its `ports` do not declare. */
export interface UndeclaredPort {
  readonly container: string;
  readonly parameter: string;
  /** The parameter's value (its default, for an overridable one). */
  readonly value: string;
}

/** Every port parameter a container's `args` or `command` use that no `ports` entry of that container declares. */
export function undeclaredPorts(template: Template): UndeclaredPort[] {
  const out: UndeclaredPort[] = [];
  for (const container of [...template.body.initContainers, ...template.body.containers]) {
    const name = String(nameOf(container) ?? '');
    const used = parametersIn(entryOf(container, 'args'), entryOf(container, 'command'));
    const portsNode = entryOf(container, 'ports');
    const declaredByParameter = parametersIn(portsNode);
    const declaredLiterally = literalPorts(portsNode);
    for (const parameter of used) {
      if (!portParameter.test(parameter) || declaredByParameter.has(parameter)) continue;
      const value = String(template.params[parameter] ?? '');
      if (declaredLiterally.has(value)) continue;
      out.push({ container: name, parameter, value });
    }
  }
  return out;
}

/**
 * The warning for one, short enough for a Warning header (120 characters where the names are
 * short). A port a container is given may be one it dials rather than one it listens on: the
 * warning says what is seen and leaves the judgement to the author.
 */
export const undeclaredPortText = (template: string, port: UndeclaredPort): string =>
  `${template}: container ${port.container} gets params.${port.parameter} (${port.value}), no such port declared; if it listens there, declare it`;
