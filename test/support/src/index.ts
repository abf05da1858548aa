/**
 * Test support: a real nats-server on a random port, cohort subprocesses, model fixtures, HTTP helpers.
 * @module
 */
export * from './nats-server.ts'
export * from './nats-cluster.ts'
export * from './cli-process.ts'
export * from './fixtures.ts'
export * from './http.ts'
export * from './tracing.ts'
export * from './webhooks.ts'
export * from './sleepy-log.ts'
export * from './memory-job-queue.ts'
export * from './counts.ts'
export * from './process-guard.ts'
export * from './settled.ts'
export * from './log-lines.ts'
