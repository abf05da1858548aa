/**
 * Test support: a real nats-server on a random port, cohort subprocesses, model fixtures, HTTP helpers.
 * @module
 */
export { type NatsServerHandle, type NatsServerOptions, startNatsServer } from './nats-server.ts'
export { type NatsClusterHandle, type NatsClusterNode, type NatsClusterOptions, startNatsCluster } from './nats-cluster.ts'
export { type CliProcess, COHORT_BIN, cohortArgs, cohortNodeFlags, spawnCohort, type SpawnOptions, spawnProcess } from './cli-process.ts'
export { BUSY_PREDICTOR, type ModelFixtures, SLEEPY_PREDICTOR, writeModelFixtures } from './fixtures.ts'
export { getJson, type JsonBody, pool, postJson } from './http.ts'
export { memoryTracing, type MemoryTracing, newTraceparent } from './tracing.ts'
export { type Hook, webhookReceiver } from './webhooks.ts'
export { readSleepyLog, type SleepyEvent, sleepyLogPath, sleepyRuns, waitRunning } from './sleepy-log.ts'
export { MemoryJobQueue } from './memory-job-queue.ts'
export { countPerRequest, countsAbove, type RequestCounts } from './counts.ts'
export { identityModelFile, startFloorServer } from './floor.ts'
export { findStragglers, reapStragglers, recordChild, RUN_MARK, type Straggler } from './process-guard.ts'
export { allStarted, ifStarted } from './if-started.ts'
export { settledWithin } from './settled.ts'
export { type KeptLine, keptLogger } from './log-lines.ts'
