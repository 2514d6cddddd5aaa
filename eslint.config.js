// Lint: typescript-eslint's recommended rules, Prettier for form, and the floor plan as rules.
// The floor plan: what each room of src/ (a folder, or a file directly in src/) may import. Every
// import points down DEVELOPMENT.md's list (Layout and the floor plan; test/floor-plan.test.ts
// holds the two together); the leaves (errors.ts, quote.ts, reloadable.ts, clock.ts) anyone may
// import, and nothing may import cli/.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** Room → the rooms it may import (besides the leaves). Folders by name, top-level files as `name.ts`. */
export const floorPlan = {
  runtime: [],
  k8s: [],
  fs: [],
  templates: ['k8s', 'fs'],
  selection: ['templates', 'k8s'],
  inject: ['templates', 'k8s'],
  'kube-api': ['k8s'],
  namespaces: ['k8s', 'kube-api'],
  pipeline: ['selection', 'templates', 'inject', 'namespaces', 'k8s'],
  admission: ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'k8s'],
  manifests: ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'k8s'],
  audit: ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'kube-api', 'k8s', 'runtime'],
  rollout: ['pipeline', 'selection', 'templates', 'inject', 'namespaces', 'kube-api', 'k8s', 'runtime'],
  'liveness.ts': [],
  'metrics.ts': [],
  http: ['admission', 'pipeline', 'k8s', 'metrics.ts', 'liveness.ts'],
  tls: ['fs'],
  certs: ['kube-api', 'k8s', 'tls', 'fs'],
  'server.ts': [],
  'options.ts': ['k8s'],
  'config.ts': ['http', 'k8s', 'namespaces', 'options.ts', 'pipeline', 'server.ts'],
  'app.ts': ['admission', 'http', 'liveness.ts', 'metrics.ts', 'pipeline'],
  'reviewer.ts': ['admission'],
  serving: [
    'runtime',
    'k8s',
    'fs',
    'templates',
    'selection',
    'inject',
    'kube-api',
    'namespaces',
    'pipeline',
    'admission',
    'manifests',
    'audit',
    'rollout',
    'liveness.ts',
    'metrics.ts',
    'http',
    'tls',
    'certs',
    'server.ts',
    'options.ts',
    'config.ts',
    'app.ts',
    'reviewer.ts',
  ],
};
const rooms = [...Object.keys(floorPlan), 'cli'];

/** The import path of `room` as written from a file in `where` (a folder of src/, or src/ itself). */
function importPattern(room, where) {
  const up = where === 'top' ? './' : '../';
  return room.endsWith('.ts') ? `${up}${room.replace(/\.ts$/, '.js')}` : `${up}${room}/*`;
}

/** A rule for the files of `room` that forbids every room not in `allowed`. */
function floor(room, allowed) {
  const where = room.endsWith('.ts') ? 'top' : 'folder';
  const forbidden = rooms.filter((r) => r !== room && !allowed.includes(r)).map((r) => importPattern(r, where));
  return {
    files: [where === 'top' ? `src/${room}` : `src/${room}/**/*.ts`],
    ignores: ['src/**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: forbidden,
              message: `src/${room}${where === 'top' ? '' : '/'} may import only from ${allowed.length ? allowed.join(', ') : 'the leaves (errors.ts, quote.ts, reloadable.ts, clock.ts)'}: every import points down (DEVELOPMENT.md, Layout and the floor plan).`,
            },
          ],
        },
      ],
    },
  };
}

export default tseslint.config(
  // build/: what make image and make release write (the image's root filesystem holds a copy of dist/).
  { ignores: ['dist/', 'build/', 'node_modules/', '.dev-certs/', '.node24/', 'manifests/overlays/self-signed/'] },
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
  ...Object.entries(floorPlan).map(([room, allowed]) => floor(room, allowed)),
);
