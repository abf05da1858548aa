import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 30_000,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['libs/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts'],
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
    ],
  },
})
