// The official OpenAI Python client (openai, pinned in requirements.txt), unmodified, against a live
// Cohort stack: nats-server + a worker serving the char-level fixture generator + a gateway process.
// openai_client.py checks every answer. Needs test/python/.venv (setup.sh; .ci/run creates it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import { ensureVenv, python } from './harness.ts'

const CHAR_GENERATOR = new URL('../fixtures/char-generator.ts', import.meta.url).pathname

describe('the openai Python client against the gateway', () => {
  let nats: NatsServerHandle
  let procs: CliProcess[] = []
  let base = ''

  beforeAll(async () => {
    await ensureVenv()
    nats = await startNatsServer()
    const worker = spawnCohort(['worker', '--nats', nats.url, '--threads', '1', '--generative', `chars=${CHAR_GENERATOR}`])
    const gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
    procs = [worker, gateway]
    await worker.waitFor(/serving/, 90_000)
    const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    base = `http://127.0.0.1:${port}/v1`
  })

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')))
    await ifStarted(nats)?.stop()
  })

  it('models.list, completions and chat.completions, streamed (include_usage) and not, stop strings, logprobs, 400 and 404 errors', async () => {
    const out = await python('openai_client.py', ['--base-url', base])
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { check?: string; ok?: boolean; done?: boolean })
    expect(lines.at(-1)).toEqual({ done: true })
    const checks = lines.filter((l) => l.check !== undefined)
    expect(checks.filter((c) => !c.ok)).toEqual([])
    expect(checks.map((c) => c.check)).toEqual([
      'models.list',
      'completions',
      'completions stream',
      'chat.completions',
      'chat.completions stream',
      'chat.completions stop',
      'completions logprobs',
      'chat.completions logprobs',
      'chat.completions stream logprobs',
      'bad max_tokens is a 400',
      'unknown model is a 404',
    ])
  })
})
