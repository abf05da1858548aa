import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { CohortError, type ModelMeta } from '@cohort/protocol'
import { TRACEPARENT, TRACESTATE } from '@cohort/observability'
import type { GatewayOptions } from '../../options.ts'
import type { Arrival } from '../../door.ts'
import { createGatewayCore, type GatewayCore } from '../../core.ts'
import { checkModelPath } from '../../routes/infer.ts'
import { tritonConfig } from '../../routes/config.ts'
import { modelStats } from '../../routes/stats.ts'
import { deadlineAt, messageBytes, modelInfer, paramValue, type ModelInferRequestMsg } from './infer.ts'
import { toServiceError } from './status.ts'

/** Where and how the gRPC server listens (whatever core it serves). */
export interface GrpcListenOptions {
  /** Port to listen on; 0 picks a free one. */
  port: number
  /** @default '127.0.0.1' */
  host?: string
  /** Largest request message accepted, bytes (larger: RESOURCE_EXHAUSTED before it is buffered). @default the core's `maxBodyBytes` (64 MiB) */
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
}

/**
 * A gRPC server of its own gateway: the core is built from these (the same options as the HTTP
 * gateway's), and closed with the server. `maxMessageBytes` defaults to `maxBodyBytes`.
 */
export type GrpcGatewayOptions = GatewayOptions & GrpcListenOptions

/**
 * Options of {@link startGrpcServer}: a {@link GatewayCore} to serve (shared with the HTTP app:
 * one gateway id, one door, one in-flight bound; the core stays its owner's to close), or the
 * options of a gateway of its own.
 */
export type GrpcServerOptions = (GrpcListenOptions & { core: GatewayCore }) | GrpcGatewayOptions

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

/** The first string value of a metadata key. */
function first(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0]
  return typeof v === 'string' ? v : undefined
}

type Authorize = (call: { metadata: grpc.Metadata; getPeer(): string }, limited?: boolean) => Promise<string | undefined>
type Infer = (
  call: { metadata: grpc.Metadata; getDeadline(): grpc.Deadline },
  method: string,
  r: ModelInferRequestMsg,
  signal: AbortSignal,
  tenant: string | undefined,
) => Promise<unknown>

/** Step 1: authenticate and rate-limit a call through the door (health RPCs are not rate-limited). */
function authorizer(door: GatewayCore['door']): Authorize {
  return (call, limited = true) => door.authorize(first(call.metadata, 'authorization'), call.getPeer().replace(/:\d+$/, ''), limited)
}

/**
 * Step 2: the door's arrival of one inference request, and the call through the door. `tenant`:
 * the authenticated client (`key:<i>`, `jwt:<sub>`), the envelope's tenant for fair shares, as
 * over HTTP (none when auth is off). The door's checks run before the inputs are decoded (the
 * `timeout` parameter is already known here); a refusal costs what an HTTP refusal costs: no log
 * line (aggregated), no NATS message, no decode.
 */
function inferThroughDoor(door: GatewayCore['door']): Infer {
  const arrival = (call: Parameters<Infer>[0], method: string, r: ModelInferRequestMsg, tenant: string | undefined): Arrival => ({
    origin: 'grpc',
    method: 'POST',
    route: `/inference.GRPCInferenceService/${method}`,
    model: r.model_name,
    version: r.model_version === '' ? undefined : r.model_version,
    timeoutParamUs: paramValue(r.parameters['timeout']),
    holdBytes: messageBytes(r),
    traceparent: first(call.metadata, TRACEPARENT),
    tracestate: first(call.metadata, TRACESTATE),
    deadlineAt: deadlineAt(call.getDeadline()),
    tenant,
  })
  return (call, method, r, signal, tenant) => door.serve(arrival(call, method, r, tenant), (p) => modelInfer(p, r, signal, first(call.metadata, 'idempotency-key') !== undefined))
}

/** A unary handler: authorize, run, answer or map the error. */
function unaryOf(authorize: Authorize, report: (e: unknown) => void) {
  return <Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>, limited = true) =>
    (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>): void => {
      Promise.resolve()
        .then(() => authorize(call, limited))
        .then(() => fn(call.request, call))
        .then(
          (res) => cb(null, res),
          (e: unknown) => cb(toServiceError(e, report)),
        )
    }
}

/** The optional `version` of a metadata request ('' is none), checked with its model name. */
function namedVersion(r: { name: string; version: string }): string | undefined {
  const version = r.version === '' ? undefined : r.version
  checkModelPath(r.name, version)
  return version
}

/** Step 3: health, metadata, config and statistics RPCs. */
function metadataRpcs(core: GatewayCore, unary: ReturnType<typeof unaryOf>): grpc.UntypedServiceImplementation {
  const { upstream: up, options: gw } = core
  return {
    ServerLive: unary(() => Promise.resolve({ live: true }), false),
    ServerReady: unary(async () => ({ ready: (await up.readiness()).ready }), false),
    ModelReady: unary(async (r: { name: string; version: string }) => {
      try {
        return { ready: (await up.meta(r.name, namedVersion(r))).ready }
      } catch (e) {
        if (e instanceof CohortError && (e.code === 'MODEL_NOT_FOUND' || e.code === 'NO_WORKER')) {
          return { ready: false }
        }
        throw e
      }
    }, false),
    ServerMetadata: unary(() =>
      Promise.resolve({
        name: gw.serverName,
        version: gw.serverVersion,
        extensions: ['binary_tensor_data', 'parameters', 'statistics', 'model_configuration'],
      }),
    ),
    ModelMetadata: unary(async (r: { name: string; version: string }) => {
      const m = await up.meta(r.name, namedVersion(r))
      return { name: m.name, versions: m.versions, platform: m.platform, inputs: metaTensors(m.inputs), outputs: metaTensors(m.outputs) }
    }),
    ModelConfig: unary(async (r: { name: string; version: string }) => ({ config: tritonConfig(await up.meta(r.name, namedVersion(r))) })),
    ModelStatistics: unary(async (r: { name: string; version: string }) => modelStats(up, r.name === '' ? undefined : r.name, r.version === '' ? undefined : r.version)),
  }
}

/** Step 4: ModelInfer, one request through the door. */
function modelInferRpc(authorize: Authorize, infer: Infer, report: (e: unknown) => void) {
  return (call: grpc.ServerUnaryCall<ModelInferRequestMsg, unknown>, cb: grpc.sendUnaryData<unknown>) => {
    const ac = new AbortController()
    call.on('cancelled', () => ac.abort())
    Promise.resolve()
      .then(() => authorize(call))
      .then((tenant) => infer(call, 'ModelInfer', call.request, ac.signal, tenant))
      .then(
        (res) => cb(null, res),
        (e: unknown) => cb(toServiceError(e, report)),
      )
  }
}

/**
 * Step 5: ModelStreamInfer: credentials once per stream, the rate limit and the door per request
 * on it (each is one inference); a failed request is an `error_message` on the stream.
 */
function modelStreamInferRpc(door: GatewayCore['door'], authorize: Authorize, infer: Infer, report: (e: unknown) => void) {
  return (call: grpc.ServerDuplexStream<ModelInferRequestMsg, unknown>) => {
    const ac = new AbortController()
    call.on('cancelled', () => ac.abort())
    let pending = 0
    let ended = false
    const maybeEnd = () => {
      if (ended && pending === 0) {
        call.end()
      }
    }
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
          (e: unknown) => {
            if (refused) {
              return // the stream already ended with the refusal
            }
            const se = toServiceError(e, report)
            call.write({ error_message: se.details ?? 'error', infer_response: { model_name: r.model_name, id: r.id } })
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
  }
}

/** Step 6: bind the server on host:port; the port bound. */
function bind(server: grpc.Server, host: string, port: number): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  )
}

/** Step 7: the handle: an idempotent close (calls running finish, forced after 5 s), then the core when the server owns it. */
function handleOf(server: grpc.Server, port: number, core: GatewayCore, owned: boolean): GrpcServerHandle {
  let closing: Promise<void> | undefined
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.forceShutdown(), 5_000)
        force.unref()
        server.tryShutdown(() => {
          clearTimeout(force)
          resolve()
        })
      }).then(() => (owned ? core.close() : undefined))
      return closing
    },
  }
}

/**
 * Serve `inference.GRPCInferenceService` (Triton's grpc_service.proto, the gRPC form of the Open
 * Inference Protocol) over the same bus as the HTTP gateway: health, metadata, config, statistics,
 * ModelInfer (raw or typed input contents; outputs always as `raw_output_contents`) and
 * ModelStreamInfer. Repository, shared-memory, trace and log RPCs answer UNIMPLEMENTED.
 * Node only (an app adapter, like the HTTP listener). Its steps are the functions above.
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServerHandle> {
  const owned = !('core' in options)
  const core = 'core' in options ? options.core : createGatewayCore(options)
  const report = core.options.onUnexpectedError
  const authorize = authorizer(core.door)
  const infer = inferThroughDoor(core.door)
  const impl: grpc.UntypedServiceImplementation = {
    ...metadataRpcs(core, unaryOf(authorize, report)),
    ModelInfer: modelInferRpc(authorize, infer, report),
    ModelStreamInfer: modelStreamInferRpc(core.door, authorize, infer, report),
  }
  const server = new grpc.Server(grpcServerChannelOptions(options.maxMessageBytes ?? core.options.maxBodyBytes, options.connectionLimits))
  server.addService(loadService(), impl)
  const port = await bind(server, options.host ?? '127.0.0.1', options.port)
  return handleOf(server, port, core, owned)
}
