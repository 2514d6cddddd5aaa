// The real-cluster suite (npm run test:cluster; npm test runs it after the unit suite): its
// files share one cluster, so they run one at a time, each test in order: the install as the
// world made it first, then the rest, then the check of every request the injector made, and
// last the Helm chart (it replaces the kustomize install).
// Waits inside tests are conditions with their own bounds; the timeout is only for a test that
// stops making progress.
const rank = (file) => (file.endsWith('/install.test.js') ? 0 : file.endsWith('/rbac.test.js') ? 2 : file.endsWith('/helm.test.js') ? 3 : 1);

export default {
  files: ['dist/test/cluster/**/*.test.js'],
  concurrency: 1,
  serial: true,
  timeout: '5m',
  workerThreads: false,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
};
