/**
 * Message transports: the port the gateway and workers talk through, over NATS or in-process.
 * @module
 */
export * from './types.ts'
export * from './async-queue.ts'
export * from './in-process.ts'
export * from './nats.ts'
export * from './consume.ts'
