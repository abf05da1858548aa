// The budgets of a generation (docs/generative.md#deadlines-and-the-server-slo): the client's
// headers as sent (capped by requestTimeoutMs), else the model's announced generative SLO.
import { describe, expect, it } from 'vitest'
import { encodeValue, subjects, type GenerativeSlo } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { createGatewayCore } from './core.ts'
import { Passage } from './door.ts'

/** A door over an in-process bus whose one "worker" answers the metadata of `gen` (counting the asks). */
function door(slo: GenerativeSlo | undefined, serverSlo = true) {
  let metaCalls = 0
  const transport = new InProcessTransport()
  const meta = transport.subscribe(subjects().meta('gen'))
  void (async () => {
    for await (const m of meta) {
      metaCalls++
      m.respond(encodeValue({ name: 'gen', kind: 'generative', generative: { maxContext: 100, vocabSize: 10, ...(slo ? { slo } : {}) } }))
    }
  })()
  const d = createGatewayCore({ transport, requestTimeoutMs: 30_000, serverSlo, workerLoss: false, metaTimeoutMs: 2_000 }).door
  const budget = (headers: { timeout?: string; ttft?: string } = {}) =>
    new Passage(d, { origin: 'openai', method: 'POST', route: '/v1/completions', model: 'gen', timeoutHeader: headers.timeout, ttftHeader: headers.ttft }).generationBudget()
  return { budget, metaCalls: () => metaCalls }
}

describe('Passage.generationBudget', () => {
  it("without client headers: the model's generative SLO, capped by requestTimeoutMs; the TTFT within the whole budget", async () => {
    expect(await door({ ttftMs: 500, generationMs: 60_000 }).budget()).toEqual({ timeoutMs: 30_000, ttftMs: 500 })
    expect(await door({ ttftMs: 9000, generationMs: 4000 }).budget()).toEqual({ timeoutMs: 4000, ttftMs: 4000 })
    expect(await door(undefined).budget()).toEqual({ timeoutMs: 30_000, ttftMs: undefined })
    expect(await door({ ttftMs: 500 }, false).budget()).toEqual({ timeoutMs: 30_000, ttftMs: undefined }) // serverSlo: false
  })

  it('client headers override the SLO both ways, up to requestTimeoutMs; a bad TTFT header is 400 naming it', async () => {
    const d = door({ ttftMs: 500, generationMs: 4000 })
    expect(await d.budget({ timeout: '10000', ttft: '2000' })).toEqual({ timeoutMs: 10_000, ttftMs: 2000 })
    expect(await d.budget({ timeout: '100', ttft: '2000' })).toEqual({ timeoutMs: 100, ttftMs: 100 })
    expect(await d.budget({ timeout: '99999999' })).toEqual({ timeoutMs: 30_000, ttftMs: 500 })
    await expect(d.budget({ ttft: '-3' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/x-cohort-ttft-timeout-ms must be a positive number/) })
    expect(d.metaCalls()).toBe(1) // the SLO is cached per model
  })
})
