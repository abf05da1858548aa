import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { CohortError, subjects as makeSubjects, type ModelMeta } from '@cohort/protocol'
import type { Transport } from '@cohort/transport'
import { Registry, gatewayMetrics } from '@cohort/metrics'
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_META_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS } from '../options.ts'
import { Upstream } from '../upstream.ts'
import { checkModelPath, metricModel } from '../routes/infer.ts'
import { tritonConfig } from '../routes/config.ts'
import { modelStats } from '../routes/stats.ts'
import { modelInfer, type ModelInferRequestMsg } from './infer.ts'
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
  /** When non-empty, every call needs metadata `authorization: Bearer KEY` with one of these. */
  apiKeys?: string[]
  /** `ServerMetadata` name and version. */
  serverName?: string
  serverVersion?: string
  /**
   * Registry for `cohort_requests_total` / `cohort_request_duration_seconds`: pass the HTTP app's
   * registry so gRPC inference counts in the same series. @default a private registry
   */
  registry?: Registry
  /** Called with unexpected (non-Cohort) errors. @default console.error */
  onUnexpectedError?: (e: unknown) => void
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
  const up = new Upstream(options.transport, makeSubjects(options.subjectPrefix ?? 'cohort'), options.metaTimeoutMs ?? DEFAULT_META_TIMEOUT_MS)
  const serverTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
  const keys = new Set(options.apiKeys ?? [])
  const metrics = gatewayMetrics(options.registry ?? new Registry())

  /** Count one ModelInfer (or one request on a stream) as the HTTP route does. */
  const counted = async <T>(model: string, run: () => Promise<T>): Promise<T> => {
    const t0 = performance.now()
    let code = 'OK'
    try {
      return await run()
    } catch (e) {
      code = e instanceof CohortError ? e.code : 'INTERNAL'
      throw e
    } finally {
      const label = metricModel(model, code)
      metrics.requests.inc({ model: label, code })
      metrics.duration.observe({ model: label }, (performance.now() - t0) / 1000)
    }
  }

  const authorize = (md: grpc.Metadata): void => {
    if (keys.size === 0) {
      return
    }
    const h = md.get('authorization')[0]
    const m = typeof h === 'string' ? /^Bearer\s+(.+)$/i.exec(h) : null
    if (!m || !keys.has(m[1]!.trim())) {
      throw new CohortError('UNAUTHORIZED', 'missing or invalid metadata "authorization: Bearer KEY"')
    }
  }

  /** A unary handler: authorize, run, answer or map the error. */
  const unary =
    <Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>) =>
    (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>): void => {
      Promise.resolve()
        .then(() => authorize(call.metadata))
        .then(() => fn(call.request, call))
        .then(
          (res) => cb(null, res),
          (e) => cb(toServiceError(e, report)),
        )
    }

  const infer = (r: ModelInferRequestMsg, deadline: grpc.Deadline | undefined, signal: AbortSignal) =>
    modelInfer(up, serverTimeoutMs, r, deadline, signal)

  const impl: grpc.UntypedServiceImplementation = {
    ServerLive: unary(async () => ({ live: true })),
    ServerReady: unary(async () => ({ ready: (await up.readiness()).ready })),
    ModelReady: unary(async (r: { name: string; version: string }) => {
      try {
        checkModelPath(r.name, r.version === '' ? undefined : r.version)
        return { ready: (await up.meta(r.name)).ready }
      } catch (e) {
        if (e instanceof CohortError && (e.code === 'MODEL_NOT_FOUND' || e.code === 'NO_WORKER')) {
          return { ready: false }
        }
        throw e
      }
    }),
    ServerMetadata: unary(async () => ({
      name: options.serverName ?? 'cohort',
      version: options.serverVersion ?? '0.1.0',
      extensions: ['binary_tensor_data', 'parameters', 'statistics', 'model_configuration'],
    })),
    ModelMetadata: unary(async (r: { name: string; version: string }) => {
      checkModelPath(r.name, r.version === '' ? undefined : r.version)
      const m = await up.meta(r.name)
      return { name: m.name, versions: m.versions, platform: m.platform, inputs: metaTensors(m.inputs), outputs: metaTensors(m.outputs) }
    }),
    ModelConfig: unary(async (r: { name: string; version: string }) => {
      checkModelPath(r.name, r.version === '' ? undefined : r.version)
      return { config: tritonConfig(await up.meta(r.name)) }
    }),
    ModelStatistics: unary(async (r: { name: string; version: string }) =>
      modelStats(up, r.name === '' ? undefined : r.name, r.version === '' ? undefined : r.version),
    ),
    ModelInfer: (call: grpc.ServerUnaryCall<ModelInferRequestMsg, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      const ac = new AbortController()
      call.on('cancelled', () => ac.abort())
      Promise.resolve()
        .then(() => authorize(call.metadata))
        .then(() => counted(call.request.model_name, () => infer(call.request, call.getDeadline(), ac.signal)))
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
      try {
        authorize(call.metadata)
      } catch (e) {
        call.emit('error', toServiceError(e, report))
        return
      }
      call.on('data', (r: ModelInferRequestMsg) => {
        pending++
        counted(r.model_name, () => infer(r, call.getDeadline(), ac.signal)).then(
          (res) => call.write({ error_message: '', infer_response: res }),
          (e) => {
            const se = toServiceError(e, report)
            call.write({ error_message: se.details ?? 'error', infer_response: { model_name: r.model_name, id: r.id ?? '' } })
          },
        ).finally(() => {
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
