import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 30_000,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['libs/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'bench/src/**/*.test.ts', 'examples/*/src/**/*.test.ts'],
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Cross-process suites start nats-server and workers; keep them from fighting over 2 cores.
          fileParallelism: false,
        },
      },
      {
        test: {
          // Headless Chromium (playwright-core + /usr/bin/chromium) against `cohort serve`: in
          // `npm run test:all`, not in `npm test`.
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Suites that drive external tools (the `nats` CLI, from `go install`): in
          // `npm run test:all`, not in `npm test`.
          name: 'tools',
          include: ['test/tools/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 90_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // The packed workspaces installed into a temp folder outside the checkout (npm pack +
          // npm install from the tarballs and the registry cache): in `npm run test:all`.
          name: 'packaging',
          include: ['test/packaging/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 400_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Kubernetes manifests (infra/k8s) against one pinned Kubernetes version's schemas, with
          // kubernetes-validate from a venv in test/infra/.venv (.ci/run installs it): in
          // `npm run test:all`, not in `npm test`.
          name: 'infra',
          include: ['test/infra/**/*.test.ts'],
          testTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Multi-host fault tests, scaling and soak on network namespaces (test/netns; needs root and
          // iproute2): in `npm run test:all`, not in `npm test`.
          name: 'netns',
          include: ['test/netns/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // The gateway on edge runtimes (workerd and Bun, binaries from npm devDependencies) against
          // a real nats-server with a websocket listener: in `npm run test:all`, not in `npm test`.
          name: 'edge',
          include: ['test/edge/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // `cohort bridge redis` against a real redis-server (Debian's; .ci/run installs it): in
          // `npm run test:all`, not in `npm test`.
          name: 'redis',
          include: ['test/redis/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Floods a real gateway process and checks its memory against its in-flight bound
          // (test/flood): in `npm run test:all`, not in `npm test`.
          name: 'flood',
          include: ['test/flood/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Triton's Python clients and perf_analyzer (test/python/.venv from PyPI, setup.sh) against
          // real processes: in `npm run test:all`, not in `npm test`.
          name: 'python',
          include: ['test/python/**/*.test.ts'],
          testTimeout: 240_000,
          hookTimeout: 660_000,
          fileParallelism: false,
        },
      },
    ],
  },
})
