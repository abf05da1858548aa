// Webhook retry settings as flags (`--webhook-attempts`, `--webhook-initial-delay-ms`, ...): parsed
// for serve/gateway (createApp's predictions.webhooks), worker (jobs.webhooks) and the Redis bridge,
// and taking effect: a gateway built from the flags stops after the attempts they name.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { createApp } from '@cohort/gateway'
import { Type, definePredictor } from '@cohort/predictor'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { parse } from './args.ts'
import { CliError } from './cli-error.ts'
import { BRIDGE_HELP } from './bridge/command.ts'
import { DEFAULT_WEBHOOK_ATTEMPTS, DEFAULT_WEBHOOK_INITIAL_DELAY_MS, DEFAULT_WEBHOOK_MAX_DELAY_MS, DEFAULT_WEBHOOK_TIMEOUT_MS } from '@cohort/predictions'
import { DEFAULT_JOB_MAX_DELIVER } from '@cohort/transport'
import { DEFAULT_JOB_ACK_WAIT_MS } from '@cohort/worker'
import { DEFAULT_MAX_BULK_INPUTS } from '@cohort/gateway'
import { JOB_HELP, JOB_OPTIONS, PREDICTION_HELP, PREDICTION_OPTIONS, WEBHOOK_HELP, predictionOptions, webhookOptions, workerJobs } from './jobs-flags.ts'
import { GATEWAY_HELP, SERVE_HELP, WORKER_HELP } from './commands.ts'
import { ifStarted } from '@cohort/test-support'

const flags = (args: string[]) => parse(args, PREDICTION_OPTIONS).values

describe('webhook flags', () => {
  it('parse to WebhookOptions for the gateway, the worker and the bridge', () => {
    const v = flags(['--webhook-attempts', '3', '--webhook-initial-delay-ms', '0', '--webhook-max-delay-ms', '2000', '--webhook-timeout-ms', '1500'])
    const want = { maxAttempts: 3, initialDelayMs: 0, maxDelayMs: 2000, timeoutMs: 1500 }
    expect(webhookOptions(v)).toEqual(want)
    expect(predictionOptions(v)).toEqual({ predictions: { webhooks: want } })
    const queue = {} as Parameters<typeof workerJobs>[1]
    expect(workerJobs(parse(['--webhook-attempts', '3'], JOB_OPTIONS).values, queue)).toEqual({ queue, webhooks: { maxAttempts: 3 } })
    expect(webhookOptions(flags([]))).toBeUndefined()
    expect(predictionOptions(flags([]))).toEqual({})
    for (const bad of [
      ['--webhook-attempts', '0'],
      ['--webhook-timeout-ms', 'soon'],
      ['--webhook-initial-delay-ms', '-1'],
    ]) {
      expect(() => webhookOptions(flags(bad)), bad.join(' ')).toThrow(CliError)
    }
  })

  it("help defaults are the libraries' constants; out-of-bound values name the flag", () => {
    for (const [help, n] of [
      [WEBHOOK_HELP, DEFAULT_WEBHOOK_ATTEMPTS],
      [WEBHOOK_HELP, DEFAULT_WEBHOOK_INITIAL_DELAY_MS],
      [WEBHOOK_HELP, DEFAULT_WEBHOOK_MAX_DELAY_MS],
      [WEBHOOK_HELP, DEFAULT_WEBHOOK_TIMEOUT_MS],
      [PREDICTION_HELP, DEFAULT_MAX_BULK_INPUTS],
      [JOB_HELP, DEFAULT_JOB_ACK_WAIT_MS],
      [JOB_HELP, DEFAULT_JOB_MAX_DELIVER],
    ] as const) {
      expect(help).toContain(`(default ${n}`)
    }
    expect(() => predictionOptions(flags(['--max-bulk-inputs', '0']))).toThrow(/--max-bulk-inputs must be an integer >= 1/)
    expect(() => workerJobs(parse(['--job-ack-wait-ms', '1.5'], JOB_OPTIONS).values, {} as Parameters<typeof workerJobs>[1])).toThrow(/--job-ack-wait-ms/)
    expect(() => parse(['--webhook-attempt', '3'], PREDICTION_OPTIONS)).toThrow(/unknown option --webhook-attempt/)
  })

  it('are listed in the help of serve, gateway, worker and bridge redis', () => {
    for (const help of [SERVE_HELP, GATEWAY_HELP, WORKER_HELP, BRIDGE_HELP]) {
      expect(help).toContain('--webhook-attempts N')
      expect(help.match(/--webhook-attempts/g)).toHaveLength(1)
    }
  })

  describe('taking effect', () => {
    const hits: number[] = []
    let server: Server
    const transport = new InProcessTransport()
    const worker = new CohortWorker({ transport, runners: [new PredictorRunner(definePredictor({ name: 'one', input: Type.Object({}), predict: (xs) => xs.map(() => 1) }))] })

    afterAll(async () => {
      ifStarted(server)?.close()
      await worker.drain()
      await transport.close()
    })

    it('a gateway built from --webhook-attempts 2 stops after 2 attempts', async () => {
      server = createServer((req, res) => {
        req.resume()
        req.on('end', () => {
          hits.push(Date.now())
          res.writeHead(503).end()
        })
      })
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
      await worker.start()
      const app = createApp({ transport, workerLoss: false, ...predictionOptions(flags(['--webhook-attempts', '2', '--webhook-initial-delay-ms', '20'])) })
      const r = await app.request('/models/one/predictions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', prefer: 'respond-async' },
        body: JSON.stringify({ input: {}, webhook: url, webhook_events_filter: ['completed'] }),
      })
      expect(r.status).toBe(202)
      const until = Date.now() + 10_000
      while (hits.length < 2 && Date.now() < until) {
        await new Promise((res) => setTimeout(res, 20))
      }
      // With the default of 6 attempts a third would follow 40 ms after the second (20 ms doubling).
      await new Promise((res) => setTimeout(res, 1500))
      expect(hits).toHaveLength(2)
    })
  })
})
