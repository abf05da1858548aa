import { Hono } from 'hono'
import { BATCHING_FIELDS, type BatchingConfig, type Policy } from '@cohort/batching'
import { createApp, createGatewayCore, type GatewayApp, type GatewayCore, type GatewayOptions } from '@cohort/gateway'
import { PROMETHEUS_CONTENT_TYPE } from '@cohort/metrics'
import { DASHBOARD_SAMPLE_MS, processRegistry } from './process-registry.ts'
import { CohortWorker, defaultIntraOpThreads, type PaddingOptions } from '@cohort/worker'
import { InProcessTransport, createNatsTransport, type Transport } from '@cohort/transport'
import { BATCHING_HELP, MODEL_HELP, MODEL_OPTIONS, batchingFlag, intFlag, numFlag, parse } from './args.ts'
import { renderHelp } from './help.ts'
import { CliError } from './cli-error.ts'
import { connectNats } from './connect.ts'
import { NATS_AUTH_HELP, NATS_AUTH_OPTIONS, kvReplicas, natsAuthOptions } from './nats-auth.ts'
import { LARGE_HELP, LARGE_OPTIONS, bodyLimit, largeMessageOptions } from './large-flags.ts'
import { SECURITY_HELP, SECURITY_OPTIONS, describeSecurity, securityOptions, tlsFiles } from './security-flags.ts'
import { listen, type HttpServer } from './http.ts'
import { installShutdown, type StopStep } from './shutdown.ts'
import { DEFAULT_REQUEST_TIMEOUT_MS } from '@cohort/gateway'
import { GRPC_HELP, GRPC_OPTIONS, startGrpcFromFlags } from './grpc-flags.ts'
import { DOOR_HELP, DOOR_OPTIONS, HTTP_KNOB_HELP, HTTP_OPTIONS, doorOptions, httpKnobs } from './door-flags.ts'
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
import { ENV_FLAGS_HELP, hostDefault, modelsFromEnv } from './env-flags.ts'
import { logReplyRefusals } from './reply-refusals.ts'

type Values = Record<string, string | boolean | string[] | undefined>

const DEFAULT_NATS = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222'
/** Default SIGTERM grace of the gateway: readiness answers 503 this long before it stops listening (5 s). */
const DEFAULT_DRAIN_MS = 5_000
/** Time past a request's deadline its reply may take before its connection is closed at shutdown. */
const SHUTDOWN_REPLY_GRACE_MS = 1_000
/** Time for the steps after the HTTP server (worker drain, NATS, exporters) within the shutdown bound. */
const STOP_SLACK_MS = 10_000

function modelFlags(v: Values, defaultDemo: boolean, hasConfig = false): ModelFlags {
  const model = (v['model'] as string[] | undefined) ?? []
  const predictor = (v['predictor'] as string[] | undefined) ?? []
  const generative = (v['generative'] as string[] | undefined) ?? []
  if (model.length === 0 && predictor.length === 0 && generative.length === 0) {
    if (hasConfig) {
      // a config directory gives the models
    } else if (!defaultDemo) {
      throw new CliError('give at least one --model or --predictor (or a config directory)')
    } else {
      model.push('demo')
    }
  }
  const instances = intFlag('instances', v['instances']) ?? 1
  return {
    model,
    predictor,
    generative,
    ep: (v['ep'] as string) ?? 'cpu',
    instances,
    ortProcesses: v['ort-processes'] === true,
    threads: intFlag('threads', v['threads']) ?? defaultIntraOpThreads(instances),
    maxBatchSize: batchingFlag('maxBatchSize', intFlag('max-batch-size', v['max-batch-size'])),
    maxDelayMs: batchingFlag('maxDelayMs', numFlag('max-delay-ms', v['max-delay-ms'])),
    batchTimeoutMs: numFlag('batch-timeout-ms', v['batch-timeout-ms']),
    padding: paddingFlags(v),
    ...generativeSloFlags(v),
  }
}

function generativeSloFlags(v: Values): { generativeSlo?: GenerativeSlo } {
  const ttftMs = numFlag('ttft-slo-ms', v['ttft-slo-ms'])
  const generationMs = numFlag('generation-slo-ms', v['generation-slo-ms'])
  for (const [flag, ms] of [['ttft-slo-ms', ttftMs], ['generation-slo-ms', generationMs]] as const) {
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
  const pv = v['pad-value']
  if (pv !== undefined) {
    const n = Number(pv)
    if (!Number.isFinite(n)) {
      throw new CliError(`--pad-value must be a number, got "${String(pv)}"`)
    }
    out.padValue = n
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
  const out: Partial<BatchingConfig> = {}
  const size = batchingFlag('maxBatchSize', intFlag('max-batch-size', v['max-batch-size']))
  if (size !== undefined) {
    out.maxBatchSize = size
  }
  const delay = batchingFlag('maxDelayMs', numFlag('max-delay-ms', v['max-delay-ms']))
  if (delay !== undefined) {
    out.maxDelayMs = delay
  }
  const policy = v['policy']
  if (policy !== undefined) {
    if (!BATCHING_FIELDS.policy.valid(policy)) {
      throw new CliError(`--policy must be ${BATCHING_FIELDS.policy.expect}, got "${String(policy)}"`)
    }
    out.policy = policy as Policy
  }
  const q = batchingFlag('maxQueue', intFlag('max-queue', v['max-queue']))
  if (q !== undefined) {
    out.maxQueue = q
  }
  const cost = batchingFlag('maxBatchCost', numFlag('max-batch-cost', v['max-batch-cost']))
  if (cost !== undefined) {
    out.maxBatchCost = cost
  }
  const tq = batchingFlag('maxTenantQueue', intFlag('max-tenant-queue', v['max-tenant-queue']))
  if (tq !== undefined) {
    out.maxTenantQueue = tq
  }
  const slo = batchingFlag('sloMs', numFlag('slo-ms', v['slo-ms']))
  if (slo !== undefined) {
    out.sloMs = slo
  }
  if (v['no-admission'] === true) {
    out.admission = false
  }
  if (v['no-auto-batch'] === true) {
    out.autoBatchSize = false
  }
  return out
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

/** Admin keys from --admin-key (repeatable) and COHORT_ADMIN_KEYS (comma-separated). */
function adminKeys(v: Values): string[] {
  const fromEnv = (process.env['COHORT_ADMIN_KEYS'] ?? '').split(',').map((k) => k.trim()).filter(Boolean)
  return [...((v['admin-key'] as string[] | undefined) ?? []), ...fromEnv]
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

/** After the servers stop: the app's jobs, then the core (its heartbeat subscription). */
function gatewayStopStep(app: GatewayApp, core: GatewayCore): StopStep {
  return { name: 'gateway', run: async () => {
    await app.close()
    await core.close()
  } }
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

const ADMIN_HELP = `  --admin-key KEY        key for /admin routes (repeatable; also COHORT_ADMIN_KEYS); without one they
                         are open, or closed (403) when --api-key or a JWT secret is set`

const drainHelp = (defaultMs: number) => `  --drain-ms MS          on SIGTERM/SIGINT, answer 503 on /v2/health/ready while still serving for this
                         long (default ${defaultMs}); then stop listening, close idle connections and
                         those still sending their request, let received requests finish within
                         their deadline, and exit`

/** Flags of `cohort serve`. */
export const SERVE_OPTIONS = {
  ...MODEL_OPTIONS,
  ...REPOSITORY_OPTIONS,
  ...SERVE_PIPELINE_OPTIONS,
  port: { type: 'string' },
  host: { type: 'string', default: hostDefault('COHORT_HOST') },
  nats: { type: 'string' },
  'timeout-ms': { type: 'string' },
  'drain-ms': { type: 'string' },
  'admin-key': { type: 'string', multiple: true },
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
    { title: 'HTTP', text: `${HTTP_HELP}\n${drainHelp(0)}` },
    {
      title: 'NATS',
      text: `  --nats URL             put NATS between the gateway and the worker (default: in process)
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
  const drainMs = intFlag('drain-ms', v['drain-ms'], 0) ?? 0
  let draining = false
  const tel = setupTelemetry(v, 'cohort')
  const hasRepository = v['model-repository'] !== undefined
  const flags = modelFlags(v, positionals.length === 0 && !hasRepository, positionals.length > 0 || hasRepository)
  const repository = repositoryFromFlags(v, args, flags)
  const security = { ...bodyLimit(v), ...securityOptions(v) }
  const tls = tlsFiles(v)
  const natsAuth = natsAuthOptions(v)
  const knobs = httpKnobs(v)
  const port = knobs.port!
  const host = knobs.host!
  let transport: Transport
  let jobs: JobQueue | undefined
  if (v.nats) {
    const nc = await connectNats(v.nats as string, 'cohort-serve', natsAuth)
    transport = createNatsTransport(nc, { ownsConnection: true, kvReplicas: kvReplicas(v), ...largeMessageOptions(v), ...prefixOption(v), onReplyRefused: logReplyRefusals() })
    jobs = jobQueue(nc, kvReplicas(v), v)
  } else {
    transport = new InProcessTransport()
  }
  const registry = processRegistry()
  const { runners, outputSchemas, modelBatching } = await buildRunners(flags)
  const piped = await pipelineRunners(positionals, v, { transport, registry, flags, batching: batching(v), allowStage: false })
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
  const timeout = knobs['timeout-ms']
  const dashboard = new AbortController()
  const gwo: GatewayOptions = {
    transport,
    registry,
    dashboard: { sampleMs: DASHBOARD_SAMPLE_MS, signal: dashboard.signal },
    adapter: gatewayAdapter(knobs['no-event-loop-lag-check']),
    adminKeys: adminKeys(v),
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
  const http = await listen(app, host, port, tls)
  const grpc = await startGrpcFromFlags(v, host, core)
  const timeoutMs = timeout ?? DEFAULT_REQUEST_TIMEOUT_MS
  shutdown.ready(
    [
      { name: 'dashboard', run: async () => dashboard.abort() },
      ...httpStopSteps({ role: 'serve', drainMs, timeoutMs, setDraining: () => (draining = true), http, grpc }),
      gatewayStopStep(app, core),
      { name: 'worker', run: () => worker.drain() },
      { name: 'transport', run: () => transport.close() },
      { name: 'telemetry', run: () => tel.shutdown() },
    ],
    stopLimitMs(drainMs, timeoutMs),
  )
  const base = `${tls ? 'https' : 'http'}://${http.host}:${http.port}`
  const names = [...new Set(worker.models().map((m) => m.name))]
  console.log(`cohort: serving ${names.join(', ')} on ${base} (${v.nats ? `NATS ${v.nats}` : 'embedded'})`)
  const first = worker.models()[0]
  console.log(`cohort: try  curl -s ${base}/v2/models/${names[0]}  and  POST ${base}${first?.kind === 'generative' ? '/v1/completions' : `/v2/models/${names[0]}/infer`}`)
  console.log(`cohort: ${describeSecurity(security, tls !== undefined)}`)
}

/** Flags of `cohort gateway`. */
export const GATEWAY_OPTIONS = {
  nats: { type: 'string', default: DEFAULT_NATS },
  ...HTTP_OPTIONS,
  'drain-ms': { type: 'string' },
  'missed-heartbeats': { type: 'string' },
  'accept-timeout-ms': { type: 'string' },
  'admin-key': { type: 'string', multiple: true },
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
    { title: 'HTTP', text: `${HTTP_HELP}\n${drainHelp(DEFAULT_DRAIN_MS)}\n${PROCESSES_HELP}` },
    {
      title: 'NATS',
      text: `  --nats URL             NATS server(s), comma-separated (default $NATS_URL or ${DEFAULT_NATS})
  --missed-heartbeats N  fail (503 WORKER_LOST) or retry the requests of a worker silent for N of its
                         heartbeats (default 3; 0 turns worker-loss detection off)
  --accept-timeout-ms MS a request no worker accepted in this long is lost too, and resent once (default 3000)
${PROBE_HELP}
${NATS_AUTH_HELP}
${PREFIX_HELP}
${LARGE_HELP}
${RECORD_HELP}`,
    },
    { title: 'Security', text: `${SECURITY_HELP}\n${ADMIN_HELP}` },
    { title: 'Observability', text: TELEMETRY_HELP },
  ],
  examples: [
    'cohort gateway --nats nats://127.0.0.1:4222 --port 8080',
    'cohort gateway --nats nats://a:4222,nats://b:4222 --api-key "$KEY" --rate-limit 100:200',
  ],
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
  const port = knobs.port!
  const host = knobs.host!
  const timeout = knobs['timeout-ms']
  const drainMs = intFlag('drain-ms', v['drain-ms'], 0) ?? DEFAULT_DRAIN_MS
  let draining = false
  const nc = await connectNats(v.nats as string, 'cohort-gateway', natsAuth)
  const transport = createNatsTransport(nc, { ownsConnection: true, kvReplicas: kvReplicas(v), ...largeMessageOptions(v), ...prefixOption(v), onReplyRefused: logReplyRefusals() })
  const gatewayRegistry = processRegistry()
  const dashboard = new AbortController()
  const gwo: GatewayOptions = {
    registry: gatewayRegistry,
    dashboard: { sampleMs: DASHBOARD_SAMPLE_MS, signal: dashboard.signal },
    transport,
    adapter: gatewayAdapter(knobs['no-event-loop-lag-check']),
    adminKeys: adminKeys(v),
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
  const http = await listen(app, host, port, tls)
  const grpc = await startGrpcFromFlags(v, host, core)
  const timeoutMs = timeout ?? DEFAULT_REQUEST_TIMEOUT_MS
  shutdown.ready(
    [
      { name: 'dashboard', run: async () => dashboard.abort() },
      ...httpStopSteps({ role: 'gateway', drainMs, timeoutMs, setDraining: () => (draining = true), http, grpc }),
      gatewayStopStep(app, core),
      { name: 'transport', run: () => transport.close() },
      { name: 'telemetry', run: () => tel.shutdown() },
    ],
    stopLimitMs(drainMs, timeoutMs),
  )
  console.log(`cohort: gateway on ${tls ? 'https' : 'http'}://${http.host}:${http.port} -> NATS ${v.nats as string}`)
  console.log(`cohort: ${describeSecurity(security, tls !== undefined)}`)
  notifyListening()
}

/** Flags of `cohort worker`. */
export const WORKER_OPTIONS = {
  ...MODEL_OPTIONS,
  ...REPOSITORY_OPTIONS,
  ...PIPELINE_OPTIONS,
  nats: { type: 'string', default: DEFAULT_NATS },
  'metrics-port': { type: 'string' },
  'metrics-host': { type: 'string', default: hostDefault('COHORT_METRICS_HOST') },
  id: { type: 'string' },
  distribution: { type: 'string', default: 'capacity' },
  'heartbeat-ms': { type: 'string' },
  'generation-probe-ms': { type: 'string' },
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
  --distribution capacity|random
                         capacity (default): leave the model's main subject while the queue is full,
                         so idle workers get the work; random: plain NATS queue-group spreading`,
    },
    { title: 'Pipelines', text: PIPELINE_HELP },
    {
      title: 'NATS',
      text: `  --nats URL             NATS server(s) (default $NATS_URL or ${DEFAULT_NATS})
  --id ID                worker id in replies and discovery (default random)
  --heartbeat-ms MS      publish a heartbeat this often, for the gateways' worker-loss detection
                         (default 1000; 0: none)
  --generation-probe-ms MS
                         generative models: a gateway's pack of generations that sent no tokens
                         message this long gets an empty one, to notice a gateway gone (streamed
                         generations are watched at every step; default 1000; 0: none)
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
      text: `  --metrics-port N       serve Prometheus /metrics and the probes /v2/health/live and /v2/health/ready
                         (503 while draining) on this port (off by default)
  --metrics-host H       host of the metrics server (default $COHORT_METRICS_HOST or 127.0.0.1)
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
  const metricsPort = intFlag('metrics-port', v['metrics-port'], 0)
  const { runners, outputSchemas, modelBatching } = await buildRunners(flags)
  const nc = await connectNats(v.nats as string, 'cohort-worker', natsAuth)
  const transport = createNatsTransport(nc, { ownsConnection: true, kvReplicas: kvReplicas(v), ...largeMessageOptions(v), ...prefixOption(v), onReplyRefused: logReplyRefusals() })
  const registry = processRegistry()
  const piped = await pipelineRunners(positionals, v, { transport, registry, flags, batching: batching(v), allowStage: true })
  runners.push(...piped.runners)
  Object.assign(outputSchemas, piped.outputSchemas)
  if (v['distribution'] !== 'capacity' && v['distribution'] !== 'random') {
    throw new CliError(`--distribution must be capacity or random, got "${String(v['distribution'])}"`)
  }
  const worker = new CohortWorker({
    transport,
    runners,
    registry,
    outputSchemas,
    capacityAware: v['distribution'] === 'capacity',
    batching: batching(v),
    modelBatching,
    ...prefixOption(v),
    ...(flags.batchTimeoutMs !== undefined ? { batchTimeoutMs: flags.batchTimeoutMs } : {}),
    ...(v.id ? { id: v.id as string } : {}),
    ...(v['heartbeat-ms'] !== undefined ? { heartbeatMs: intFlag('heartbeat-ms', v['heartbeat-ms'], 0)! } : {}),
    ...(v['generation-probe-ms'] !== undefined ? { generationProbeMs: intFlag('generation-probe-ms', v['generation-probe-ms'], 0)! } : {}),
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
    const m = await listen(app, v['metrics-host'] as string, metricsPort)
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
  console.log(`cohort: worker ${worker.id} serving ${[...new Set(worker.models().map((m) => m.name))].join(', ')} from NATS ${v.nats as string}`)
}
