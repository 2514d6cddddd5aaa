// The real-cluster suite (npm run test:cluster; npm test runs it after the unit suite): its
// files share one cluster, so they run one at a time, each test in order. Waits inside tests are
// conditions with their own bounds; the timeout is only for a test that stops making progress.
export default {
  files: ['dist/test/cluster/**/*.test.js'],
  concurrency: 1,
  serial: true,
  timeout: '5m',
  workerThreads: false,
};
