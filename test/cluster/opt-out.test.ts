/**
 * A required template's `optOut` on the real API server. A pod labelled
 * sidecar-injector.io/inject=disabled that a template with `optOut: deny` would otherwise apply
 * to: with the shipped manifests the webhooks are not called for it and it is created; the
 * policies `sidecar-injector policies` generates refuse it in the API server itself; with the
 * required-opt-out component the injector refuses it, and warns for `optOut: warn`. Pods the
 * templates do not apply to, and pods that do not opt out, are admitted as ever.
 */
import test, { type ExecutionContext } from 'ava';
import { parseAllDocuments } from 'yaml';
import {
  cli,
  containerNames,
  deploy,
  eventually,
  everyReplica,
  healthyInstall,
  joinWorld,
  optedInNamespace,
  plainPod,
  sidecarTemplatesPath,
  warnings,
  withTemplate,
  type Json,
} from './helpers.js';

const strict =
  'name: strict-agent\noptOut: deny\nobjectSelector: { matchLabels: { team: strict } }\ncontainers:\n  - name: strict-agent\n    image: registry.example/agent:1\n';
const soft =
  'name: soft-agent\noptOut: warn\nobjectSelector: { matchLabels: { team: soft } }\ncontainers:\n  - name: soft-agent\n    image: registry.example/agent:1\n';
const optOut = { 'sidecar-injector.io/inject': 'disabled' };
const webhookPath = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector';

/** A dry-run create of a pod with `labels` in `namespace`: the API server's whole answer. */
function create(namespace: string, name: string, labels: Record<string, string>) {
  const body = plainPod(name);
  body.metadata.labels = { app: name, ...labels };
  return joinWorld().kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, body);
}

const sidecarsOf = (pod: Json) => [...containerNames(pod).init, ...containerNames(pod).app].filter((n) => n.endsWith('-agent'));

/** Installs the required-opt-out component for one test (the shipped install again after it), once the required webhook is called for opted-out pods. */
async function withRequiredOptOut(t: ExecutionContext): Promise<void> {
  const { kube } = joinWorld();
  await deploy('test/cluster/overlays/required-opt-out');
  t.teardown(async () => {
    await deploy();
    await healthyInstall();
  });
  await eventually('the required webhook called for opted-out pods', async () => {
    const hooks = (await kube.get(webhookPath)).webhooks as Json[];
    // The API server stores an absent selector as the empty one: every pod.
    return JSON.stringify(hooks.find((w) => w.name === 'required.sidecar-injector.io')?.objectSelector) === '{}';
  });
  await healthyInstall();
}

test.serial(
  'optOut: created while the webhooks are not called for opted-out pods, refused by the generated policies, by the injector with the component',
  async (t) => {
    const { kube } = joinWorld();
    const namespace = await optedInNamespace(t, 'opt-out');
    await withTemplate(t, 'strict-agent', strict);
    await withTemplate(t, 'soft-agent', soft);

    // The shipped manifests: the webhooks' objectSelector keeps opted-out pods from them.
    const shipped = await create(namespace, 'shipped', { team: 'strict', ...optOut });
    t.is(shipped.status, 201, shipped.text);
    t.deepEqual(sidecarsOf(shipped.body), []);
    const selector = (await kube.get(webhookPath)).webhooks.find((w: Json) => w.name === 'required.sidecar-injector.io').objectSelector;
    t.deepEqual(selector.matchExpressions, [{ key: 'sidecar-injector.io/inject', operator: 'NotIn', values: ['disabled'] }]);

    // The policies of the two templates, as `sidecar-injector policies` prints them from the cluster's templates.
    const printed = await cli(['policies']);
    t.is(printed.code, 0, printed.stderr);
    const objects = parseAllDocuments(printed.stdout)
      .map((d) => d.toJS() as Json)
      .filter((o) => o && ['strict-agent', 'soft-agent'].includes(o.metadata?.labels?.['sidecar-injector.io/template']));
    t.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
      'ValidatingAdmissionPolicy/sidecar-injector-required-soft-agent',
      'ValidatingAdmissionPolicy/sidecar-injector-required-soft-agent-opt-out',
      'ValidatingAdmissionPolicy/sidecar-injector-required-strict-agent',
      'ValidatingAdmissionPolicy/sidecar-injector-required-strict-agent-opt-out',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-required-soft-agent',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-required-soft-agent-opt-out',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-required-strict-agent',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-required-strict-agent-opt-out',
    ]);
    const apis = '/apis/admissionregistration.k8s.io/v1';
    const pathOf = (o: Json) =>
      `${apis}/${o.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings'}/${o.metadata.name}`;
    // Bindings first out, policies first in.
    const ordered = [...objects].sort((a, b) => (a.kind < b.kind ? 1 : a.kind > b.kind ? -1 : 0));
    for (const o of [...ordered].reverse()) await kube.create(pathOf(o).replace(/\/[^/]+$/, ''), o);
    const removePolicies = async () => {
      for (const o of ordered) await kube.delete(pathOf(o));
    };
    t.teardown(removePolicies);
    const refused = await eventually('the opt-out policy in force', async () => {
      const answer = await create(namespace, 'by-policy', { team: 'strict', ...optOut });
      return answer.status === 201 ? undefined : answer;
    });
    t.is(refused.status, 422, refused.text);
    t.regex(
      refused.body.message,
      /ValidatingAdmissionPolicy 'sidecar-injector-required-strict-agent-opt-out' with binding 'sidecar-injector-required-strict-agent-opt-out' denied request: pod has label sidecar-injector\.io\/inject=disabled, and the required template strict-agent applies to it and does not let a pod opt out \(optOut: deny\)/,
    );
    const warned = await eventually('the warn policy in force', async () => {
      const answer = await create(namespace, 'warned', { team: 'soft', ...optOut });
      return answer.status === 201 && warnings(answer).length > 0 ? answer : undefined;
    });
    t.deepEqual(sidecarsOf(warned.body), []);
    t.regex(warnings(warned).join('\n'), /sidecar-injector-required-soft-agent-opt-out.*asks that pods run it \(optOut: warn\)/);
    // Pods the template injects pass both policies; opted-out pods it does not apply to are created.
    const injected = await create(namespace, 'injected', { team: 'strict' });
    t.is(injected.status, 201, injected.text);
    t.deepEqual(sidecarsOf(injected.body), ['strict-agent']);
    t.deepEqual(warnings(injected), []);
    const elsewhere = await create(namespace, 'elsewhere', { team: 'other', ...optOut });
    t.is(elsewhere.status, 201, elsewhere.text);
    await removePolicies();
    await eventually('the policies gone', async () => (await create(namespace, 'after-policies', { team: 'strict', ...optOut })).status === 201);

    // The component: the required webhook is called for opted-out pods, and the injector judges them.
    await withRequiredOptOut(t);
    const byInjector = await create(namespace, 'by-injector', { team: 'strict', ...optOut });
    t.is(byInjector.status, 403, byInjector.text);
    t.is(
      byInjector.body.message,
      `admission webhook "required.sidecar-injector.io" denied the request: pod has label sidecar-injector.io/inject=disabled, and the required template strict-agent that applies to it does not let a pod opt out (optOut: deny); remove the label, or ask the platform team to change the template's selectors or optOut`,
    );
    const warnedByInjector = await create(namespace, 'warned-by-injector', { team: 'soft', ...optOut });
    t.is(warnedByInjector.status, 201, warnedByInjector.text);
    t.deepEqual(sidecarsOf(warnedByInjector.body), []);
    t.deepEqual(warnings(warnedByInjector), [
      'soft-agent: a required sidecar the pod opts out of (optOut: warn); remove label sidecar-injector.io/inject=disabled',
    ]);
    // Every other pod as before: injected, or opted out where no template contests it.
    const stillInjected = await create(namespace, 'still-injected', { team: 'strict' });
    t.deepEqual(sidecarsOf(stillInjected.body), ['strict-agent']);
    const free = await create(namespace, 'free', { team: 'other', ...optOut });
    t.is(free.status, 201, free.text);
    t.deepEqual(warnings(free), []);
    // optOut changed alone (the revision stays): every replica serves it, and the pod is created.
    await kube.mergePatch(sidecarTemplatesPath('strict-agent'), { spec: { optOut: 'allow' } });
    await eventually('optOut: allow served', async () => (await create(namespace, 'after-allow', { team: 'strict', ...optOut })).status === 201);
  },
);

test.serial(
  'a required template whose SidecarTemplate is refused, with the component: its pods refused naming it, opted-out ones too under optOut: deny, warned under warn',
  async (t) => {
    const { kube } = joinWorld();
    // Runs last: the shipped install is back, the templates webhook with it.
    t.teardown(() =>
      eventually('the templates webhook back', async () =>
        ((await kube.get(webhookPath)).webhooks as Json[]).some((w) => w.name === 'templates.sidecar-injector.io'),
      ),
    );
    const namespace = await optedInNamespace(t, 'refused-opt-out');
    await withRequiredOptOut(t);
    // Stored as while the templates webhook cannot be called: that webhook left out for the test
    // (the teardown's install puts it back).
    const hooks = (await kube.get(webhookPath)).webhooks as Json[];
    const index = hooks.findIndex((w) => w.name === 'templates.sidecar-injector.io');
    t.true(index >= 0, 'the templates webhook installed');
    await kube.call(
      'PATCH',
      webhookPath,
      [
        { op: 'test', path: `/webhooks/${index}/name`, value: 'templates.sidecar-injector.io' },
        { op: 'remove', path: `/webhooks/${index}` },
      ],
      'application/json-patch+json',
    );
    const name = 'refused-agent';
    const broken = (optOutValue: string) => ({
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name },
      spec: {
        optOut: optOutValue,
        objectSelector: { matchLabels: { team: 'refused' } },
        containers: [{ name, image: 'registry.example/{{ pod.nmaespace }}:1' }],
      },
    });
    const stored = await eventually('the broken object stored (no templates webhook)', async () => {
      const answer = await kube.request('POST', sidecarTemplatesPath(), broken('deny'));
      return answer.status === 201 ? answer : undefined;
    });
    t.is(stored.status, 201, stored.text);
    t.teardown(() => kube.delete(sidecarTemplatesPath(name)));
    const refusedBy = (generation: number) => (status: Json) =>
      ((status.templates.refused ?? []) as Json[]).some((r) => r.name === name && r.generation === generation);
    await everyReplica(refusedBy(1), 'every replica refusing the object');
    // And the required webhook sent the pods it may apply to: its condition (written by the
    // leader) names the object's selector, or there is none.
    await eventually('the required webhook’s condition covering the refused object', async () => {
      const required = ((await kube.get(webhookPath)).webhooks as Json[]).find((w) => w.name === 'required.sidecar-injector.io');
      const conditions = (required?.matchConditions ?? []) as Json[];
      return conditions.every((c) => c.name !== 'a-template-may-apply' || String(c.expression).includes("'refused'")) || undefined;
    });

    const inScope = await create(namespace, 'in-scope', { team: 'refused' });
    // 503: the refusal is the injector's, until the object is fixed (the controller retries).
    t.is(inScope.status, 503, inScope.text);
    t.regex(
      inScope.body.message,
      /the required template of SidecarTemplate refused-agent may apply to this pod, and the injector refuses that object \(spec\.containers\[0\]\.image: .*nmaespace/,
    );
    const optedOutInScope = await create(namespace, 'opted-out-in-scope', { team: 'refused', ...optOut });
    t.is(optedOutInScope.status, 403, `optOut: deny holds while the object is refused: ${optedOutInScope.text}`);
    t.is(
      optedOutInScope.body.message,
      `admission webhook "required.sidecar-injector.io" denied the request: pod has label sidecar-injector.io/inject=disabled, and the required template ${name} that applies to it does not let a pod opt out (optOut: deny); remove the label, or ask the platform team to change the template's selectors or optOut`,
    );

    await kube.mergePatch(sidecarTemplatesPath(name), { spec: { optOut: 'warn' } });
    await everyReplica(refusedBy(2), 'every replica refusing the warn object');
    const warned = await create(namespace, 'warned', { team: 'refused', ...optOut });
    t.is(warned.status, 201, warned.text);
    t.deepEqual(sidecarsOf(warned.body), []);
    t.deepEqual(warnings(warned), [`${name}: a required sidecar the pod opts out of (optOut: warn); remove label sidecar-injector.io/inject=disabled`]);
    t.is((await create(namespace, 'still-refused', { team: 'refused' })).status, 503, 'not opted out: refused whatever optOut says');
  },
);
