// Issue 25, findings 1 and 2, cross-process with the users of infra/nats/auth.conf on a real
// nats-server: a client holding the gateway (or worker) credential names a reply subject it does
// not own, and tries to make a responder answer there. Every responder on the bus (the worker's
// and the gateway's chunk responders, metadata, discovery, $SRV, inference v1, packs on the main
// and overflow subjects) is tried against every target class ($KV, $JS.ACK, $JS.API, $SYS,
// another gateway's inbox, another deployment's prefix, an inbox not of a client's form). A spy
// user that sees every subject (added to the server for the test only) is the oracle: nothing may
// arrive on a target. Then finding 2 end to end: a forged pack with another gateway's reply subject
// and request id must not decide that gateway's request.
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { headers } from '@nats-io/nats-core'
import { decodeNotice, encodeRequest, packEncoded, type InferRequest } from '@cohort/protocol'
import { SLEEPY_PREDICTOR, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

const AUTH_CONF = readFileSync(fileURLToPath(new URL('../../infra/nats/auth.conf', import.meta.url)), 'utf8')
const PASS = { gateway: `gw-${randomBytes(12).toString('hex')}`, worker: `wk-${randomBytes(12).toString('hex')}`, admin: `ad-${randomBytes(12).toString('hex')}` }
const SPY_PASS = `spy-${randomBytes(12).toString('hex')}`
const enc = new TextEncoder()

let nats: NatsServerHandle
let workers: CliProcess[] = []
let gateway: CliProcess
let base = ''
let spy: NatsConnection
/** Every subject the spy saw, in order. */
const seen: string[] = []
const conns: NatsConnection[] = []

async function as(user: 'gateway' | 'worker'): Promise<NatsConnection> {
  const nc = await connect({ servers: nats.url, user, pass: PASS[user] })
  conns.push(nc)
  return nc
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const req = (id: string, extra: Partial<InferRequest> = {}): Uint8Array => encodeRequest({ v: 1, id, model: 'sleepy', deadline: Date.now() + 10_000, items: [{ x: 1 }], ...extra })

beforeAll(async () => {
  // The repository's users, plus a spy allowed everything (the oracle; not part of auth.conf).
  const conf = AUTH_CONF.replace(/users = \[/, `users = [\n    { user: spy, password: "${SPY_PASS}" }`)
  expect(conf).not.toBe(AUTH_CONF)
  nats = await startNatsServer({
    // 64 KiB: a reply of a few thousand items or an 80 KB request travels in chunks.
    maxPayload: 65_536,
    extraConfig: `COHORT_NATS_GATEWAY_PASS: "${PASS.gateway}"\nCOHORT_NATS_WORKER_PASS: "${PASS.worker}"\nCOHORT_NATS_ADMIN_PASS: "${PASS.admin}"\n${conf}`,
  })
  spy = await connect({ servers: nats.url, user: 'spy', pass: SPY_PASS })
  spy.subscribe('>', { callback: (_e, m) => void seen.push(m.subject) })
  await spy.flush()
  // Two workers: a forged pack can run on the idle one while the victim's slow batch runs.
  workers = ['w1', 'w2'].map((id) =>
    spawnCohort(['worker', '--nats', nats.url, '--nats-user', 'worker', '--id', id, '--threads', '1', '--predictor', SLEEPY_PREDICTOR], {
      COHORT_NATS_PASS: PASS.worker,
      SLEEPY_MS: '1',
    }),
  )
  await Promise.all(workers.map((w, i) => w.waitFor(new RegExp(`worker w${i + 1} serving sleepy`), 60_000)))
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--nats-user', 'gateway', '--nats-pass', PASS.gateway])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
})

afterAll(async () => {
  await Promise.all(allStarted(...conns, spy).map((c) => c.close().catch(() => undefined)))
  await Promise.all(allStarted(...workers, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

/** The reply subjects of the real gateway's packs: `cohort.gw.<gateway>…` up to the last token. */
async function gatewayInbox(): Promise<string> {
  // Packs (protocol v2) once the gateway heard a worker's heartbeat; v1 before.
  for (let i = 0; i < 50; i++) {
    const from = seen.length
    const r = await postJson(`${base}/models/sleepy/predictions`, { input: { x: 2 } })
    expect(r.status).toBe(200)
    await spy.flush()
    const s = seen.slice(from).find((x) => x.startsWith('cohort.gw.'))
    if (s) return s.slice(0, s.lastIndexOf('.'))
    await sleep(200)
  }
  throw new Error('the gateway never sent a pack')
}

describe("no responder answers a reply subject that is not the asker's (issue 25, findings 1 and 2)", () => {
  it('refuses every target class on every responder, as the gateway user and as the worker user', async () => {
    const victim = await gatewayInbox()
    const targets = {
      kv: '$KV.cohort-models.planted-by-gateway',
      config: '$KV.cohort-config.demo',
      ack: '$JS.ACK.COHORT_JOBS.jobs-sleepy.1.1.1.1700000000000000000.0',
      api: '$JS.API.STREAM.PURGE.KV_cohort-config',
      sys: '$SYS.REQ.SERVER.PING',
      otherGateway: `${victim}.zz9`,
      otherDeployment: 'other.gw.g-1.AAAAAAAAAAAAAAAAAAAAAA.0',
      oddInbox: '_INBOX.x',
    }
    const gw = await as('gateway')
    const wk = await as('worker')

    // The worker's chunk responder: a reply of 4000 items is past max_payload, so it comes as a
    // reference naming the worker's chunk subject (what the attacker needs, read off its own reply).
    const big = await gw.request('cohort.infer.sleepy', req('big', { items: Array.from({ length: 4000 }, (_, i) => ({ x: i })) }), { timeout: 30_000 })
    const ref = big.headers?.get('Cohort-Blob')
    expect(ref, 'a reply in chunks').toBeDefined()
    const workerBlob = ref!.split(' ')[1]!
    const workerPrefix = workerBlob.slice(0, workerBlob.lastIndexOf('.'))

    // The gateway's chunk responder: a large OIP request makes the gateway serve chunks to the
    // worker; a worker-role client on cohort.blob.> reads the gateway's chunk subject.
    const blobs = wk.subscribe('cohort.blob.>')
    const gwChunk = (async () => {
      for await (const m of blobs) {
        if (!m.subject.startsWith(workerPrefix)) return m.subject
      }
      return ''
    })()
    const data = Array.from({ length: 12_000 }, (_, i) => i)
    const oip = await postJson(`${base}/v2/models/sleepy/infer`, { inputs: [{ name: 'x', datatype: 'FP64', shape: [data.length], data }] })
    expect(oip.status).toBeLessThan(600)
    const gatewayChunk = await gwChunk
    blobs.unsubscribe()
    const gatewayPrefix = gatewayChunk.slice(0, gatewayChunk.lastIndexOf('.'))
    expect(gatewayPrefix).toMatch(/^cohort\.blob\.[A-Za-z0-9]+$/)

    // The attacker's own reply key, sent with its packs: valid for its own inbox, for nothing else.
    const ownKey = randomBytes(32).toString('base64url')
    const keyed = headers()
    keyed.set('Cohort-Reply-Key', ownKey)
    const responders: { name: string; nc: NatsConnection; subject: string; body: () => Uint8Array; keyed?: boolean }[] = [
      { name: 'worker chunks (unknown blob)', nc: gw, subject: `${workerPrefix}.bogus`, body: () => enc.encode('0') },
      { name: 'worker chunks (a real blob)', nc: gw, subject: workerBlob, body: () => enc.encode('0') },
      { name: 'gateway chunks', nc: wk, subject: `${gatewayPrefix}.bogus`, body: () => enc.encode('0') },
      { name: 'metadata', nc: gw, subject: 'cohort.meta.sleepy', body: () => new Uint8Array(0) },
      { name: 'discovery', nc: gw, subject: 'cohort.discover', body: () => new Uint8Array(0) },
      { name: 'services ($SRV)', nc: gw, subject: '$SRV.INFO.cohort-worker', body: () => new Uint8Array(0) },
      { name: 'inference v1', nc: gw, subject: 'cohort.infer.sleepy', body: () => req(`v1-${randomBytes(4).toString('hex')}`) },
      { name: 'pack', nc: gw, subject: 'cohort.infer.sleepy', body: () => packEncoded([req(`p-${randomBytes(4).toString('hex')}`)]), keyed: true },
      { name: 'overflow pack', nc: gw, subject: 'cohort.overflow.sleepy', body: () => packEncoded([req(`o-${randomBytes(4).toString('hex')}`)]), keyed: true },
    ]
    const from = seen.length
    for (const r of responders) {
      for (const reply of Object.values(targets)) {
        r.nc.publish(r.subject, r.body(), { reply, ...(r.keyed ? { headers: keyed } : {}) })
      }
      await r.nc.flush()
    }
    // Fences: each responder still answers its asker's inbox, after the tricks it was sent.
    expect((await gw.request('cohort.meta.sleepy', new Uint8Array(0), { timeout: 5_000 })).data.byteLength).toBeGreaterThan(0)
    expect((await gw.request('cohort.infer.sleepy', req('fence'), { timeout: 5_000 })).data.byteLength).toBeGreaterThan(0)
    expect((await gw.request(workerBlob, enc.encode('0'), { timeout: 5_000 })).data.byteLength).toBeGreaterThan(0)
    await sleep(500)
    await spy.flush()
    const hits = seen.slice(from).filter((s) => Object.values(targets).includes(s))
    expect(hits, 'messages a responder published on a target').toEqual([])
    // Each process says it left such messages unanswered (one throttled stderr line).
    expect(workers.map((w) => w.output()).join('\n')).toMatch(/cohort: left a message on \S+ unanswered: /)
    expect(gateway.output()).toMatch(/cohort: left a message on cohort\.blob\.\S+ unanswered: reply subject/)
  })

  it("does not let a gateway credential decide another gateway's request (a forged pack with its reply subject and id)", async () => {
    await gatewayInbox() // packs from now on
    const gw = await as('gateway')
    const notices = gw.subscribe('cohort.gw.>')
    const accepted = (async () => {
      for await (const m of notices) {
        const n = decodeNotice(m.data)
        if (n.t === 'accept' && n.ids.length > 0) return { subject: m.subject, id: n.ids[0]! }
      }
      throw new Error('no accept notice')
    })()
    await gw.flush()
    // The victim: a slow request through the real gateway.
    const victim = postJson(`${base}/models/sleepy/predictions`, { input: { x: 21, sleepMs: 700 } })
    const { subject, id } = await accepted
    notices.unsubscribe()
    // The forged pack (its own reply key), a few times over: the idle worker answers at once.
    const key = headers()
    key.set('Cohort-Reply-Key', randomBytes(32).toString('base64url'))
    for (let i = 0; i < 8; i++) {
      gw.publish('cohort.infer.sleepy', packEncoded([req(id, { items: [{ x: 1000 }] })]), { reply: subject, headers: key })
    }
    await gw.flush()
    const r = await victim
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    expect(r.body.output).toMatchObject({ y: 42 })
  })
})
