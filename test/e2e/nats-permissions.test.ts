// infra/nats/auth.conf on a real nats-server: a worker and a gateway process with their own NATS
// users serve real requests (inference, metadata, readiness over $SRV, KV reads, admin KV writes),
// the async-prediction stream and bucket work for both roles, the admin user manages JetStream and
// queries $SRV, and each credential is refused, subject by subject, what its role does not need.
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { PermissionViolationError, headers } from '@nats-io/nats-core'
import { decodeReply, encodeRequest, type InferRequest } from '@cohort/protocol'
import { AckPolicy, RetentionPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream'
import { Kvm } from '@nats-io/kv'
import { SLEEPY_PREDICTOR, postJson, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

const NATS_DIR = fileURLToPath(new URL('../../infra/nats/', import.meta.url))
const AUTH_CONF = readFileSync(`${NATS_DIR}auth.conf`, 'utf8')
const GATEWAY_PASS = `gw-${randomBytes(12).toString('hex')}`
const WORKER_PASS = `wk-${randomBytes(12).toString('hex')}`
const ADMIN_PASS = `ad-${randomBytes(12).toString('hex')}`
const PASS = { gateway: GATEWAY_PASS, worker: WORKER_PASS, admin: ADMIN_PASS }
const API_KEY = `key-${randomBytes(12).toString('hex')}`
const ADMIN_KEY = `admin-${randomBytes(12).toString('hex')}`

/** One row of a role's table in docs/security.md: its subjects and what the row says of them. */
interface RoleRow {
  subjects: string[]
  publish: boolean
  subscribe: boolean
  denied: boolean
}

const SECURITY_MD = readFileSync(fileURLToPath(new URL('../../docs/security.md', import.meta.url)), 'utf8')

/** The rows (with subjects) of the "may" and "may not" tables of `role` in docs/security.md. */
function roleRows(role: 'gateway' | 'worker' | 'admin'): RoleRow[] {
  const titles = { gateway: '**Gateway** (`gateway` user)', worker: '**Worker** (`worker` user)', admin: '**Admin** (`admin` user' }
  const start = SECURITY_MD.indexOf(titles[role])
  expect(start, `the ${role} section of docs/security.md`).toBeGreaterThan(0)
  const ends = [...Object.values(titles), 'The same test runs the roles'].map((t) => SECURITY_MD.indexOf(t, start + 1)).filter((i) => i > start)
  const section = SECURITY_MD.slice(start, Math.min(...ends))
  return section
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => {
      const [, subjects = '', perm = ''] = l.split('|').map((c) => c.trim())
      return {
        subjects: [...subjects.matchAll(/`([^`]+)`/g)].map((m) => m[1]!),
        publish: perm.includes('publish'),
        subscribe: perm.includes('subscribe'),
        denied: perm.includes('denied'),
      }
    })
}

/** A subject to try for a permission pattern: wildcards become a token nobody uses. */
const concrete = (s: string): string => s.replace(/>$/, 'permrole').replace(/\*/g, 'permrole')

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let base = ''
const conns: NatsConnection[] = []

async function as(user: 'gateway' | 'worker' | 'admin'): Promise<NatsConnection> {
  const nc = await connect({ servers: nats.url, user, pass: PASS[user] })
  conns.push(nc)
  return nc
}

/** The next `error` status of `nc`, or undefined after `ms`. */
function nextError(nc: NatsConnection, ms = 3_000): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(undefined), ms)
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'error') {
          clearTimeout(t)
          resolve(s.error)
          return
        }
      }
    })()
  })
}

beforeAll(async () => {
  // The same authorization block, with the passwords it reads from the environment given as
  // variables in front of it (nats-server resolves `$NAME` from earlier variables or the env).
  nats = await startNatsServer({
    extraConfig: `COHORT_NATS_GATEWAY_PASS: "${GATEWAY_PASS}"\nCOHORT_NATS_WORKER_PASS: "${WORKER_PASS}"\nCOHORT_NATS_ADMIN_PASS: "${ADMIN_PASS}"\n${AUTH_CONF}`,
  })
  worker = spawnCohort(['worker', '--nats', nats.url, '--nats-user', 'worker', '--id', 'w1', '--threads', '1', '--predictor', SLEEPY_PREDICTOR], { COHORT_NATS_PASS: WORKER_PASS })
  await worker.waitFor(/worker w1 serving sleepy/, 60_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--nats-user', 'gateway', '--nats-pass', GATEWAY_PASS, '--api-key', API_KEY, '--admin-key', ADMIN_KEY])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
})

afterAll(async () => {
  await Promise.all(conns.map((c) => c.close().catch(() => undefined)))
  await Promise.all(allStarted(worker, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

const auth = { authorization: `Bearer ${API_KEY}` }

describe('NATS permissions per role (infra/nats/auth.conf)', () => {
  it('serves requests end to end with the gateway and worker users', async () => {
    const ready = await fetch(`${base}/v2/health/ready`)
    expect(ready.status).toBe(200)
    const r = await postJson(`${base}/models/sleepy/predictions`, { input: { x: 21 } }, auth)
    expect(r.status).toBe(200)
    expect(r.body.output).toMatchObject({ y: 42 })
    const oip = await postJson(`${base}/v2/models/sleepy/infer`, { inputs: [{ name: 'x', datatype: 'FP64', shape: [2], data: [1, 2] }] }, auth)
    expect(oip.status).toBe(200)
    const meta = await fetch(`${base}/v2/models/sleepy`, { headers: auth })
    expect(meta.status).toBe(200)
    // The directory (KV cohort-models) is readable: an unknown model is 404, not 503.
    const unknown = await postJson(`${base}/models/nope/predictions`, { input: { x: 1 } }, auth)
    expect(unknown.status).toBe(404)
    expect(unknown.body.code).toBe('MODEL_NOT_FOUND')
    // Without the API key the gateway refuses before anything reaches NATS.
    expect((await postJson(`${base}/models/sleepy/predictions`, { input: { x: 1 } })).status).toBe(401)
  })

  it('lets the gateway write cohort-config and the worker follow it', async () => {
    const put = await fetch(`${base}/admin/models/sleepy/batching`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify({ maxBatchSize: 7 }),
    })
    expect(put.status).toBe(200)
    const until = Date.now() + 10_000
    let live = 0
    while (Date.now() < until) {
      const r = await fetch(`${base}/admin/models/sleepy/batching`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
      live = ((await r.json()) as { live: { maxBatchSize: number } }).live.maxBatchSize
      if (live === 7) {
        break
      }
      await new Promise((res) => setTimeout(res, 100))
    }
    expect(live).toBe(7)
  })

  it('refuses the worker user a publish on gateway-only subjects', async () => {
    const nc = await as('worker')
    const err = nextError(nc)
    nc.publish('cohort.cancel.sleepy', new Uint8Array(1))
    await nc.flush()
    const e = await err
    expect(e).toBeInstanceOf(PermissionViolationError)
    expect((e as PermissionViolationError).operation).toBe('publish')
    expect((e as PermissionViolationError).subject).toBe('cohort.cancel.sleepy')
    // A request on an inference subject fails with the violation as its cause.
    const req = await nc.request('cohort.infer.sleepy', new Uint8Array(1), { timeout: 3_000 }).then(
      () => undefined,
      (x: unknown) => x as Error,
    )
    expect(req?.cause ?? req).toBeInstanceOf(PermissionViolationError)
    // Nor may it change the runtime config.
    const kv = nextError(nc)
    nc.publish('$KV.cohort-config.sleepy', new TextEncoder().encode('{"maxBatchSize":1}'))
    await nc.flush()
    expect(((await kv) as PermissionViolationError | undefined)?.subject).toBe('$KV.cohort-config.sleepy')
  })

  it('never lets a gateway-role client make the worker write cohort-models (ack, Cohort-Blob and reply subjects)', async () => {
    // The confused deputy (docs/security.md#no-confused-deputy): the gateway user may not write the
    // bucket itself, so it tries to have the worker do it through the subjects a request names.
    const admin = await as('admin')
    const jsm = await jetstreamManager(admin)
    const before = (await jsm.streams.info('KV_cohort-models')).state
    const kv = await new Kvm(admin).open('cohort-models')
    const sleepyBefore = await kv.get('sleepy')
    const nc = await as('gateway')
    const req = (id: string, extra: Partial<InferRequest> = {}): Uint8Array =>
      encodeRequest({ v: 1, id, model: 'sleepy', deadline: Date.now() + 10_000, items: [{ x: 1 }], ...extra })

    // 1. An `ack` subject in the bucket: refused with a clear error, nothing published there.
    const acked = decodeReply((await nc.request('cohort.infer.sleepy', req('ack-trick', { ack: '$KV.cohort-models.planted-ack' }), { timeout: 5_000 })).data)
    expect(acked.error?.code).toBe('BAD_REQUEST')
    expect(acked.error?.message).toMatch(/ack subject .*is not an acceptance subject/)

    // 2. A Cohort-Blob reference whose chunk subject is in the bucket: refused, nothing requested.
    const h = headers()
    h.set('Cohort-Blob', 'v1 $KV.cohort-models.planted-blob 10 1024 5000')
    const blob = await nc.request('cohort.infer.sleepy', new Uint8Array(0), { timeout: 5_000, headers: h })
    expect(blob.headers?.get('Cohort-Blob-Error')).toMatch(/^BAD_REQUEST .*is not a chunk subject/)

    // 3. A reply subject in the bucket (an existing model's key): the request is dropped unanswered.
    nc.publish('cohort.infer.sleepy', req('reply-trick'), { reply: '$KV.cohort-models.sleepy' })
    // A later request on the same connection reaches the same worker after it and is answered.
    const ok = decodeReply((await nc.request('cohort.infer.sleepy', req('after'), { timeout: 5_000 })).data)
    expect(ok.items).toEqual([{ y: 2, batch: expect.any(Number) }])
    await admin.flush()

    const after = (await jsm.streams.info('KV_cohort-models')).state
    expect(after.last_seq).toBe(before.last_seq)
    expect(after.messages).toBe(before.messages)
    expect(await kv.get('planted-ack')).toBeNull()
    expect(await kv.get('planted-blob')).toBeNull()
    expect((await kv.get('sleepy'))?.revision).toBe(sleepyBefore?.revision)
    // The worker still serves through the gateway.
    const r = await postJson(`${base}/models/sleepy/predictions`, { input: { x: 4 } }, auth)
    expect(r.status).toBe(200)
  })

  it('refuses the gateway user a subscription to inference subjects', async () => {
    const nc = await as('gateway')
    for (const subject of ['cohort.infer.>', 'cohort.cancel.sleepy', 'cohort.discover']) {
      const sub = nc.subscribe(subject)
      const closed = await Promise.race([sub.closed, new Promise<string>((r) => setTimeout(() => r('still open'), 3_000))])
      expect(closed, subject).toBeInstanceOf(PermissionViolationError)
      expect((closed as PermissionViolationError).operation).toBe('subscription')
    }
    // What it may do still works on the same connection.
    const reply = await nc.request('cohort.meta.sleepy', new Uint8Array(0), { timeout: 3_000 })
    expect(reply.data.byteLength).toBeGreaterThan(0)
  })

  it('lets the gateway enqueue async predictions and the worker pull them (COHORT_JOBS, cohort-predictions)', async () => {
    // The calls of libs/transport/src/jobs.ts, each role with its own user, for a model no running
    // worker serves (the worker process would otherwise take the job first).
    const gw = await as('gateway')
    const gjsm = await jetstreamManager(gw)
    await gjsm.streams
      .info('COHORT_JOBS')
      .catch(() => gjsm.streams.add({ name: 'COHORT_JOBS', subjects: ['cohort.jobs.>'], retention: RetentionPolicy.Workqueue, num_replicas: 1 }))
    const gkv = await new Kvm(gw).create('cohort-predictions', { history: 1 })
    await gkv.create('perm-job-1', new TextEncoder().encode('{"status":"starting"}'))
    await jetstream(gw).publish('cohort.jobs.permcheck', new TextEncoder().encode('perm-job-1'), { msgID: 'perm-job-1' })

    const wk = await as('worker')
    const wjsm = await jetstreamManager(wk)
    await wjsm.consumers
      .info('COHORT_JOBS', 'jobs-permcheck')
      .catch(() => wjsm.consumers.add('COHORT_JOBS', { durable_name: 'jobs-permcheck', ack_policy: AckPolicy.Explicit, filter_subject: 'cohort.jobs.permcheck' }))
    const consumer = await jetstream(wk).consumers.get('COHORT_JOBS', 'jobs-permcheck')
    const ids: string[] = []
    for await (const m of await consumer.fetch({ max_messages: 1, expires: 3_000 })) {
      ids.push(m.string())
      m.ack()
    }
    expect(ids).toEqual(['perm-job-1'])
    const wkv = await new Kvm(wk).open('cohort-predictions')
    const e = await wkv.get('perm-job-1')
    expect(e?.string()).toBe('{"status":"starting"}')
    await wkv.update('perm-job-1', new TextEncoder().encode('{"status":"succeeded"}'), e!.revision)
    expect((await gkv.get('perm-job-1'))?.string()).toBe('{"status":"succeeded"}')
  })

  it('lets the admin user manage JetStream and query workers, nothing of the data path', async () => {
    const nc = await as('admin')
    const jsm = await jetstreamManager(nc)
    const names: string[] = []
    for await (const si of jsm.streams.list()) {
      names.push(si.config.name)
    }
    expect(names).toContain('KV_cohort-models')
    expect((await (await new Kvm(nc).open('cohort-models')).get('sleepy'))?.operation).toBe('PUT')
    const ping = await nc.request('$SRV.PING.cohort-worker', new Uint8Array(0), { timeout: 3_000 })
    expect(ping.json<{ id: string }>().id).toBe('w1')
    const meta = await nc.request('cohort.meta.sleepy', new Uint8Array(0), { timeout: 3_000 })
    expect(meta.data.byteLength).toBeGreaterThan(0)
  })

  // Every role, subject by subject, as docs/security.md#nats-permissions-per-role states it: each row
  // of a role's "may" table is allowed, each row of its "may not" table is refused. The tables are
  // read from the page, so the page and auth.conf cannot drift apart.
  for (const role of ['gateway', 'worker', 'admin'] as const) {
    const rows = roleRows(role)
    const may = rows.filter((r) => !r.denied)
    const mayNot = rows.filter((r) => r.denied)

    it(`lets the ${role} user publish and subscribe what docs/security.md says it may`, async () => {
      expect(may.length, `rows of the ${role} "may" table`).toBeGreaterThan(3)
      const nc = await as(role)
      const violations: string[] = []
      void (async () => {
        for await (const st of nc.status()) {
          if (st.type === 'error' && st.error instanceof PermissionViolationError) violations.push(`${st.error.operation} ${st.error.subject}`)
        }
      })()
      const subs = may.filter((r) => r.subscribe).flatMap((r) => r.subjects.map((x) => ({ subject: x, sub: nc.subscribe(concrete(x)) })))
      for (const r of may.filter((x) => x.publish)) {
        for (const x of r.subjects) nc.publish(concrete(x), new Uint8Array(0))
      }
      await nc.flush()
      await new Promise((r) => setTimeout(r, 500))
      await nc.flush()
      expect(violations, `${role}: refused although docs/security.md allows it`).toEqual([])
      for (const { subject, sub } of subs) {
        expect(sub.isClosed(), `subscribe ${subject}`).toBe(false)
        sub.unsubscribe()
      }
    })

    it(`refuses the ${role} user each subject docs/security.md says it may not use`, async () => {
      expect(mayNot.length, `rows of the ${role} "may not" table`).toBeGreaterThan(1)
      const nc = await as(role)
      for (const r of mayNot.filter((x) => x.publish)) {
        for (const subject of r.subjects) {
          const err = nextError(nc)
          nc.publish(subject, new Uint8Array(1))
          await nc.flush()
          const e = await err
          expect(e, `publish ${subject}`).toBeInstanceOf(PermissionViolationError)
          expect((e as PermissionViolationError).operation).toBe('publish')
          expect((e as PermissionViolationError).subject).toBe(subject)
        }
      }
      for (const r of mayNot.filter((x) => x.subscribe)) {
        for (const subject of r.subjects) {
          const sub = nc.subscribe(subject)
          const closed = await Promise.race([sub.closed, new Promise<string>((res) => setTimeout(() => res('still open'), 3_000))])
          expect(closed, `subscribe ${subject}`).toBeInstanceOf(PermissionViolationError)
          expect((closed as PermissionViolationError).operation).toBe('subscription')
        }
      }
      // The connection is still usable for what the role may do.
      expect(nc.isClosed()).toBe(false)
      await nc.flush()
    })
  }

  it('refuses connections without credentials or with a wrong password', async () => {
    await expect(connect({ servers: nats.url, reconnect: false })).rejects.toThrow(/Authorization Violation/)
    await expect(connect({ servers: nats.url, user: 'worker', pass: 'wrong', reconnect: false })).rejects.toThrow(/Authorization Violation/)
    const w = spawnCohort(['worker', '--nats', nats.url, '--nats-user', 'worker', '--nats-pass', 'wrong', '--predictor', SLEEPY_PREDICTOR])
    expect(await w.exited).toBe(1)
    expect(w.output().trim()).toMatch(/^cohort: cannot connect to NATS at .*Authorization Violation$/)
  })

  it('ships a server config that includes it (infra/nats/secure.conf)', async () => {
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        'nats-server',
        ['-c', `${NATS_DIR}secure.conf`, '-t'],
        { env: { ...process.env, COHORT_NATS_GATEWAY_PASS: 'a', COHORT_NATS_WORKER_PASS: 'b', COHORT_NATS_ADMIN_PASS: 'c' } },
        (e, so, se) => (e ? reject(new Error(`${e.message}\n${se}`)) : resolve(so + se)),
      ),
    )
    expect(out).toMatch(/valid/)
  })
})
