// Redis Streams ingress end to end: a real redis-server and nats-server, a `cohort worker` with the
// sleepy predictor and `cohort bridge redis` processes. Entries in, results in the stream and keys;
// bad entries fail alone; webhooks; a bridge killed with SIGKILL mid-stream loses nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, webhookReceiver, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'
import { startRedisServer, type RedisServerHandle } from './redis-server.ts'

async function until<T>(f: () => Promise<T | undefined | false> | T | undefined | false, ms = 45_000, what = 'condition'): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined && v !== false) {
      return v
    }
    if (Date.now() > end) {
      throw new Error(`${what} not met in ${ms} ms`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Pred = any

describe('cohort bridge redis', () => {
  let redis: RedisServerHandle
  let nats: NatsServerHandle
  let worker: CliProcess
  let bridge: CliProcess | undefined
  const extra: CliProcess[] = []

  function startBridge(args: string[]): CliProcess {
    const p = spawnCohort(['bridge', 'redis', '--redis', redis.url, '--nats', nats.url, ...args])
    extra.push(p)
    return p
  }

  /** The stored result of `id` (undefined when there is none). */
  async function result(id: string): Promise<Pred> {
    const v = await redis.client.get(`cohort:result:${id}`)
    return v === null ? undefined : JSON.parse(v)
  }

  async function results(ids: string[]): Promise<Pred[]> {
    return until(
      async () => {
        const all = await Promise.all(ids.map(result))
        return all.every((x) => x !== undefined) ? all : undefined
      },
      45_000,
      `results of ${ids.length} entries`,
    )
  }

  async function add(stream: string, fields: Record<string, string>): Promise<void> {
    await redis.client.xadd(stream, '*', ...Object.entries(fields).flat())
  }

  /** Result entries of a results stream, as [id, prediction]. */
  async function resultEntries(stream: string): Promise<[string, Pred][]> {
    const entries = await redis.client.xrange(stream, '-', '+')
    return entries.map(([, f]) => {
      const m = new Map<string, string>()
      for (let i = 0; i < f.length; i += 2) {
        m.set(f[i]!, f[i + 1]!)
      }
      return [m.get('id')!, JSON.parse(m.get('prediction')!)]
    })
  }

  async function pending(stream: string, group = 'cohort'): Promise<number> {
    const r = (await redis.client.call('XPENDING', stream, group)) as [unknown, ...unknown[]] // the count as the client decoded it
    return Number(r[0])
  }

  beforeAll(async () => {
    redis = await startRedisServer()
    nats = await startNatsServer({ jetstream: true })
    worker = spawnCohort(['worker', '--nats', nats.url, '--predictor', SLEEPY_PREDICTOR, '--id', 'r0', '--max-delay-ms', '5'], { SLEEPY_MS: '20' })
    await worker.waitFor(/worker r0 serving sleepy/, 90_000)
    bridge = startBridge(['--consumer', 'main', '--concurrency', '32', '--claim-idle-ms', '2000'])
    await bridge.waitFor(/bridge redis .* consumer main/, 60_000)
  }, 180_000)

  afterAll(async () => {
    for (const p of extra) {
      await p.stop('SIGKILL').catch(() => undefined)
    }
    const w = ifStarted(worker)
    await w?.stop('SIGKILL').catch(() => undefined)
    await ifStarted(nats)?.stop()
    await ifStarted(redis)?.stop()
  })

  it('runs entries as items batched together and writes each result to the stream and its key', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `ok-${i}`)
    const t0 = Date.now()
    await Promise.all(ids.map((id, i) => add('cohort:requests', { id, model: 'sleepy', input: JSON.stringify({ x: i }) })))
    const rs = await results(ids)
    console.log(`redis bridge: ${ids.length} entries in ${Date.now() - t0} ms`)
    rs.forEach((r, i) => {
      expect(r).toMatchObject({ id: `ok-${i}`, model: 'sleepy', status: 'succeeded', input: { x: i }, output: { y: 2 * i }, error: null })
      expect(r.completed_at).toEqual(expect.any(String))
    })
    // They shared batches with each other (the worker's batching), not one request per batch.
    expect(Math.max(...rs.map((r) => r.output.batch))).toBeGreaterThan(1)
    const entries = (await resultEntries('cohort:results')).filter(([id]) => id.startsWith('ok-'))
    expect(entries.map(([id]) => id).sort()).toEqual([...ids].sort())
    for (const [id, p] of entries) {
      expect(p).toEqual(await result(id))
    }
    await until(async () => (await pending('cohort:requests')) === 0, 10_000, 'empty pending list')
  })

  it('fails bad entries alone, with their error codes, and keeps serving the good ones', async () => {
    const entries: [string, Record<string, string>][] = [
      ['good-1', { id: 'good-1', model: 'sleepy', input: '{"x":1}' }],
      ['no-input', { id: 'no-input', model: 'sleepy' }],
      ['bad-json', { id: 'bad-json', model: 'sleepy', input: '{"x":' }],
      ['unknown', { id: 'unknown', model: 'no-such-model', input: '{"x":1}' }],
      ['schema', { id: 'schema', model: 'sleepy', input: '{"x":"three"}' }],
      ['item-fail', { id: 'item-fail', model: 'sleepy', input: '{"x":5,"fail":true}' }],
      ['good-2', { id: 'good-2', model: 'sleepy', input: '{"x":2}' }],
    ]
    await Promise.all(entries.map(([, f]) => add('cohort:requests', f)))
    await add('cohort:requests', { model: 'sleepy', input: '{"x":1}' }) // no id: failed under its stream id
    const rs = await results(entries.map(([id]) => id))
    const by = Object.fromEntries(rs.map((r) => [r.id, r]))
    expect(by['good-1']).toMatchObject({ status: 'succeeded', output: { y: 2 } })
    expect(by['good-2']).toMatchObject({ status: 'succeeded', output: { y: 4 } })
    expect(by['no-input']).toMatchObject({ status: 'failed', code: 'BAD_REQUEST', output: null })
    expect(by['no-input'].error).toMatch(/"input" is missing/)
    expect(by['bad-json']).toMatchObject({ status: 'failed', code: 'BAD_REQUEST' })
    expect(by['bad-json'].error).toMatch(/not JSON/)
    expect(by['unknown']).toMatchObject({ status: 'failed', code: 'MODEL_NOT_FOUND' })
    expect(by['schema']).toMatchObject({ status: 'failed', code: 'INVALID_INPUT' })
    expect(by['item-fail']).toMatchObject({ status: 'failed', code: 'PREDICTOR_FAILED' })
    const noId = await until(
      async () => (await resultEntries('cohort:results')).find(([, p]) => p.status === 'failed' && /"id" is missing/.test(p.error)),
      30_000,
      'id-less result',
    )
    expect(noId[1].code).toBe('BAD_REQUEST')
    expect(await result(noId[0])).toEqual(noId[1])
    await until(async () => (await pending('cohort:requests')) === 0, 10_000, 'empty pending list')
    expect(bridge!.proc.exitCode).toBeNull()
  })

  it('calls the webhook with start, output and completed', async () => {
    const hooks = await webhookReceiver('/hook')
    try {
      await add('cohort:requests', { id: 'hooked', model: 'sleepy', input: '{"x":21}', webhook: hooks.url })
      await until(() => hooks.got.some((h) => h.event === 'completed'), 30_000, 'completed webhook')
      expect(hooks.got.map((h) => h.event)).toEqual(['start', 'output', 'completed'])
      expect(hooks.got[0]!.body).toMatchObject({ id: 'hooked', status: 'processing' })
      expect(hooks.got[2]!.body).toEqual(await result('hooked'))
      expect(hooks.got[2]!.body).toMatchObject({ status: 'succeeded', output: { y: 42 }, webhook: hooks.url })
    } finally {
      hooks.server.close()
    }
  })

  it('does not run an id again that already has a result (redelivery, or the same id sent twice)', async () => {
    await add('cohort:requests', { id: 'ok-0', model: 'sleepy', input: '{"x":1000}' })
    await until(async () => (await pending('cohort:requests')) === 0, 10_000, 'empty pending list')
    await new Promise((r) => setTimeout(r, 200))
    expect((await result('ok-0')).output).toEqual({ y: 0, batch: expect.any(Number) })
    expect((await resultEntries('cohort:results')).filter(([id]) => id === 'ok-0')).toHaveLength(1)
  })

  it('stops on SIGTERM after finishing what it read (exit 0, nothing pending)', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `term-${i}`)
    await Promise.all(ids.map((id, i) => add('cohort:requests', { id, model: 'sleepy', input: JSON.stringify({ x: i, sleepMs: 500 }) })))
    await until(async () => (await pending('cohort:requests')) > 0, 10_000, 'entries in flight')
    expect(await bridge!.stop('SIGTERM', 30_000)).toBe(0)
    expect(await pending('cohort:requests')).toBe(0)
    // What it read has results; what it had not read is still in the stream for the next bridge.
    const done = (await Promise.all(ids.map(result))).filter((r) => r !== undefined)
    expect(done.length).toBeGreaterThan(0)
    bridge = startBridge(['--consumer', 'main2', '--claim-idle-ms', '2000'])
    await results(ids)
    expect((await resultEntries('cohort:results')).filter(([id]) => id.startsWith('term-'))).toHaveLength(ids.length)
  })

  it('loses nothing when a bridge is killed (SIGKILL) mid-stream: claimed by another, one result each', async () => {
    const stream = 'kill:requests'
    const out = 'kill:results'
    const n = 40
    const ids = Array.from({ length: n }, (_, i) => `kill-${i}`)
    const a = startBridge(['--stream', stream, '--results', out, '--consumer', 'a', '--concurrency', '8', '--claim-idle-ms', '1500'])
    await a.waitFor(/consumer a/, 60_000)
    const t0 = Date.now()
    for (const [i, id] of ids.entries()) {
      await add(stream, { id, model: 'sleepy', input: JSON.stringify({ x: i, sleepMs: 400 }) })
    }
    // Kill it while it holds entries (read, not yet answered) and has not finished the stream.
    await until(async () => (await pending(stream)) >= 4, 20_000, 'entries in flight on bridge a')
    a.proc.kill('SIGKILL')
    await a.exited
    const held = await pending(stream)
    const before = (await Promise.all(ids.map(result))).filter((r) => r !== undefined).length
    expect(held).toBeGreaterThan(0)
    expect(before).toBeLessThan(n)
    const b = startBridge(['--stream', stream, '--results', out, '--consumer', 'b', '--concurrency', '8', '--claim-idle-ms', '1500'])
    const rs = await results(ids)
    console.log(`redis bridge kill: ${n} entries, ${held} pending on the killed bridge and ${before} done before the kill, all done ${Date.now() - t0} ms after the first`)
    rs.forEach((r, i) => expect(r).toMatchObject({ id: `kill-${i}`, status: 'succeeded', output: { y: 2 * i } }))
    const entries = await resultEntries(out)
    expect(entries.map(([id]) => id).sort()).toEqual([...ids].sort()) // exactly one result entry each
    await until(async () => (await pending(stream)) === 0, 10_000, 'empty pending list')
    expect(await b.stop('SIGTERM', 30_000)).toBe(0)
    expect(b.output()).toMatch(/[1-9]\d* claimed/)
  }, 120_000)

  it('rereads its own pending entries when restarted under the same --consumer name (no claim wait)', async () => {
    const stream = 'same:requests'
    const out = 'same:results'
    const ids = Array.from({ length: 6 }, (_, i) => `same-${i}`)
    const args = ['--stream', stream, '--results', out, '--consumer', 'c', '--claim-idle-ms', '600000']
    const first = startBridge(args)
    await first.waitFor(/consumer c/, 60_000)
    await Promise.all(ids.map((id, i) => add(stream, { id, model: 'sleepy', input: JSON.stringify({ x: i, sleepMs: 1500 }) })))
    await until(async () => (await pending(stream)) === ids.length, 20_000, 'all entries in flight')
    first.proc.kill('SIGKILL')
    await first.exited
    const again = startBridge(args)
    const rs = await results(ids)
    rs.forEach((r, i) => expect(r).toMatchObject({ id: `same-${i}`, status: 'succeeded', output: { y: 2 * i } }))
    await until(async () => (await pending(stream)) === 0, 10_000, 'empty pending list')
    expect((await resultEntries(out)).map(([id]) => id).sort()).toEqual([...ids].sort())
    expect(await again.stop('SIGTERM', 30_000)).toBe(0)
  })
})
