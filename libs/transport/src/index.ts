/**
 * Message transports: the port the gateway and workers talk through, over NATS or in-process.
 * @module
 */
export {
  type AbortSignalLike,
  type CarriedValue,
  type ConfigStore,
  type ModelConfig,
  type ModelDirectory,
  type PublishOptions,
  type RequestOptions,
  type SubscribeOptions,
  type Transport,
  type TransportMessage,
  type TransportSubscription,
} from './types.ts'
export { AsyncQueue } from './async-queue.ts'
export { IN_PROCESS_MAX_MESSAGE_BYTES, InProcessTransport } from './in-process.ts'
export { CONFIG_BUCKET, createNatsTransport, MODELS_BUCKET, type NatsTransportOptions } from './nats.ts'
export {
  BLOB_ERROR_HEADER,
  BLOB_HEADER,
  type BlobRef,
  BlobStore,
  type BlobStoreOptions,
  chunkCount,
  type ChunkFetcher,
  chunkRange,
  DEFAULT_CHUNK_ATTEMPTS,
  DEFAULT_CHUNK_TIMEOUT_MS,
  fetchBlob,
  type FetchBlobOptions,
  formatBlobError,
  formatBlobRef,
  parseBlobError,
  parseBlobRef,
} from './blob.ts'
export {
  DEFAULT_BLOB_SUBJECT_PREFIX,
  DEFAULT_BLOB_TTL_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  type LargeMessageOptions,
} from './nats/large.ts'
export { consume } from './consume.ts'
export { DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_MAX_INFLIGHT_REQUESTS, InflightBudget, type InflightLimits } from './inflight.ts'
export {
  createNatsJobQueue,
  DEFAULT_JOB_MAX_DELIVER,
  DEFAULT_RECORD_MAX_BYTES,
  DEFAULT_RECORD_TTL_MS,
  type JobDelivery,
  jobNames,
  type JobQueue,
  type NatsJobQueueOptions,
} from './jobs.ts'
export {
  isAckOf,
  newReplyKey,
  REPLY_KEY_HEADER,
  type ReplyClass,
  ReplyGuard,
  type ReplyGuardOptions,
  replyKeyId,
  type ReplyRefusal,
} from './reply-guard.ts'
