import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config'

// Which suite a new test belongs in, each suite's time budget and how to run it: docs/testing.md.

/** Workers of a parallel project: COHORT_TEST_WORKERS, else 2 (the CI machine has 2 cores). */
const WORKERS = Number(process.env['COHORT_TEST_WORKERS'] ?? 2)

/**
 * A project with the harness every project gets: the run dir that marks the processes its tests
 * start, and the check after its last test that none outlived it (test/support/src/process-guard.ts).
 */
function project(name: string, test: NonNullable<TestProjectInlineConfiguration['test']>): TestProjectInlineConfiguration {
  return {
    test: {
      name,
      testTimeout: 20_000,
      hookTimeout: 30_000,
      globalSetup: ['test/setup/global-setup.ts'],
      setupFiles: ['test/setup/worker-setup.ts'],
      ...test,
    },
  }
}

export default defineConfig({
  test: {
    projects: [
      project('unit', {
        include: ['libs/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'bench/src/**/*.test.ts', 'examples/*/src/**/*.test.ts', 'test/repo/**/*.test.ts'],
        testTimeout: 10_000,
        maxWorkers: WORKERS,
      }),
      project('e2e', {
        include: ['test/e2e/**/*.test.ts'],
        testTimeout: 60_000,
        hookTimeout: 60_000,
        // Each file starts its own nats-server and cohort processes on random ports, with its own
        // model names and subject prefixes: files run side by side (docs/testing.md).
        maxWorkers: WORKERS,
      }),
      project('browser', {
        // Headless Chromium (playwright-core + /usr/bin/chromium) against `cohort serve`.
        include: ['test/browser/**/*.test.ts'],
        testTimeout: 180_000,
        hookTimeout: 120_000,
        fileParallelism: false,
      }),
      project('tools', {
        // External tools (the `nats` CLI, built by scripts/ci/install.sh).
        include: ['test/tools/**/*.test.ts'],
        testTimeout: 60_000,
        hookTimeout: 90_000,
        fileParallelism: false,
      }),
      project('packaging', {
        // The packed workspaces installed into a temp folder outside the checkout (npm pack +
        // npm install from the tarballs and the registry cache).
        include: ['test/packaging/**/*.test.ts'],
        testTimeout: 120_000,
        hookTimeout: 400_000,
        fileParallelism: false,
      }),
      project('infra', {
        // Kubernetes manifests (infra/k8s) against one pinned Kubernetes version's schemas, with
        // kubernetes-validate from test/infra/.venv (scripts/ci/install.sh links it).
        include: ['test/infra/**/*.test.ts'],
        testTimeout: 60_000,
        fileParallelism: false,
      }),
      project('netns', {
        // Multi-host fault tests and a short soak on network namespaces (test/netns; root and
        // iproute2). Scaling and the long soak: the nightly project.
        include: ['test/netns/**/*.test.ts'],
        exclude: ['test/netns/scaling.test.ts'],
        env: { SOAK_SECONDS: process.env['SOAK_SECONDS'] ?? '10' },
        testTimeout: 180_000,
        hookTimeout: 180_000,
        fileParallelism: false,
      }),
      project('nightly', {
        // `npm run test:nightly`: the scaling run and the 60 s soak on network namespaces; durable
        // jobs through a minute of overload (the flood project runs the same file for 8 s).
        include: ['test/netns/scaling.test.ts', 'test/netns/soak.test.ts', 'test/flood/jobs-overload.test.ts'],
        env: { SOAK_SECONDS: process.env['SOAK_SECONDS'] ?? '60', JOBS_FLOOD_SECONDS: process.env['JOBS_FLOOD_SECONDS'] ?? '60' },
        testTimeout: 300_000,
        hookTimeout: 180_000,
        fileParallelism: false,
      }),
      project('edge', {
        // The gateway on edge runtimes (workerd and Bun, from npm devDependencies) against a real
        // nats-server with a websocket listener.
        include: ['test/edge/**/*.test.ts'],
        testTimeout: 60_000,
        hookTimeout: 180_000,
        fileParallelism: false,
      }),
      project('redis', {
        // `cohort bridge redis` against a real redis-server (Debian's).
        include: ['test/redis/**/*.test.ts'],
        testTimeout: 60_000,
        hookTimeout: 180_000,
        fileParallelism: false,
      }),
      project('flood', {
        // Floods a real gateway process and checks its memory against its in-flight bound.
        include: ['test/flood/**/*.test.ts'],
        testTimeout: 180_000,
        hookTimeout: 120_000,
        fileParallelism: false,
      }),
      project('python', {
        // Triton's Python clients, perf_analyzer and schemathesis (venvs from test/python/setup.sh)
        // against real processes.
        include: ['test/python/**/*.test.ts'],
        testTimeout: 240_000,
        hookTimeout: 660_000,
        fileParallelism: false,
      }),
    ],
  },
})
