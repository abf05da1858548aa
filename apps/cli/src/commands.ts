import { Hono } from 'hono'
import type { BatchingConfig, Policy } from '@cohort/batching'
import { createApp, createGatewayCore, type GatewayApp, type GatewayCore, type GatewayOptions } from '@cohort/gateway'
import { PROMETHEUS_CONTENT_TYPE } from '@cohort/metrics'
import { DASHBOARD_SAMPLE_MS, processRegistry } from './process-registry.ts'
import { CohortWorker, defaultIntraOpThreads, type PaddingOptions } from '@cohort/worker'
import { InProcessTransport, createNatsTransport, type Transport } from '@cohort/transport'
import { parse } from './args.ts'
import { BATCHING_HELP, DEFAULT_EP, DEFAULT_INSTANCES, MODEL_HELP, MODEL_OPTIONS, modelKnobs } from './model-flags.ts'
import { renderHelp } from './help.ts'
import { ifSet, knobHelp } from './knobs.ts'
import { CliError } from './cli-error.ts'
import { connectNats } from './connect.ts'
import { NATS_AUTH_HELP, NATS_AUTH_OPTIONS, kvReplicas, natsAuthOptions } from './nats-auth.ts'
import { LARGE_HELP, LARGE_OPTIONS, bodyLimit, largeMessageOptions } from './large-flags.ts'
import { SECURITY_HELP, SECURITY_OPTIONS, describeSecurity, securityOptions, tlsFiles } from './security-flags.ts'
import { listen, type HttpServer } from './http.ts'
import { installShutdown, type StopStep } from './shutdown.ts'
import { DEFAULT_REQUEST_TIMEOUT_MS } from '@cohort/gateway'
import { GRPC_HELP, GRPC_OPTIONS, startGrpcFromFlags } from './grpc-flags.ts'
import { DOOR_HELP, DOOR_OPTIONS, HTTP_KNOB_HELP, HTTP_OPTIONS, doorOptions, httpKnobs, listenerBounds } from './door-flags.ts'
import { LINK_HELP, LINK_OPTIONS, PROBE_HELP, PROBE_OPTIONS, RECORD_HELP, RECORD_OPTIONS, STORE_HELP, STORE_OPTIONS, probeOptions, workerLossOptions } from './reliability-flags.ts'
import { gatewayAdapter } from './node-adapter.ts'
import { PROCESSES_HELP, PROCESSES_OPTIONS, isClusterChild, notifyListening, onPrimaryStop, processesFlag, runPrimary } from './cluster.ts'
import { buildRunners, type ModelFlags } from './runners.ts'
import type { GenerativeSlo } from '@cohort/protocol'
import { PIPELINE_HELP, PIPELINE_OPTIONS, SERVE_PIPELINE_HELP, SERVE_PIPELINE_OPTIONS, pipelineRunners } from './pipeline-flags.ts'
import { TELEMETRY_HELP, TELEMETRY_OPTIONS, setupTelemetry } from './telemetry.ts'
import { JOB_HELP, JOB_OPTIONS, PREDICTION_HELP, PREDICTION_OPTIONS, WEBHOOK_HELP, jobQueue, predictionOptions, workerJobs } from './jobs-flags.ts'
import type { JobQueue } from '@cohort/transport'
import { REPOSITORY_HELP, REPOSITORY_OPTIONS, given, repositoryOptions } from './repository-flags.ts'
import { PREFIX_HELP, PREFIX_OPTIONS, prefixOption } from './prefix-flags.ts'
import { ENV_FLAGS_HELP, modelsFromEnv } from './env-flags.ts'
import { logReplyRefusals } from './reply-refusals.ts'
import {
  DISTRIBUTION_KNOB,
  GATEWAY_KNOBS,
  GATEWAY_PROCESS_OPTIONS,
  NATS_KNOB,
  SERVE_KNOBS,
  SERVE_PROCESS_OPTIONS,
  WORKER_KNOBS,
  WORKER_METRICS_KNOBS,
  WORKER_PROCESS_OPTIONS,
  gatewayKnobs,
  rowHelp,
  serveKnobs,
  workerKnobs,
} from './process-flags.ts'

type Values = Record<string, string | boolean | string[] | undefined>

/** Time past a request's deadline its reply may take before its connection is closed at shutdown. */
const SHUTDOWN_REPLY_GRACE_MS = 1_000
/** Time for the steps after the HTTP server (worker drain, NATS, exporters) within the shutdown bound. */
const STOP_SLACK_MS = 10_000

function modelFlags(v: Values, defaultDemo: boolean, hasConfig = false): ModelFlags {
  const k = modelKnobs(v)
  const model = [...k.model]
  const predictor = [...k.predictor]
  const generative = [...k.generative]
  if (model.length === 0 && predictor.length === 0 && generative.length === 0) {
    if (hasConfig) {
      // a config directory gives the models
    } else if (!defaultDemo) {
      throw new CliError('give at least one --model or --predictor (or a config directory)')
    } else {
      model.push('demo')
    }
  }
  const instances = k.instances ?? DEFAULT_INSTANCES
  return {
    model,
    predictor,
    generative,
    ep: k.ep ?? DEFAULT_EP,
    instances,
    ortProcesses: k['ort-processes'],
    threads: k.threads ?? defaultIntraOpThreads(instances),
    inlineRunMs: k['inline-run-ms'],
    maxBatchSize: k['max-batch-size'],
    maxDelayMs: k['max-delay-ms'],
    batchTimeoutMs: k['batch-timeout-ms'],
    padding: paddingFlags(v),
    ...generativeSloFlags(v),
  }
}

function generativeSloFlags(v: Values): { generativeSlo?: GenerativeSlo } {
  const k = modelKnobs(v)
  const ttftMs = k['ttft-slo-ms']
  const generationMs = k['generation-slo-ms']
  for (const [flag, ms] of [
    ['ttft-slo-ms', ttftMs],
    ['generation-slo-ms', generationMs],
  ] as const) {
    if (ms !== undefined && !(ms > 0)) {
      throw new CliError(`--${flag} must be a positive number of ms, got "${ms}"`)
    }
  }
  if (ttftMs === undefined && generationMs === undefined) {
    return {}
  }
  // The engine's default TTFT SLO stays when only the generation SLO is given.
  return { generativeSlo: { ...(ttftMs !== undefined ? { ttftMs } : {}), ...(generationMs !== undefined ? { generationMs } : {}) } }
}

function paddingFlags(v: Values): PaddingOptions | undefined {
  if (!v['pad']) {
    if (v['pad-value'] !== undefined || v['mask-input'] !== undefined || v['buckets'] !== undefined) {
      throw new CliError('--pad-value, --mask-input and --buckets need --pad')
    }
    return undefined
  }
  const out: PaddingOptions = {}
  const pv = modelKnobs(v)['pad-value']
  if (pv !== undefined) {
    out.padValue = pv
  }
  if (typeof v['mask-input'] === 'string') {
    out.maskInput = v['mask-input']
  }
  if (typeof v['buckets'] === 'string') {
    const b = v['buckets'].split(',').map(Number)
    if (b.some((x) => !Number.isInteger(x) || x < 1)) {
      throw new CliError(`--buckets must be comma-separated integers >= 1, got "${v['buckets']}"`)
    }
    out.buckets = b.sort((x, y) => x - y)
  }
  return out
}

/** The global batching flags: the `flags` layer of every model (docs/repository.md#configuration). */
function batching(v: Values): Partial<BatchingConfig> {
  const k = modelKnobs(v)
  return {
    ...ifSet('maxBatchSize', k['max-batch-size']),
    ...ifSet('maxDelayMs', k['max-delay-ms']),
    ...ifSet('policy', k.policy as Policy | undefined),
    ...ifSet('maxQueue', k['max-queue']),
    ...ifSet('maxBatchCost', k['max-batch-cost']),
    ...ifSet('maxTenantQueue', k['max-tenant-queue']),
    ...ifSet('sloMs', k['slo-ms']),
    ...(k['no-admission'] ? { admission: false } : {}),
    ...(k['no-auto-batch'] ? { autoBatchSize: false } : {}),
  }
}

/** `--model-repository` with the model flags the command line really gave (they win over config.json). */
function repositoryFromFlags(v: Values, args: string[], flags: ModelFlags) {
  return repositoryOptions(v, {
    ep: given(args, 'ep') ? flags.ep : undefined,
    instances: v['instances'] !== undefined ? flags.instances : undefined,
    threads: v['threads'] !== undefined ? flags.threads : undefined,
    processes: flags.ortProcesses,
    padding: flags.padding,
  })
}

/**
 * Stop steps of a process with an HTTP server: readiness 503 for `drainMs` while still serving (load
 * balancers stop sending), then stop listening (idle and still-sending connections closed at once,
 * received requests finish within their deadline, `timeoutMs`), then the rest in order.
 */
function httpStopSteps(o: {
  role: string
  drainMs: number
  timeoutMs: number
  setDraining: () => void
  http: HttpServer
  grpc: { close(): Promise<void> } | undefined
}): StopStep[] {
  return [
    {
      name: 'readiness',
      run: async () => {
        o.setDraining()
        if (o.drainMs > 0) {
          console.error(`cohort: ${o.role} draining: /v2/health/ready answers 503 for ${o.drainMs} ms, then stops listening`)
          await new Promise((r) => setTimeout(r, o.drainMs))
        }
      },
    },
    { name: 'grpc', run: async () => o.grpc?.close() },
    { name: 'http', run: () => o.http.close(o.timeoutMs + SHUTDOWN_REPLY_GRACE_MS) },
  ]
}

/**
 * The process's one gateway: its core (built once, shared by the HTTP app and `--grpc-port`'s
 * gRPC server: one gateway id, one door) and the HTTP app over it.
 */
function gatewayOf(gwo: GatewayOptions): { core: GatewayCore; app: GatewayApp } {
  const core = createGatewayCore(gwo)
  return { core, app: createApp(core) }
}

/** Count a connection refused at accept (over `--max-connections`) as a door refusal. */
function connectionRefused(core: GatewayCore): () => void {
  return () => {
    core.metrics.doorRefusals.inc({ model: '_unknown', check: 'connections' })
    core.door.refusals.note('connections', '_unknown')
  }
}

/** After the servers stop: the app's jobs, then the core (its heartbeat subscription). */
function gatewayStopStep(app: GatewayApp, core: GatewayCore): StopStep {
  return {
    name: 'gateway',
    run: async () => {
      await app.close()
      await core.close()
    },
  }
}

/** Upper bound of a whole shutdown: the readiness phase, the longest request, then NATS and exporters. */
function stopLimitMs(drainMs: number, timeoutMs: number): number {
  return drainMs + timeoutMs + STOP_SLACK_MS
}

/** HTTP flags of `serve` and `gateway`. */
const HTTP_HELP = `${HTTP_KNOB_HELP}
${DOOR_HELP}
${PREDICTION_HELP}
${WEBHOOK_HELP}
${GRPC_HELP}`

const ADMIN_HELP = rowHelp(GATEWAY_KNOBS, 'admin-key')

/** Flags of `cohort serve`. */
export const SERVE_OPTIONS = {
  ...MODEL_OPTIONS,
  ...REPOSITORY_OPTIONS,
  ...SERVE_PIPELINE_OPTIONS,
  ...HTTP_OPTIONS,
  ...SERVE_PROCESS_OPTIONS,
  ...PREDICTION_OPTIONS,
  ...JOB_OPTIONS,
  ...STORE_OPTIONS,
  ...RECORD_OPTIONS,
  ...PROBE_OPTIONS,
  ...LINK_OPTIONS,
  ...DOOR_OPTIONS,
  ...GRPC_OPTIONS,
  ...SECURITY_OPTIONS,
  ...NATS_AUTH_OPTIONS,
  ...PREFIX_OPTIONS,
  ...LARGE_OPTIONS,
  ...TELEMETRY_OPTIONS,
} as const

export const SERVE_HELP = renderHelp({
  usage: 'cohort serve [DIR] [options]',
  about: 'Gateway and worker in one process (embedded; no NATS unless --nats is given).',
  sections: [
    { title: 'Model', text: `${MODEL_HELP}\n${REPOSITORY_HELP}\n${LINK_HELP}\n${ENV_FLAGS_HELP}` },
    { title: 'Batching', text: BATCHING_HELP },
    { title: 'Pipelines', text: SERVE_PIPELINE_HELP },
    { title: 'HTTP', text: `${HTTP_HELP}\n${rowHelp(SERVE_KNOBS, 'drain-ms')}` },
    {
      title: 'NATS',
      text: `${rowHelp(SERVE_KNOBS, 'nats')}
${NATS_AUTH_HELP}
${PREFIX_HELP}
${LARGE_HELP}
${JOB_HELP}
${STORE_HELP}
${RECORD_HELP}
${PROBE_HELP}`,
    },
    { title: 'Security', text: `${SECURITY_HELP}\n${ADMIN_HELP}` },
    { title: 'Observability', text: TELEMETRY_HELP },
  ],
  examples: [
    'cohort serve                                  # the demo model on http://127.0.0.1:8080',
    'cohort serve --model resnet=./resnet50.onnx --max-batch-size 16 --policy deadline',
    'cohort serve examples/tabular                 # a pipeline (docs/pipelines.md)',
    'cohort serve --predictor ./shout.ts --api-key "$KEY" --port 8000',
  ],
})

/** `cohort serve`: embedded gateway + worker. */
export async function serveCommand(args: string[]): Promise<void> {
  const { values: v, positionals } = parse(args, SERVE_OPTIONS, true)
  if (v.help) {
    console.log(SERVE_HELP)
    return
  }
  modelsFromEnv(v)
  if ((v['remote'] as string[] | undefined)?.length && !v.nats) {
    throw new CliError('--remote calls stage workers over NATS: give --nats URL too')
  }
  const shutdown = installShutdown()
  const own = serveKnobs(v)
  const drainMs = own['drain-ms']
  let draining = false
  const tel = setupTelemetry(v, 'cohort')
  const hasRepository = v['model-repository'] !== undefined
  const flags = modelFlags(v, positionals.length === 0 && !hasRepository, positionals.length > 0 || hasRepository)
  const repository = repositoryFromFlags(v, args, flags)
  const security = { ...bodyLimit(v), ...securityOptions(v) }
  const tls = tlsFiles(v)
  const natsAuth = natsAuthOptions(v)
  const knobs = httpKnobs(v)
  const port = knobs.port
  const host = knobs.host
  const { transport, jobs } = await serveTransport(v, own.nats, natsAuth)
  const registry = processRegistry()
  const worker = await startServeWorker({ v, positionals, flags, repository, transport, jobs, registry, tel })
  const timeout = knobs['timeout-ms']
  const dashboard = new AbortController()
  const gwo: GatewayOptions = {
    transport,
    registry,
    dashboard: { sampleMs: DASHBOARD_SAMPLE_MS, signal: dashboard.signal },
    adapter: gatewayAdapter(knobs['no-event-loop-lag-check']),
    adminKeys: [...own['admin-key']],
    ...prefixOption(v),
    ...security,
    ...(timeout ? { requestTimeoutMs: timeout } : {}),
    tracer: tel.tracer,
    logger: tel.logger.child({ component: 'gateway' }),
    draining: () => draining,
    ...predictionOptions(v),
    ...doorOptions(v),
    ...(jobs ? { jobs } : {}),
    ...(probeOptions(v).probes === false ? { workerLoss: probeOptions(v) } : {}),
  }
  const { core, app } = gatewayOf(gwo)
  const http = await listen(app, host, port, tls, listenerBounds(knobs, connectionRefused(core)))
  const grpc = await startGrpcFromFlags(v, host, core)
  const timeoutMs = timeout
  shutdown.ready(
    [
      { name: 'dashboard', run: () => abortDashboard(dashboard) },
      ...httpStopSteps({ role: 'serve', drainMs, timeoutMs, setDraining: () => (draining = true), http, grpc }),
      gatewayStopStep(app, core),
      { name: 'worker', run: () => worker.drain() },
      { name: 'transport', run: () => transport.close() },
      { name: 'telemetry', run: () => tel.shutdown() },
    ],
    stopLimitMs(drainMs, timeoutMs),
  )
  printServing(worker, `${tls ? 'https' : 'http'}://${http.host}:${http.port}`, own.nats)
  console.log(`cohort: ${describeSecurity(security, tls !== undefined)}`)
}

/** `cohort serve`'s transport: NATS (and its job queue) with --nats, else in this process. */
async function serveTransport(v: Values, nats: string | undefined, natsAuth: ReturnType<typeof natsAuthOptions>): Promise<{ transport: Transport; jobs: JobQueue | undefined }> {
  if (!nats) {
    return { transport: new InProcessTransport(), jobs: undefined }
  }
  const nc = await connectNats(nats, 'cohort-serve', natsAuth)
  const transport = createNatsTransport(nc, { ownsConnection: true, kvReplicas: kvReplicas(v), ...largeMessageOptions(v), ...prefixOption(v), onReplyRefused: logReplyRefusals() })
  return { transport, jobs: jobQueue(nc, kvReplicas(v), v) }
}

/** `cohort serve`'s worker: the models of the flags and of the pipelines named, started. */
async function startServeWorker(o: {
  v: Values
  positionals: string[]
  flags: ModelFlags
  repository: ReturnType<typeof repositoryFromFlags>
  transport: Transport
  jobs: JobQueue | undefined
  registry: ReturnType<typeof processRegistry>
  tel: ReturnType<typeof setupTelemetry>
}): Promise<CohortWorker> {
  const { v, flags, repository, transport, jobs, registry, tel } = o
  const { runners, outputSchemas, modelBatching } = await buildRunners(flags)
  const piped = await pipelineRunners(o.positionals, v, { transport, registry, flags, batching: batching(v), allowStage: false })
  runners.push(...piped.runners)
  Object.assign(outputSchemas, piped.outputSchemas)
  const worker = new CohortWorker({
    transport,
    runners,
    registry,
    outputSchemas,
    batching: batching(v),
    modelBatching,
    ...prefixOption(v),
    ...(flags.batchTimeoutMs !== undefined ? { batchTimeoutMs: flags.batchTimeoutMs } : {}),
    tracer: tel.tracer,
    logger: tel.logger.child({ component: 'worker' }),
    ...(jobs ? { jobs: workerJobs(v, jobs) } : {}),
    ...(repository ? { repository } : {}),
  })
  await worker.start()
  return worker
}

/** `cohort serve`'s first lines: what it serves where, and a request to try. */
function printServing(worker: CohortWorker, base: string, nats: string | undefined): void {
  const names = [...new Set(worker.models().map((m) => m.name))]
  console.log(`cohort: serving ${names.join(', ')} on ${base} (${nats ? `NATS ${nats}` : 'embedded'})`)
  const first = worker.models()[0]
  console.log(`cohort: try  curl -s ${base}/v2/models/${names[0]}  and  POST ${base}${first?.kind === 'generative' ? '/v1/completions' : `/v2/models/${names[0]}/infer`}`)
}

/** The dashboard's stop step: its sampler ends (an abort runs its listeners at once). */
function abortDashboard(dashboard: AbortController): Promise<void> {
  dashboard.abort()
  return Promise.resolve()
}

/** Flags of `cohort gateway`. */
export const GATEWAY_OPTIONS = {
  ...HTTP_OPTIONS,
  ...GATEWAY_PROCESS_OPTIONS,
  ...PREDICTION_OPTIONS,
  ...RECORD_OPTIONS,
  ...PROBE_OPTIONS,
  ...DOOR_OPTIONS,
  ...GRPC_OPTIONS,
  ...SECURITY_OPTIONS,
  ...NATS_AUTH_OPTIONS,
  ...PREFIX_OPTIONS,
  ...LARGE_OPTIONS,
  ...TELEMETRY_OPTIONS,
  ...PROCESSES_OPTIONS,
} as const

export const GATEWAY_HELP = renderHelp({
  usage: 'cohort gateway [options]',
  about: 'The stateless HTTP gateway: publishes each request to NATS, where workers answer it.',
  sections: [
    { title: 'HTTP', text: `${HTTP_HELP}\n${rowHelp(GATEWAY_KNOBS, 'drain-ms')}\n${PROCESSES_HELP}` },
    {
      title: 'NATS',
      text: `${knobHelp(NATS_KNOB)}
${rowHelp(GATEWAY_KNOBS, 'missed-heartbeats', 'accept-timeout-ms')}
${PROBE_HELP}
${NATS_AUTH_HELP}
${PREFIX_HELP}
${LARGE_HELP}
${RECORD_HELP}`,
    },
    { title: 'Security', text: `${SECURITY_HELP}\n${ADMIN_HELP}` },
    { title: 'Observability', text: TELEMETRY_HELP },
  ],
  examples: ['cohort gateway --nats nats://127.0.0.1:4222 --port 8080', 'cohort gateway --nats nats://a:4222,nats://b:4222 --api-key "$KEY" --rate-limit 100:200'],
})

/** `cohort gateway`. */
export async function gatewayCommand(args: string[]): Promise<void> {
  const { values: v } = parse(args, GATEWAY_OPTIONS)
  if (v.help) {
    console.log(GATEWAY_HELP)
    return
  }
  const processes = processesFlag(v)
  if (processes > 1 && !isClusterChild()) {
    // The primary: forks the gateway processes (each runs this command again) and serves nothing.
    process.exit(await runPrimary(processes))
  }
  const shutdown = installShutdown()
  onPrimaryStop(shutdown.stop)
  const tel = setupTelemetry(v, 'cohort-gateway')
  const security = { ...bodyLimit(v), ...securityOptions(v) }
  const tls = tlsFiles(v)
  const natsAuth = natsAuthOptions(v)
  const knobs = httpKnobs(v)
  const port = knobs.port
  const host = knobs.host
  const timeout = knobs['timeout-ms']
  const own = gatewayKnobs(v)
  const drainMs = own['drain-ms']
  let draining = false
  const nc = await connectNats(own.nats, 'cohort-gateway', natsAuth)
  const transport = createNatsTransport(nc, { ownsConnection: true, kvReplicas: kvReplicas(v), ...largeMessageOptions(v), ...prefixOption(v), onReplyRefused: logReplyRefusals() })
  const gatewayRegistry = processRegistry()
  const dashboard = new AbortController()
  const gwo: GatewayOptions = {
    registry: gatewayRegistry,
    dashboard: { sampleMs: DASHBOARD_SAMPLE_MS, signal: dashboard.signal },
    transport,
    adapter: gatewayAdapter(knobs['no-event-loop-lag-check']),
    adminKeys: [...own['admin-key']],
    ...prefixOption(v),
    ...security,
    ...(timeout ? { requestTimeoutMs: timeout } : {}),
    workerLoss: workerLossOptions(v),
    tracer: tel.tracer,
    logger: tel.logger,
    draining: () => draining,
    ...predictionOptions(v),
    ...doorOptions(v),
    jobs: jobQueue(nc, kvReplicas(v), v),
  }
  const { core, app } = gatewayOf(gwo)
  const http = await listen(app, host, port, tls, listenerBounds(knobs, connectionRefused(core)))
  const grpc = await startGrpcFromFlags(v, host, core)
  const timeoutMs = timeout
  shutdown.ready(
    [
      { name: 'dashboard', run: () => abortDashboard(dashboard) },
      ...httpStopSteps({ role: 'gateway', drainMs, timeoutMs, setDraining: () => (draining = true), http, grpc }),
      gatewayStopStep(app, core),
      { name: 'transport', run: () => transport.close() },
      { name: 'telemetry', run: () => tel.shutdown() },
    ],
    stopLimitMs(drainMs, timeoutMs),
  )
  console.log(`cohort: gateway on ${tls ? 'https' : 'http'}://${http.host}:${http.port} -> NATS ${own.nats}`)
  console.log(`cohort: ${describeSecurity(security, tls !== undefined)}`)
  notifyListening()
}

/** Flags of `cohort worker`. */
export const WORKER_OPTIONS = {
  ...MODEL_OPTIONS,
  ...REPOSITORY_OPTIONS,
  ...PIPELINE_OPTIONS,
  ...WORKER_PROCESS_OPTIONS,
  ...JOB_OPTIONS,
  ...STORE_OPTIONS,
  ...RECORD_OPTIONS,
  ...LINK_OPTIONS,
  ...NATS_AUTH_OPTIONS,
  ...PREFIX_OPTIONS,
  ...LARGE_OPTIONS,
  ...TELEMETRY_OPTIONS,
} as const

export const WORKER_HELP = renderHelp({
  usage: 'cohort worker [DIR] [options]',
  about: 'A long-lived worker: serves its models from NATS in queue groups, batching requests.',
  sections: [
    { title: 'Model', text: `${MODEL_HELP}\n${REPOSITORY_HELP}\n${LINK_HELP}\n${ENV_FLAGS_HELP}` },
    {
      title: 'Batching',
      text: `${BATCHING_HELP}
${knobHelp(DISTRIBUTION_KNOB)}`,
    },
    { title: 'Pipelines', text: PIPELINE_HELP },
    {
      title: 'NATS',
      text: `${knobHelp(NATS_KNOB)}
${knobHelp(WORKER_KNOBS)}
${NATS_AUTH_HELP}
${PREFIX_HELP}
${LARGE_HELP}
${JOB_HELP}
${STORE_HELP}
${RECORD_HELP}
${WEBHOOK_HELP}`,
    },
    {
      title: 'Observability',
      text: `${knobHelp(WORKER_METRICS_KNOBS)}
${TELEMETRY_HELP}`,
    },
  ],
  examples: [
    'cohort worker --nats nats://127.0.0.1:4222 --model resnet=./resnet50.onnx --instances 2',
    'cohort worker --predictor ./shout.ts --metrics-port 9090',
    'cohort worker examples/tabular --stage mlp    # one stage of a pipeline (docs/pipelines.md)',
  ],
})

/** `cohort worker`. */
export async function workerCommand(args: string[]): Promise<void> {
  const { values: v, positionals } = parse(args, WORKER_OPTIONS, true)
  if (v.help) {
    console.log(WORKER_HELP)
    return
  }
  modelsFromEnv(v)
  const shutdown = installShutdown()
  const tel = setupTelemetry(v, 'cohort-worker')
  const natsAuth = natsAuthOptions(v)
  const flags = modelFlags(v, false, positionals.length > 0 || v['model-repository'] !== undefined)
  const repository = repositoryFromFlags(v, args, flags)
  const own = workerKnobs(v)
  const metricsPort = own['metrics-port']
  const { runners, outputSchemas, modelBatching } = await buildRunners(flags)
  const nc = await connectNats(own.nats, 'cohort-worker', natsAuth)
  const transport = createNatsTransport(nc, { ownsConnection: true, kvReplicas: kvReplicas(v), ...largeMessageOptions(v), ...prefixOption(v), onReplyRefused: logReplyRefusals() })
  const registry = processRegistry()
  const piped = await pipelineRunners(positionals, v, { transport, registry, flags, batching: batching(v), allowStage: true })
  runners.push(...piped.runners)
  Object.assign(outputSchemas, piped.outputSchemas)
  const worker = new CohortWorker({
    transport,
    runners,
    registry,
    outputSchemas,
    capacityAware: own.distribution === 'capacity',
    batching: batching(v),
    modelBatching,
    ...prefixOption(v),
    ...(flags.batchTimeoutMs !== undefined ? { batchTimeoutMs: flags.batchTimeoutMs } : {}),
    ...ifSet('id', own.id || undefined),
    ...ifSet('heartbeatMs', own['heartbeat-ms']),
    ...ifSet('generationProbeMs', own['generation-probe-ms']),
    tracer: tel.tracer,
    logger: tel.logger,
    jobs: workerJobs(v, jobQueue(nc, kvReplicas(v), v)),
    ...(repository ? { repository } : {}),
  })
  await worker.start()
  let workerDraining = false
  let metricsClose: ((lingerMs?: number) => Promise<void>) | undefined
  if (metricsPort !== undefined) {
    const app = new Hono()
    app.get('/metrics', (c) => c.body(worker.registry.render(), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE }))
    // Kubernetes probes (infra/k8s/worker.yaml): live while the process runs; ready while its models
    // are loaded and it is not draining (SIGTERM turns it to 503 at once).
    app.get('/v2/health/live', (c) => c.json({ live: true }))
    app.get('/v2/health/ready', (c) => {
      const ready = !workerDraining && worker.models().every((m) => m.ready)
      return c.json({ ready, draining: workerDraining }, ready ? 200 : 503)
    })
    const m = await listen(app, own['metrics-host'], metricsPort)
    metricsClose = m.close
    console.log(`cohort: worker metrics on http://${m.host}:${m.port}/metrics`)
  }
  shutdown.ready(
    [
      {
        name: 'worker',
        run: () => {
          workerDraining = true
          return worker.drain()
        },
      },
      { name: 'metrics', run: async () => metricsClose?.(0) },
      { name: 'transport', run: () => transport.close() },
      { name: 'telemetry', run: () => tel.shutdown() },
    ],
    stopLimitMs(0, DEFAULT_REQUEST_TIMEOUT_MS),
  )
  console.log(`cohort: worker ${worker.id} serving ${[...new Set(worker.models().map((m) => m.name))].join(', ')} from NATS ${own.nats}`)
}
