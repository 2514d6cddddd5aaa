/**
 * What the API server does while the injector is down, and the required-sidecar policies it
 * enforces itself: the generated ValidatingAdmissionPolicies applied as shipped, their CEL
 * compiled and run by kube-apiserver, in both outage modes of docs/required-policies.md.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import {
  eventually,
  healthyInstall,
  injectorPods,
  joinWorld,
  optedInNamespace,
  plainPod,
  scaleInjector,
  templateConditionsWritten,
  testNamespace,
  warnings,
  type Json,
} from './helpers.js';
import { testWebhook } from './second-webhook.js';

const configurationPath = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector';

/** Sets the failurePolicy of the webhook `name` (what an operator does during an incident). */
async function setFailurePolicy(name: string, policy: 'Fail' | 'Ignore'): Promise<void> {
  const { kube } = joinWorld();
  const configuration = await kube.get(configurationPath);
  const index = (configuration.webhooks as Json[]).findIndex((w) => w.name === name);
  await kube.call('PATCH', configurationPath, [{ op: 'replace', path: `/webhooks/${index}/failurePolicy`, value: policy }], 'application/json-patch+json');
}

/**
 * Brings the install back as a test found it: both replicas, the caBundles, the required webhook
 * armed — by the operator, as after an incident (the injector arms a webhook only once).
 */
async function restore(): Promise<void> {
  await scaleInjector(2);
  await setFailurePolicy('required.sidecar-injector.io', 'Fail');
  await healthyInstall();
}

const withProxy = (name: string) => {
  const pod = plainPod(name);
  pod.metadata.annotations = { 'sidecar-injector.io/templates': 'proxy' };
  return pod;
};

test.serial(
  'the injector down: the required webhook refuses pods with the API server’s message; set to Ignore, pods are created without sidecars, and announced missing once the injector is back',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await optedInNamespace(t, 'outage');
    const elsewhere = await testNamespace(t, 'outage-plain');
    // Its own namespace: the SidecarsMissing Event of a bare pod goes to its namespace, and a
    // second missing pod there would be counted into the first one's series.
    const unneededNamespace = await optedInNamespace(t, 'outage-unneeded');
    t.teardown(restore);
    await templateConditionsWritten();
    await scaleInjector(0);
    // A pod that asks for the proxy (a required template) is sent to the required webhook: refused.
    const refused = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, withProxy('refused'));
    t.is(refused.status, 500);
    t.is(refused.body.reason, 'InternalError');
    t.regex(
      String(refused.body.message),
      /^Internal error occurred: failed calling webhook "required\.sidecar-injector\.io": failed to call webhook: Post "https:\/\/sidecar-injector\.sidecar-injector\.svc:443\/mutate\/required\?timeout=3s"/,
    );
    // A pod no required template may apply to is never sent to the required webhook (its
    // template condition, written by the leader, stays while every replica is down): created,
    // without the optional sidecar, as the optional webhook fails open.
    const unneeded = await kube.request('POST', `/api/v1/namespaces/${unneededNamespace}/pods`, plainPod('needs-no-required'));
    t.is(unneeded.status, 201, String(unneeded.body.message));
    t.is(unneeded.body.metadata.annotations?.['sidecar-injector.io/status'], undefined, 'no ledger');
    // Namespaces that did not opt in never meet the webhooks.
    t.is((await kube.request('POST', `/api/v1/namespaces/${elsewhere}/pods`, plainPod('unaffected'))).status, 201);
    // The operator's incident choice: the required webhook fails open too. Nobody arms it again while every replica is down.
    await setFailurePolicy('required.sidecar-injector.io', 'Ignore');
    const created = await eventually('a pod created with both webhooks failing open', async () => {
      const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, plainPod(`open-${Date.now().toString(36)}`));
      return answer.status === 201 ? answer.body : undefined;
    });
    t.is(created.metadata.annotations?.['sidecar-injector.io/status'], undefined, 'no ledger');
    t.deepEqual(
      (created.spec.containers as Json[]).map((c) => c.name),
      ['app'],
    );
    t.is(created.spec.initContainers, undefined, 'no sidecar');
    // The injector back: its leader writes the caBundle (here a new CA, the Secret deleted) and
    // leaves the operator's Ignore as it is.
    await scaleInjector(2);
    const configuration = async () => kube.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector');
    const bundleBefore = (await configuration()).webhooks[0].clientConfig.caBundle as string;
    await kube.delete('/api/v1/namespaces/sidecar-injector/secrets/sidecar-injector-tls');
    const after = await eventually('the caBundle written again', async () => {
      const c = await configuration();
      return c.webhooks[0].clientConfig.caBundle !== bundleBefore ? c : undefined;
    });
    t.deepEqual(
      (after.webhooks as Json[]).map((w) => [w.name, w.failurePolicy]),
      [
        ['required.sidecar-injector.io', 'Ignore'],
        ['optional.sidecar-injector.io', 'Ignore'],
        // Not the operator's to set here: armed with the required one, and left so.
        ['templates.sidecar-injector.io', 'Fail'],
      ],
      "the operator's Ignore is never reverted",
    );
    t.is(after.metadata.annotations['sidecar-injector.io/armed-webhooks'], 'required.sidecar-injector.io,templates.sidecar-injector.io');
    // Never forgotten: the replica that writes certificates reports the lowered webhook in its /status and its metric.
    const leader = await eventually('the leader reporting the webhook failing open', async () => {
      for (const pod of await injectorPods()) {
        const status = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8443/proxy/status`);
        if ((status.certificate?.failingOpen as string[] | null)?.includes('required.sidecar-injector.io')) return pod.metadata.name as string;
      }
      return undefined;
    });
    const metrics = await kube.request('GET', `/api/v1/namespaces/sidecar-injector/pods/https:${leader}:8443/proxy/metrics`);
    t.regex(metrics.text, /^sidecar_injector_webhook_failing_open\{webhook="required\.sidecar-injector\.io"\} 1$/m);
    // The pod created while every replica was down: no audit saw it created, the new leader's
    // first list finds it missing and says so where a person looks (a bare pod: its namespace).
    const name = created.metadata.name as string;
    const missing = await eventually(`the SidecarsMissing Event of ${name}`, async () => {
      const { stdout } = await kubectl(['get', 'events', '-n', namespace, '--field-selector', 'reason=SidecarsMissing', '-o', 'json']);
      return (JSON.parse(stdout).items as Json[]).find((e) => String(e.message).startsWith(`pod ${name} lacks `));
    });
    t.regex(missing.message, new RegExp(`^pod ${name} lacks log-shipper; recreate pod ${name} \\(a bare pod: delete it and create it again\\)$`));
  },
);

test.serial(
  'the required-sidecar policies, enforced by kube-apiserver: an altered sidecar warned of, then refused; with the injector down, only the pods that need a required sidecar are refused',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await optedInNamespace(t, 'required');
    const policies = readFileSync('manifests/components/required-policies/required-policies.yaml', 'utf8');
    const objects = parseAllDocuments(policies)
      .map((d) => d.toJS() as Json)
      .filter(Boolean);
    const binding = objects.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding')!;
    const bindingPath = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${binding.metadata.name}`;
    t.teardown(async () => {
      for (const o of objects)
        await kube.delete(
          `/apis/admissionregistration.k8s.io/v1/${o.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings'}/${o.metadata.name}`,
        );
      await restore();
    });
    // As shipped ([Warn, Audit]): the API server compiles every expression and accepts the cost.
    await kubectl(['apply', '-f', '-'], policies);
    const policy = await eventually('the policy compiled without type errors', async () => {
      const p = await kube.get(`/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${objects[0]!.metadata.name}`);
      return p.status?.observedGeneration === p.metadata.generation ? p : undefined;
    });
    t.deepEqual(policy.status.typeChecking?.expressionWarnings ?? [], [], 'no type-checking warnings');
    // The injector up: an injected pod passes the policy, without a warning.
    const injected = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, withProxy('injected'));
    t.is(injected.status, 201);
    t.notRegex(warnings(injected).join('\n'), /required sidecar/);
    // A later webhook changes the sidecar's image to another registry's: warned of ([Warn]), then refused ([Deny]).
    await testWebhook(t, namespace, (pod) => {
      const index = ((pod.spec.initContainers ?? []) as Json[]).findIndex((c) => c.name === 'proxy');
      return index < 0 || String(pod.spec.initContainers[index].image).startsWith('mirror.example/')
        ? []
        : [{ op: 'replace', path: `/spec/initContainers/${index}/image`, value: 'mirror.example/envoy:1' }];
    });
    const warned = await eventually('the altered sidecar warned of', async () => {
      const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, withProxy('altered'));
      return warnings(answer).some((w) => /required sidecar altered: template proxy/.test(w)) ? answer : undefined;
    });
    t.is(warned.status, 201);
    await kube.mergePatch(bindingPath, { spec: { validationActions: ['Deny'] } });
    const denied = await eventually('the altered sidecar refused', async () => {
      const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, withProxy('altered'));
      return answer.status >= 400 ? answer : undefined;
    });
    t.is(denied.status, 422);
    t.regex(
      String(denied.body.message),
      /ValidatingAdmissionPolicy 'sidecar-injector-required-proxy' with binding 'sidecar-injector-required-proxy' denied request: required sidecar altered: template proxy is required for this pod/,
    );
    // The second outage mode: [Deny] with the required webhook set to Ignore, the injector down.
    await kube.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/zz-test-webhook-${namespace}`);
    await scaleInjector(0);
    await setFailurePolicy('required.sidecar-injector.io', 'Ignore');
    const missing = await eventually('a pod that needs the proxy refused by the policy', async () => {
      const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, withProxy('needs-proxy'));
      return answer.status === 422 ? answer : undefined;
    });
    t.regex(
      String(missing.body.message),
      /denied request: required sidecar missing: template proxy is required for this pod and needs a container named proxy running docker\.io\/envoyproxy\/envoy/,
    );
    const plain = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, plainPod('needs-nothing'));
    t.is(plain.status, 201, 'a pod no required template applies to is created');
  },
);
