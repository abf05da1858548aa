import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { CohortError, subjects as makeSubjects, type ModelMeta } from '@cohort/protocol'
import type { Transport } from '@cohort/transport'
import { Registry, gatewayMetrics } from '@cohort/metrics'
import { consoleErrorLogger, defaultTracer, TRACEPARENT, TRACESTATE, type Logger } from '@cohort/observability'
import type { Tracer } from '@opentelemetry/api'
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_META_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, type JwtAuthOptions, type RateLimitOptions } from '../../options.ts'
import { Upstream } from '../../upstream.ts'
import { InferenceDoor, type Arrival } from '../../door.ts'
import type { WorkerWaitOptions } from '../../door-wait.ts'
import { WorkerLiveness, type WorkerLossOptions } from '../../liveness.ts'
import { checkModelPath } from '../../routes/infer.ts'
import { tritonConfig } from '../../routes/config.ts'
import { modelStats } from '../../routes/stats.ts'
import { deadlineAt, modelInfer, type ModelInferRequestMsg } from './infer.ts'
import { toServiceError } from './status.ts'

/** Options of {@link startGrpcServer}. */
export interface GrpcServerOptions {
  /** The bus to the workers: the same one the HTTP gateway uses. */
  transport: Transport
  /** Port to listen on; 0 picks a free one. */
  port: number
  /** @default '127.0.0.1' */
  host?: string
  /** NATS subject prefix. @default 'cohort' */
  subjectPrefix?: string
  /** Server-side deadline of a request in ms (a shorter gRPC deadline or `timeout` parameter wins). @default 30000 */
  requestTimeoutMs?: number
  /** Largest request message accepted, bytes (larger: RESOURCE_EXHAUSTED before it is buffered). @default 64 MiB */
  maxMessageBytes?: number
  /**
   * Bounds against slow and greedy clients (grpc-js server options): `maxConcurrentStreams` calls
   * per connection (100), `maxSessionMemoryMb` buffered per HTTP/2 connection before new streams
   * are refused (`grpc-node.max_session_memory`, 64), connections idle for `maxConnectionIdleMs`
   * (300000) or older than `maxConnectionAgeMs` (1800000, then `maxConnectionAgeGraceMs` 30000 for
   * calls running) are closed, and keepalive pings every `keepaliveTimeMs` (60000) must be answered
   * within `keepaliveTimeoutMs` (20000). See docs/security.md.
   */
  connectionLimits?: GrpcConnectionLimits
  /** Metadata request timeout, ms. @default 2000 */
  metaTimeoutMs?: number
  /**
   * When non-empty (or with `jwt`), every call needs metadata `authorization: Bearer <credential>`
   * with one of these keys or a token that verifies: the same check as the HTTP gateway's.
   */
  apiKeys?: string[]
  /** JWT bearer tokens, verified as over HTTP (`GatewayOptions.jwt`). */
  jwt?: JwtAuthOptions
  /**
   * Per-client token buckets as over HTTP (`GatewayOptions.rateLimit`; the gRPC server keeps its own
   * buckets): beyond them RESOURCE_EXHAUSTED with `retry-after` metadata. Health RPCs are not limited.
   */
  rateLimit?: RateLimitOptions
  /** Worker-loss detection and retry, as over HTTP (`GatewayOptions.workerLoss`); `false` turns it off. @default {} */
  workerLoss?: WorkerLossOptions | false
  /** Id of this server's acceptance-notice subject. @default random */
  gatewayId?: string
  /** Runtime queueing delay, ms (admission at the door, as over HTTP). @default none */
  queueDelayMs?: () => number
  /** The door's worker-wait check, as over HTTP (`GatewayOptions.workerWait`); `false` turns it off. @default {} */
  workerWait?: WorkerWaitOptions | false
  /** Tracer of the `cohort.gateway.infer` spans (parent: `traceparent` metadata). @default as HTTP */
  tracer?: Tracer
  /** Failed calls are logged at `warn`. @default errors to console.error */
  logger?: Logger
  /** `ServerMetadata` name and version. */
  serverName?: string
  serverVersion?: string
  /**
   * Registry for `cohort_requests_total` / `cohort_request_duration_seconds`: pass the HTTP app's
   * registry so gRPC inference counts in the same series. @default a private registry
   */
  registry?: Registry
  /** Called with unexpected (non-Cohort) errors. @default console.error */
  onUnexpectedError?: (e: unknown, fields?: Record<string, unknown>) => void
}

/** See {@link GrpcServerOptions.connectionLimits}. */
export interface GrpcConnectionLimits {
  maxConcurrentStreams?: number
  maxSessionMemoryMb?: number
  maxConnectionIdleMs?: number
  maxConnectionAgeMs?: number
  maxConnectionAgeGraceMs?: number
  keepaliveTimeMs?: number
  keepaliveTimeoutMs?: number
}

/** The grpc-js channel options of the message size and connection bounds. */
export function grpcServerChannelOptions(maxMessageBytes: number, l: GrpcConnectionLimits = {}): Record<string, number> {
  return {
    'grpc.max_receive_message_length': maxMessageBytes,
    'grpc.max_send_message_length': -1,
    'grpc.max_concurrent_streams': l.maxConcurrentStreams ?? 100,
    'grpc-node.max_session_memory': l.maxSessionMemoryMb ?? 64,
    'grpc.max_connection_idle_ms': l.maxConnectionIdleMs ?? 300_000,
    'grpc.max_connection_age_ms': l.maxConnectionAgeMs ?? 1_800_000,
    'grpc.max_connection_age_grace_ms': l.maxConnectionAgeGraceMs ?? 30_000,
    'grpc.keepalive_time_ms': l.keepaliveTimeMs ?? 60_000,
    'grpc.keepalive_timeout_ms': l.keepaliveTimeoutMs ?? 20_000,
  }
}

/** A running gRPC server. */
export interface GrpcServerHandle {
  readonly port: number
  /** Stop taking calls and finish those running (idempotent). */
  close(): Promise<void>
}

/** Directory of grpc_service.proto and model_config.proto (Triton's, BSD-3-Clause). */
export const PROTO_DIR = fileURLToPath(new URL('./proto/', import.meta.url))

let packageDef: grpc.GrpcObject | undefined
function loadService(): grpc.ServiceDefinition {
  packageDef ??= grpc.loadPackageDefinition(
    protoLoader.loadSync('grpc_service.proto', {
      includeDirs: [PROTO_DIR],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    }),
  )
  const inference = packageDef['inference'] as grpc.GrpcObject
  return (inference['GRPCInferenceService'] as grpc.ServiceClientConstructor).service
}

const metaTensors = (ts: ModelMeta['inputs']) => ts.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape }))

/**
 * Serve `inference.GRPCInferenceService` (Triton's grpc_service.proto, the gRPC form of the Open
 * Inference Protocol) over the same bus as the HTTP gateway: health, metadata, config, statistics,
 * ModelInfer (raw or typed input contents; outputs always as `raw_output_contents`) and
 * ModelStreamInfer. Repository, shared-memory, trace and log RPCs answer UNIMPLEMENTED.
 * Node only (an app adapter, like the HTTP listener).
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServerHandle> {
  const report = options.onUnexpectedError ?? ((e: unknown) => console.error('cohort: grpc: unexpected error', e))
  const subjects = makeSubjects(options.subjectPrefix ?? 'cohort')
  const gatewayId = options.gatewayId ?? `grpc-${crypto.randomUUID().slice(0, 8)}`
  const liveness = options.workerLoss === false ? undefined : new WorkerLiveness(options.transport, subjects, gatewayId, options.workerLoss)
  const up = new Upstream(options.transport, subjects, options.metaTimeoutMs ?? DEFAULT_META_TIMEOUT_MS, liveness)
  const metrics = gatewayMetrics(options.registry ?? new Registry())
  metrics.info.set({ gateway: gatewayId }, 1)
  const door = new InferenceDoor({
    upstream: up,
    metrics,
    requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    queueDelayMs: options.queueDelayMs,
    workerWait: options.workerWait,
    apiKeys: options.apiKeys,
    jwt: options.jwt,
    rateLimit: options.rateLimit,
    tracer: options.tracer ?? defaultTracer(),
    logger: options.logger ?? consoleErrorLogger,
    onUnexpectedError: (e, fields) => report(e, fields),
  })

  const first = (md: grpc.Metadata, key: string): string | undefined => {
    const v = md.get(key)[0]
    return typeof v === 'string' ? v : undefined
  }
  /** Authenticate and rate-limit a call through the door (health RPCs are not rate-limited). */
  const authorize = (call: { metadata: grpc.Metadata; getPeer(): string }, limited = true) =>
    door.authorize(first(call.metadata, 'authorization'), call.getPeer().replace(/:\d+$/, ''), limited)
  /**
   * The door's arrival of one inference request. `tenant`: the authenticated client (`key:<i>`,
   * `jwt:<sub>`), the envelope's tenant for fair shares, as over HTTP (none when auth is off).
   */
  const arrival = (call: { metadata: grpc.Metadata; getDeadline(): grpc.Deadline }, method: string, model: string, tenant: string | undefined): Arrival => ({
    method: 'POST',
    route: `/inference.GRPCInferenceService/${method}`,
    model,
    traceparent: first(call.metadata, TRACEPARENT),
    tracestate: first(call.metadata, TRACESTATE),
    deadlineAt: deadlineAt(call.getDeadline()),
    tenant,
  })
  const infer = (call: Parameters<typeof arrival>[0], method: string, r: ModelInferRequestMsg, signal: AbortSignal, tenant: string | undefined) =>
    door.serve(arrival(call, method, r.model_name, tenant), (p) => modelInfer(p, r, signal, first(call.metadata, 'idempotency-key') !== undefined))

  /** A unary handler: authorize, run, answer or map the error. */
  const unary =
    <Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>, limited = true) =>
    (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>): void => {
      Promise.resolve()
        .then(() => authorize(call, limited))
        .then(() => fn(call.request, call))
        .then(
          (res) => cb(null, res),
          (e) => cb(toServiceError(e, report)),
        )
    }

  const impl: grpc.UntypedServiceImplementation = {
    ServerLive: unary(async () => ({ live: true }), false),
    ServerReady: unary(async () => ({ ready: (await up.readiness()).ready }), false),
    ModelReady: unary(async (r: { name: string; version: string }) => {
      try {
        const version = r.version === '' ? undefined : r.version
        checkModelPath(r.name, version)
        return { ready: (await up.meta(r.name, version)).ready }
      } catch (e) {
        if (e instanceof CohortError && (e.code === 'MODEL_NOT_FOUND' || e.code === 'NO_WORKER')) {
          return { ready: false }
        }
        throw e
      }
    }, false),
    ServerMetadata: unary(async () => ({
      name: options.serverName ?? 'cohort',
      version: options.serverVersion ?? '0.1.0',
      extensions: ['binary_tensor_data', 'parameters', 'statistics', 'model_configuration'],
    })),
    ModelMetadata: unary(async (r: { name: string; version: string }) => {
      const version = r.version === '' ? undefined : r.version
      checkModelPath(r.name, version)
      const m = await up.meta(r.name, version)
      return { name: m.name, versions: m.versions, platform: m.platform, inputs: metaTensors(m.inputs), outputs: metaTensors(m.outputs) }
    }),
    ModelConfig: unary(async (r: { name: string; version: string }) => {
      const version = r.version === '' ? undefined : r.version
      checkModelPath(r.name, version)
      return { config: tritonConfig(await up.meta(r.name, version)) }
    }),
    ModelStatistics: unary(async (r: { name: string; version: string }) =>
      modelStats(up, r.name === '' ? undefined : r.name, r.version === '' ? undefined : r.version),
    ),
    ModelInfer: (call: grpc.ServerUnaryCall<ModelInferRequestMsg, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      const ac = new AbortController()
      call.on('cancelled', () => ac.abort())
      Promise.resolve()
        .then(() => authorize(call))
        .then((tenant) => infer(call, 'ModelInfer', call.request, ac.signal, tenant))
        .then(
          (res) => cb(null, res),
          (e) => cb(toServiceError(e, report)),
        )
    },
    ModelStreamInfer: (call: grpc.ServerDuplexStream<ModelInferRequestMsg, unknown>) => {
      const ac = new AbortController()
      call.on('cancelled', () => ac.abort())
      let pending = 0
      let ended = false
      const maybeEnd = () => {
        if (ended && pending === 0) {
          call.end()
        }
      }
      // Credentials once per stream; the rate limit per request on it, as each is one inference.
      let refused = false
      const authorized = door.authorize(first(call.metadata, 'authorization'), undefined, false)
      authorized.catch((e: unknown) => {
        refused = true
        call.emit('error', toServiceError(e, report))
      })
      call.on('data', (r: ModelInferRequestMsg) => {
        pending++
        authorized
          .then(() => authorize(call))
          .then((tenant) => infer(call, 'ModelStreamInfer', r, ac.signal, tenant))
          .then(
            (res) => call.write({ error_message: '', infer_response: res }),
            (e) => {
              if (refused) {
                return // the stream already ended with the refusal
              }
              const se = toServiceError(e, report)
              call.write({ error_message: se.details ?? 'error', infer_response: { model_name: r.model_name, id: r.id ?? '' } })
            },
          )
          .finally(() => {
            pending--
            maybeEnd()
          })
      })
      call.on('end', () => {
        ended = true
        maybeEnd()
      })
    },
  }

  const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_BODY_BYTES
  const server = new grpc.Server(grpcServerChannelOptions(maxBytes, options.connectionLimits))
  server.addService(loadService(), impl)
  const host = options.host ?? '127.0.0.1'
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${options.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  )
  let closing: Promise<void> | undefined
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        liveness?.close()
        const force = setTimeout(() => server.forceShutdown(), 5_000)
        force.unref?.()
        server.tryShutdown(() => {
          clearTimeout(force)
          resolve()
        })
      })
      return closing
    },
  }
}
