// The CLI's telemetry wiring: pino JSON lines from the gateway and the worker (captured through a
// destination stream), the flag/env parsing, and the tracer provider's resource.
import { afterAll, describe, expect, it } from 'vitest'
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base'
import { createApp } from '@cohort/gateway'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { Type, definePredictor, itemError } from '@cohort/predictor'
import { CliError } from './cli-error.ts'
import { DEFAULT_EXPORTER, DEFAULT_LOG_LEVEL, TELEMETRY_HELP, TELEMETRY_OPTIONS, createLogger, createTracerProvider, exporterKind, logLevel } from './telemetry.ts'
import { DEFAULT_LOG_FORMAT } from './log-format.ts'
import { parse } from './args.ts'

/** `flaky`: x = 13 fails that item; x < 0 throws for the whole batch. */
const flaky = definePredictor({
  name: 'flaky',
  input: Type.Object({ x: Type.Number() }),
  predict: (xs) => {
    if (xs.some((i) => i.x < 0)) {
      throw new Error('negative input broke the batch')
    }
    return xs.map((i) => (i.x === 13 ? itemError('unlucky 13') : i.x * 2))
  },
})

/** A pino logger writing into an array of parsed JSON lines. */
function capture(level = 'debug') {
  const lines: Record<string, unknown>[] = []
  const logger = createLogger(level, 'cohort-test', { write: (s: string) => void lines.push(JSON.parse(s)) })
  return { logger, lines }
}

const TID = '4bf92f3577b34da6a3ce929d0e0e4736'
const TP = `00-${TID}-00f067aa0ba902b7-01`
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of cleanups.splice(0)) {
    await c()
  }
})

describe('structured logs (pino)', () => {
  it('logs a failed request as one JSON line with requestId, traceId, code, status and model', async () => {
    const { logger, lines } = capture()
    const transport = new InProcessTransport()
    const worker = new CohortWorker({ transport, runners: [new PredictorRunner(flaky)], logger: logger.child({ component: 'worker' }) })
    await worker.start()
    cleanups.push(async () => {
      await worker.drain()
      await transport.close()
    })
    const app = createApp({ transport, logger: logger.child({ component: 'gateway' }) })
    const post = (input: unknown, headers: Record<string, string> = {}) =>
      app.request('/models/flaky/predictions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ input }),
      })

    // Success: nothing at warn or above.
    expect((await post({ x: 1 })).status).toBe(200)
    expect(lines.filter((l) => l['level'] !== 'info' && l['level'] !== 'debug')).toEqual([])

    // An item that fails: warn line from the gateway, in the caller's trace (tracing off: the
    // incoming traceparent passes through).
    expect((await post({ x: 13 }, { traceparent: TP })).status).toBe(500)
    const failed = lines.filter((l) => l['msg'] === 'request failed')
    expect(failed).toHaveLength(1)
    expect(failed[0]).toMatchObject({
      level: 'warn',
      service: 'cohort-test',
      component: 'gateway',
      model: 'flaky',
      code: 'PREDICTOR_FAILED',
      status: 500,
      traceId: TID,
    })
    expect(failed[0]!['requestId']).toMatch(UUID)
    expect(typeof failed[0]!['time']).toBe('string')

    // A batch that throws: the worker's error line names the request the gateway logged.
    lines.length = 0
    expect((await post({ x: -1 }, { traceparent: TP })).status).toBe(500)
    const gw = lines.find((l) => l['msg'] === 'request failed')!
    const batch = lines.find((l) => l['msg'] === 'batch failed')!
    expect(batch).toMatchObject({ level: 'error', component: 'worker', model: 'flaky', code: 'PREDICTOR_FAILED', batchSize: 1, traceIds: [TID] })
    expect(batch['requestIds']).toEqual([gw['requestId']])
    expect(batch['err']).toMatchObject({ type: 'Error', message: 'negative input broke the batch' })
    expect((batch['err'] as { stack?: string }).stack).toContain('negative input broke the batch')

    // A 400 before any envelope: still a line with its own requestId.
    lines.length = 0
    const bad = await app.request('/models/flaky/predictions', { method: 'POST', body: 'nope' })
    expect(bad.status).toBe(400)
    expect(lines).toEqual([
      expect.objectContaining({ level: 'warn', msg: 'request failed', code: 'BAD_REQUEST', status: 400, model: 'flaky', requestId: expect.stringMatching(UUID) }),
    ])
    expect(lines[0]).not.toHaveProperty('traceId')
  })

  it('logs unexpected errors at error with the request fields and the stack', async () => {
    const { logger, lines } = capture()
    const inner = new InProcessTransport()
    cleanups.push(() => inner.close())
    const broken = Object.create(inner) as InProcessTransport
    broken.request = () => Promise.reject(new TypeError('boom'))
    const app = createApp({ transport: broken, logger })
    const r = await app.request('/v2/models/m/infer', {
      method: 'POST',
      headers: { traceparent: TP },
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] }),
    })
    expect(r.status).toBe(500)
    expect(await r.json()).toEqual({ error: 'internal error', code: 'INTERNAL' })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: 'error', msg: 'unexpected error', model: 'm', code: 'INTERNAL', status: 500, traceId: TID })
    expect(lines[0]!['requestId']).toMatch(UUID)
    expect(lines[0]!['err']).toMatchObject({ type: 'TypeError', message: 'boom' })
  })

  it('logs worker startup, configuration changes and drain', async () => {
    const { logger, lines } = capture('info')
    const transport = new InProcessTransport()
    const worker = new CohortWorker({ transport, runners: [new PredictorRunner(flaky)], logger, batching: { maxBatchSize: 8 } })
    await worker.start()
    expect(lines.find((l) => l['msg'] === 'worker started')).toMatchObject({
      level: 'info',
      workerId: worker.id,
      models: [{ name: 'flaky', kind: 'predictor', maxBatchSize: 8, policy: 'eager', concurrency: 1 }],
    })
    worker.configure({ maxBatchSize: 4 }, 'flaky')
    expect(lines.find((l) => l['msg'] === 'batching configuration changed')).toMatchObject({
      model: 'flaky',
      patch: { maxBatchSize: 4 },
      batching: { maxBatchSize: 4 },
    })
    await worker.drain()
    await transport.close()
    expect(lines.map((l) => l['msg'])).toEqual(expect.arrayContaining(['worker draining', 'worker drained']))
    // Nothing here mentions "serving": the test harness waits for that word on the CLI's output.
    expect(lines.some((l) => JSON.stringify(l).includes('serving'))).toBe(false)
  })

  it('respects the level', () => {
    const { logger, lines } = capture('warn')
    logger.info({ a: 1 }, 'hidden')
    logger.warn({ a: 2 }, 'shown')
    expect(lines.map((l) => l['msg'])).toEqual(['shown'])
  })
})

describe('flags and env', () => {
  it('options and help come from the knob table; help defaults are the constants', () => {
    expect(TELEMETRY_HELP).toContain(`(default $OTEL_TRACES_EXPORTER or ${DEFAULT_EXPORTER})`)
    expect(TELEMETRY_HELP).toContain(`(default $COHORT_LOG_LEVEL or ${DEFAULT_LOG_LEVEL})`)
    expect(TELEMETRY_HELP).toContain(`(default $COHORT_LOG_FORMAT or ${DEFAULT_LOG_FORMAT})`)
    expect(exporterKind({}, {})).toBe(DEFAULT_EXPORTER)
    expect(logLevel({}, {})).toBe(DEFAULT_LOG_LEVEL)
    expect(() => parse(['--log-levl', 'info'], TELEMETRY_OPTIONS)).toThrow(/unknown option --log-levl/)
    expect(() => logLevel(parse(['--log-level', 'loud'], TELEMETRY_OPTIONS).values, {})).toThrow(/--log-level must be one of/)
  })

  it('--otel-exporter beats OTEL_TRACES_EXPORTER; default none; bad values are a CLI error', () => {
    expect(exporterKind({}, {})).toBe('none')
    expect(exporterKind({}, { OTEL_TRACES_EXPORTER: 'otlp' })).toBe('otlp')
    expect(exporterKind({ 'otel-exporter': 'console' }, { OTEL_TRACES_EXPORTER: 'otlp' })).toBe('console')
    expect(() => exporterKind({ 'otel-exporter': 'jaeger' }, {})).toThrow(CliError)
  })

  it('--log-level beats COHORT_LOG_LEVEL; default info', () => {
    expect(logLevel({}, {})).toBe('info')
    expect(logLevel({}, { COHORT_LOG_LEVEL: 'DEBUG' })).toBe('debug')
    expect(logLevel({ 'log-level': 'silent' }, { COHORT_LOG_LEVEL: 'debug' })).toBe('silent')
    expect(() => logLevel({ 'log-level': 'loud' }, {})).toThrow(CliError)
  })

  it('names the service in the resource; OTEL_SERVICE_NAME overrides it', async () => {
    const exporter = new InMemorySpanExporter()
    const provider = createTracerProvider(exporter, 'cohort-worker')
    provider.getTracer('cohort').startSpan('x').end()
    await provider.forceFlush()
    expect(exporter.getFinishedSpans()[0]!.resource.attributes['service.name']).toBe('cohort-worker')
    await provider.shutdown()
    const prev = process.env['OTEL_SERVICE_NAME']
    process.env['OTEL_SERVICE_NAME'] = 'inference-eu'
    try {
      const e2 = new InMemorySpanExporter()
      const p2 = createTracerProvider(e2, 'cohort-worker')
      p2.getTracer('cohort').startSpan('y').end()
      await p2.forceFlush()
      expect(e2.getFinishedSpans()[0]!.resource.attributes['service.name']).toBe('inference-eu')
      await p2.shutdown()
    } finally {
      if (prev === undefined) {
        delete process.env['OTEL_SERVICE_NAME']
      } else {
        process.env['OTEL_SERVICE_NAME'] = prev
      }
    }
  })
})
