/**
 * Process wiring of tracing and logs (the only place that knows the OpenTelemetry SDK and pino): the
 * gateway and the worker see just `@opentelemetry/api`'s `Tracer` and the `Logger` interface of
 * `@cohort/observability`. See docs/observability.md.
 * @module
 */
import { trace, type Tracer } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter } from '@opentelemetry/sdk-trace-base'
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino'
import { defaultTracer } from '@cohort/observability'
import { CliError } from './cli-error.ts'
import { DEFAULT_LOG_FORMAT, LOG_FORMATS, logFormat, prettyDestination } from './log-format.ts'
import { knobHelp, knobOptions, type KnobTable } from './knobs.ts'

type Values = Record<string, string | boolean | string[] | undefined>

export const EXPORTERS = ['otlp', 'console', 'none'] as const
export type ExporterKind = (typeof EXPORTERS)[number]

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const
/** The trace exporter when neither --otel-exporter nor $OTEL_TRACES_EXPORTER is given. */
export const DEFAULT_EXPORTER: ExporterKind = 'none'
/** The log level when neither --log-level nor $COHORT_LOG_LEVEL is given. */
export const DEFAULT_LOG_LEVEL = 'info'

/**
 * The telemetry knobs of serve, gateway and worker ({@link knobs.ts}): options and help come from
 * these rows, and the readers below take their env var and default from them (values are trimmed
 * and lower-cased before the check, env vars included).
 */
export const TELEMETRY_KNOBS = Object.freeze({
  'otel-exporter': {
    kind: 'string',
    arg: EXPORTERS.join('|'),
    env: 'OTEL_TRACES_EXPORTER',
    default: DEFAULT_EXPORTER,
    help: ['export OpenTelemetry traces (default {default}): otlp', 'posts OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318)'],
  },
  'log-level': { kind: 'string', arg: 'LEVEL', env: 'COHORT_LOG_LEVEL', default: DEFAULT_LOG_LEVEL, help: [`logs on stderr: ${LEVELS.join('|')}`, '(default {default})'] },
  'log-format': { kind: 'string', arg: LOG_FORMATS.join('|'), env: 'COHORT_LOG_FORMAT', default: DEFAULT_LOG_FORMAT, help: ['JSON lines, or one human line per record'] },
} as const satisfies KnobTable)

/** Flags shared by serve, gateway and worker. */
export const TELEMETRY_OPTIONS = knobOptions(TELEMETRY_KNOBS)
/** Help text of {@link TELEMETRY_OPTIONS}. */
export const TELEMETRY_HELP = knobHelp(TELEMETRY_KNOBS)

/** A telemetry knob's raw value: the flag, else its env var, else its default. */
export function telemetryRaw(flag: keyof typeof TELEMETRY_KNOBS, v: Record<string, unknown>, env: NodeJS.ProcessEnv): string {
  const k = TELEMETRY_KNOBS[flag]
  return (v[flag] as string | undefined) ?? env[k.env] ?? k.default
}

/** Tracing and logging of one process. */
export interface Telemetry {
  /** Cohort's tracer: the SDK's when an exporter is on, else the API's no-op. */
  tracer: Tracer
  /** The process logger (pino, JSON lines). */
  logger: PinoLogger
  exporter: ExporterKind
  /** Flush and stop the exporter (idempotent). */
  shutdown(): Promise<void>
}

/** The exporter chosen by `--otel-exporter`, else `OTEL_TRACES_EXPORTER`, else none. */
export function exporterKind(v: Values, env: NodeJS.ProcessEnv = process.env): ExporterKind {
  const raw = telemetryRaw('otel-exporter', v, env)
  const kind = raw.trim().toLowerCase()
  if (!(EXPORTERS as readonly string[]).includes(kind)) {
    throw new CliError(`--otel-exporter must be otlp, console or none, got "${raw}"`)
  }
  return kind as ExporterKind
}

/** The log level from `--log-level`, else `COHORT_LOG_LEVEL`, else info. */
export function logLevel(v: Values, env: NodeJS.ProcessEnv = process.env): string {
  const raw = telemetryRaw('log-level', v, env)
  const level = raw.trim().toLowerCase()
  if (!(LEVELS as readonly string[]).includes(level)) {
    throw new CliError(`--log-level must be one of ${LEVELS.join(', ')}, got "${raw}"`)
  }
  return level
}

/**
 * A pino logger writing JSON lines (level as a label, ISO time, `service`) to `destination`
 * (stderr by default, so stdout keeps the human startup lines).
 */
export function createLogger(level: string, service: string, destination?: DestinationStream): PinoLogger {
  return pino(
    {
      level,
      base: { service, pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ dest: 2, sync: true }),
  )
}

/**
 * A tracer provider exporting through `exporter` in batches (BasicTracerProvider + BatchSpanProcessor),
 * with `service.name` = `service` unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say otherwise.
 */
export function createTracerProvider(exporter: SpanExporter, service: string): BasicTracerProvider {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': service }))
    .merge(detectResources({ detectors: [envDetector] }))
  return new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] })
}

function spanExporter(kind: Exclude<ExporterKind, 'none'>): SpanExporter {
  // The OTLP exporter reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT / _HEADERS / _TIMEOUT itself.
  return kind === 'otlp' ? new OTLPTraceExporter() : new ConsoleSpanExporter()
}

/** Tracing (off unless an exporter is chosen) and the logger (`--log-format`) of a `cohort` process. */
export function setupTelemetry(v: Values, service: string): Telemetry {
  const exporter = exporterKind(v)
  const logger = createLogger(logLevel(v), service, logFormat(v) === 'pretty' ? prettyDestination() : undefined)
  if (exporter === 'none') {
    return { tracer: defaultTracer(), logger, exporter, shutdown: async () => {} }
  }
  const provider = createTracerProvider(spanExporter(exporter), service)
  // Global too, so that predictors calling trace.getTracer() export through the same pipeline.
  trace.setGlobalTracerProvider(provider)
  let down: Promise<void> | undefined
  logger.info({ exporter }, 'tracing on')
  return {
    tracer: provider.getTracer('cohort'),
    logger,
    exporter,
    shutdown: () =>
      (down ??= provider.shutdown().catch((e: unknown) => {
        logger.warn({ err: e }, 'trace exporter shutdown failed')
      })),
  }
}
