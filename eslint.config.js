// Lint: typescript-eslint's recommended rules, Prettier for form, and the floor plan as rules.
// Every folder of src/ may import only from the floors below it (see DEVELOPMENT.md, Layout and the floor plan):
//   errors.ts, quote.ts                        leaves
//   k8s/                                       Kubernetes vocabulary: imports only the leaves
//   fs/                                        a leaf (watching files)
//   templates/                                 k8s, fs
//   selection/, inject/                        templates, k8s
//   kube-api/                                  k8s (list/watch and GETs of the Kubernetes API)
//   namespaces/                                k8s, kube-api
//   pipeline/                                  selection, templates, inject, namespaces, k8s
//   admission/, manifests/                     pipeline and below
//   audit/                                     pipeline, kube-api and below (the server's auditor)
//   rollout/                                   pipeline, kube-api and below (a candidate's preflight through the cluster)
//   http/, tls/, fs/, app.ts, server.ts, …     above the domain; cli/ on top
//   certs/                                     kube-api, tls, fs (self-managed certificates)
//   runtime/                                   a leaf (runnables and the manager that starts and stops them)
//   serving/                                   every floor but cli/: the running injector composed of runnables
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

const floors = [
  'runtime',
  'k8s',
  'kube-api',
  'audit',
  'rollout',
  'templates',
  'selection',
  'inject',
  'namespaces',
  'pipeline',
  'admission',
  'manifests',
  'http',
  'tls',
  'certs',
  'fs',
  'serving',
  'cli',
];
const topFiles = ['app', 'server', 'config', 'metrics', 'liveness'];

/** A rule for the files of `folder` that forbids every folder and top-level module not in `allowed`. */
function floor(folder, allowed) {
  const forbidden = [
    ...floors.filter((f) => f !== folder && !allowed.includes(f)).map((f) => `../${f}/*`),
    ...topFiles.filter((f) => !allowed.includes(f)).map((f) => `../${f}.js`),
  ];
  return {
    files: [`src/${folder}/**/*.ts`],
    ignores: ['src/**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: forbidden,
              message: `src/${folder}/ may import only from ${allowed.length ? allowed.join(', ') : 'the leaves (errors.ts, quote.ts)'}: every import points down (DEVELOPMENT.md, Layout and the floor plan).`,
            },
          ],
        },
      ],
    },
  };
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.dev-certs/', '.node24/', 'manifests/overlays/self-signed/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
        TextDecoder: 'readonly',
        AbortSignal: 'readonly',
        performance: 'readonly',
        globalThis: 'readonly',
        structuredClone: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  floor('k8s', []),
  floor('templates', ['k8s', 'fs']),
  floor('selection', ['templates', 'k8s']),
  floor('inject', ['templates', 'k8s']),
  floor('kube-api', ['k8s']),
  floor('namespaces', ['k8s', 'kube-api']),
  floor('pipeline', ['selection', 'templates', 'inject', 'namespaces', 'k8s']),
  floor('admission', ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'k8s']),
  floor('manifests', ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'k8s']),
  floor('audit', ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'kube-api', 'k8s', 'runtime']),
  floor('rollout', ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'kube-api', 'k8s', 'runtime']),
  floor('http', ['admission', 'pipeline', 'k8s', 'metrics', 'liveness']),
  floor('fs', []),
  floor('tls', ['fs']),
  floor('certs', ['kube-api', 'k8s', 'tls', 'fs']),
  floor('runtime', []),
  floor('serving', floors.filter((f) => f !== 'serving' && f !== 'cli').concat(topFiles)),
);
