import test from 'ava';
import { cannotInject } from './decision.js';

test('a required sidecar that cannot be injected says the fix once: the conflict’s short fix gives way to the rule’s remedy', (t) => {
  t.is(
    cannotInject(
      { name: 'proxy', optOut: 'allow' },
      'volume-conflict',
      "proxy not injected: its mounts would use the pod's own volume data; rename that volume",
    ),
    "required sidecar proxy cannot be injected: proxy not injected: its mounts would use the pod's own volume data; rename the pod's volume",
  );
  t.is(
    cannotInject(
      { name: 'proxy', optOut: 'allow' },
      'name-conflict',
      'proxy not injected: the pod has its own container proxy, the name of its sidecar; rename that container',
    ),
    "required sidecar proxy cannot be injected: proxy not injected: the pod has its own container proxy, the name of its sidecar; rename the pod's container, or remove it if it is a copy of the sidecar (the injector adds its own)",
  );
});
