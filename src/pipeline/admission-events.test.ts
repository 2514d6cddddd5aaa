import test from 'ava';
import { admissionEvents } from './admission-events.js';
import type { PodOutcome } from './admit.js';

const outcome = (warnings: PodOutcome['warnings']): PodOutcome => ({
  decision: 'allowed',
  reason: 'already-injected',
  message: 'the pod already carries its sidecars',
  warnings,
  podName: 'web-1',
  namespace: 'shop',
  templates: [],
  decisions: [],
});

test('a SidecarInjectionSkipped Event follows the warning id and says the rule in its own words, never the warning’s (which may quote the pod)', (t) => {
  const pod = { metadata: {} };
  for (const text of [
    'log-shipper not injected: it would violate PodSecurity "restricted": unrestricted capabilities (container "app" must not include "SECURITY NOTICE: call +1-555-0100" in securityContext.capabilities.add)',
    'anything at all, reworded',
  ]) {
    const events = admissionEvents(outcome([{ id: 'template-left-out', text, template: 'log-shipper', rule: 'pod-security' }]), pod);
    t.deepEqual(
      events.map((e) => [e.reason, e.note]),
      [
        [
          'SidecarInjectionSkipped',
          'log-shipper not injected (pod-security): the sidecar would make the pod violate the Pod Security level its namespace enforces (and --pod-security-action is skip, the default) (pod web-1)',
        ],
      ],
    );
  }
  // A sentence that reads like a skip but is no skip by its id draws no Event.
  t.deepEqual(
    admissionEvents(outcome([{ id: 'item-collision', text: 'agent: container agent already exists in the pod; left as is, not injected' }]), pod),
    [],
  );
});

test('an override that takes no effect draws a SidecarOverrideIgnored Event with the count and our suggestion, never the annotation itself', (t) => {
  const pod = { metadata: {} };
  const events = admissionEvents(
    outcome([
      {
        id: 'override-ignored',
        text: 'annotation otel-colector.sidecar-injector.io/memoryLimit names no template here (did you mean otel-collector?); ignored',
      },
      { id: 'override-ignored', text: 'annotation "SECURITY NOTICE: call +1-555-0100".sidecar-injector.io/x names no template here; ignored' },
    ]),
    pod,
  );
  t.deepEqual(
    events.map((e) => [e.type, e.reason, e.note]),
    [['Warning', 'SidecarOverrideIgnored', '2 override annotation(s) ignored (did you mean otel-collector?): sidecar-injector why names them (pod web-1)']],
  );
  // A suggestion that is no template name is not said.
  const forged = admissionEvents(outcome([{ id: 'override-ignored', text: 'names no template here (did you mean Call Us Now?); ignored' }]), pod);
  t.is(forged[0]!.note, '1 override annotation(s) ignored: sidecar-injector why names them (pod web-1)');
});
