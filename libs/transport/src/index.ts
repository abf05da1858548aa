/**
 * Message transports: the port the gateway and workers talk through, over NATS or in-process.
 * @module
 */
export * from './types.ts'
export * from './async-queue.ts'
export * from './in-process.ts'
export * from './nats.ts'
export * from './blob.ts'
export {
  DEFAULT_BLOB_SUBJECT_PREFIX,
  DEFAULT_BLOB_TTL_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  type LargeMessageOptions,
} from './nats/large.ts'
export * from './consume.ts'
export * from './inflight.ts'
export * from './jobs.ts'
export * from './reply-guard.ts'
