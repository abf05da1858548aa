// `--subject-prefix P` of serve, gateway and worker: two deployments on one real nats-server (with
// JetStream, so the KV directories and job streams exist too), "alpha" as a gateway process plus a
// worker process and "beta.team" (a dotted prefix) as `cohort serve --nats`. Both serve a predictor
// named `tagged` that answers with its deployment's tag, and one model only they have. Were the
// flag ignored, both would be on the default prefix `cohort`: each gateway would list and reach the
// other's models and spread `tagged` over both workers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { getJson, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted } from '@cohort/test-support'

const TAGGED = new URL('../fixtures/tagged-predictor.ts', import.meta.url).pathname

let nats: NatsServerHandle
const procs: CliProcess[] = []
let alpha = ''
let beta = ''

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: true })
  const worker = spawnCohort(['worker', '--nats', nats.url, '--subject-prefix', 'alpha', '--predictor', TAGGED], { TAGGED_TAG: 'alpha' })
  const gateway = spawnCohort(['gateway', '--nats', nats.url, '--subject-prefix', 'alpha', '--port', '0', '--drain-ms', '0'])
  const serve = spawnCohort(['serve', '--nats', nats.url, '--subject-prefix', 'beta.team', '--port', '0', '--predictor', TAGGED], { TAGGED_TAG: 'beta' })
  procs.push(worker, gateway, serve)
  await worker.waitFor(/worker \S+ serving .* from NATS/, 90_000)
  alpha = (await gateway.waitFor(/gateway on (http:\/\/\S+) /, 90_000))[1]!
  beta = (await serve.waitFor(/serving .* on (http:\/\/\S+) /, 90_000))[1]!
}, 120_000)

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()))
  await ifStarted(nats)?.stop()
})

/** GET until `ok` holds: discovery reaches a new worker within its announce interval. */
async function until<T>(get: () => Promise<T>, ok: (x: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs
  let x = await get()
  while (!ok(x) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 200))
    x = await get()
  }
  return x
}

const names = async (base: string): Promise<string[]> => {
  const r = await getJson(`${base}/v2/models`)
  expect(r.status).toBe(200)
  return (r.body.models as { name: string }[]).map((m) => m.name).sort()
}

describe('--subject-prefix: two deployments on one nats-server', () => {
  it("each gateway lists its own deployment's models only", async () => {
    expect(
      await until(
        () => names(alpha),
        (n) => n.length >= 2,
      ),
    ).toEqual(['only-alpha', 'tagged'])
    expect(
      await until(
        () => names(beta),
        (n) => n.length >= 2,
      ),
    ).toEqual(['only-beta', 'tagged'])
  })

  it("a model of the other deployment is 404 here, while this deployment's own answers", async () => {
    expect((await postJson(`${alpha}/models/only-alpha/predictions`, { input: { x: 1 } })).status).toBe(200)
    expect((await postJson(`${beta}/models/only-beta/predictions`, { input: { x: 1 } })).status).toBe(200)
    const a = await postJson(`${alpha}/models/only-beta/predictions`, { input: { x: 1 } })
    const b = await postJson(`${beta}/models/only-alpha/predictions`, { input: { x: 1 } })
    expect(a.status).toBe(404)
    expect(b.status).toBe(404)
  })

  it('the same model name is answered by its own deployment every time', async () => {
    for (const [base, tag] of [
      [alpha, 'alpha'],
      [beta, 'beta'],
    ] as const) {
      const tags = await Promise.all(
        Array.from({ length: 20 }, async (_, x) => {
          const r = await postJson(`${base}/models/tagged/predictions`, { input: { x } })
          expect(r.status).toBe(200)
          expect(r.body.output.x).toBe(x)
          return r.body.output.tag as string
        }),
      )
      expect(new Set(tags)).toEqual(new Set([tag]))
    }
  })
})
