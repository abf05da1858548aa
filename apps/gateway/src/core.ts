/**
 * The gateway core: the one place a process builds its gateway's parts (options resolved once,
 * the worker-liveness detector, the upstream, the inference door), shared by every codec that
 * serves it: the HTTP app ({@link createApp}), the gRPC server (`startGrpcServer({ core })`), the
 * edge handler, async jobs and the Redis bridge. One core is one gateway id: one heartbeat
 * subscription, one wait table, one in-flight bound. See docs/architecture.md#the-gateway-core.
 * @module
 */
import { subjects as makeSubjects, type Subjects } from '@cohort/protocol'
import { Registry, gatewayMetrics, type GatewayMetrics } from '@cohort/metrics'
import { InferenceDoor } from './door.ts'
import { WorkerLiveness } from './liveness.ts'
import { resolveOptions, type GatewayOptions, type ResolvedGatewayOptions } from './options.ts'
import { Upstream } from './upstream.ts'

/** The parts of one gateway, built once per process by {@link createGatewayCore}. */
export interface GatewayCore {
  /** The options, defaults applied, validated and frozen. */
  readonly options: ResolvedGatewayOptions
  /** The registry of the gateway's metrics (`options.registry`, else its own). */
  readonly registry: Registry
  readonly metrics: GatewayMetrics
  readonly subjects: Subjects
  /** This gateway's id: its acceptance-notice subject and `cohort_gateway_info{gateway}`. */
  readonly gatewayId: string
  /** Worker-loss detection (with the workers' queue-wait estimates), unless `workerLoss` is false. */
  readonly liveness: WorkerLiveness | undefined
  readonly upstream: Upstream
  /** The one door every inference call passes through. */
  readonly door: InferenceDoor
  /** Stop the liveness detector (its heartbeat subscription and timer). Idempotent; the transport is the caller's. */
  close(): Promise<void>
}

/** A fresh gateway id: `g-` and 8 hex digits. */
export function newGatewayId(): string {
  return `g-${crypto.randomUUID().slice(0, 8)}`
}

/** Build the gateway's parts from its options (resolved here, once). */
export function createGatewayCore(options: GatewayOptions): GatewayCore {
  const o = resolveOptions(options)
  const registry = o.registry ?? new Registry()
  const metrics = gatewayMetrics(registry)
  const subjects = makeSubjects(o.subjectPrefix)
  const gatewayId = o.gatewayId ?? newGatewayId()
  metrics.info.set({ gateway: gatewayId }, 1)
  const liveness = o.workerLoss === false ? undefined : new WorkerLiveness(o.transport, subjects, gatewayId, o.workerLoss)
  const upstream = new Upstream(o.transport, subjects, o.metaTimeoutMs, liveness)
  const adapter = o.adapter
  const door = new InferenceDoor({
    upstream,
    metrics,
    requestTimeoutMs: o.requestTimeoutMs,
    serverSlo: o.serverSlo,
    queueDelayMs: adapter?.queueDelayMs?.bind(adapter),
    workerWait: o.workerWait,
    refusalLogIntervalMs: o.refusalLogIntervalMs,
    inflight: o.inflight,
    apiKeys: o.apiKeys,
    jwt: o.jwt,
    rateLimit: o.rateLimit,
    tracer: o.tracer,
    logger: o.logger,
    onUnexpectedError: o.onUnexpectedError,
  })
  let closed: Promise<void> | undefined
  return Object.freeze({
    options: o,
    registry,
    metrics,
    subjects,
    gatewayId,
    liveness,
    upstream,
    door,
    close() {
      closed ??= Promise.resolve().then(() => liveness?.close())
      return closed
    },
  })
}

/** True for a {@link GatewayCore} (as opposed to options to build one from). */
export function isGatewayCore(x: GatewayOptions | GatewayCore): x is GatewayCore {
  return 'door' in x && x.door instanceof InferenceDoor
}
