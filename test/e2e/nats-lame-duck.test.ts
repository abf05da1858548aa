// NATS lame-duck mode under steady traffic: in the local 3-node cluster, the gateway and one worker
// are connected to node 1 (given only its URL: they learn the others from the cluster), a second
// worker to node 2. While requests flow, node 1 enters lame-duck mode (`nats-server --signal
// ldm=PID`, as the Kubernetes preStop hook does); it closes its clients over lame_duck_duration and
// exits. Every request must get an answer, each one its own: a success or a clear, retryable 503
// (WORKER_LOST: the request went to the worker's closing connection and was never accepted;
// REPLY_LOST: its reply was published while the gateway's own connection was between servers).
// None is lost or hangs until its deadline, and at most the requests in flight when a connection
// moved may fail. Afterwards both clients work from other nodes. The counts are printed
// (docs/reliability.md records them).
import { execFile } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect } from '@nats-io/transport-node'
import { SLEEPY_PREDICTOR, postJson, spawnCohort, startNatsCluster, type CliProcess, type NatsClusterHandle, ifStarted } from '@cohort/test-support'

/** Deadline of each request (x-cohort-timeout-ms); a hang would exceed it. */
const REQUEST_TIMEOUT_MS = 10_000
const CLIENTS = 4

let cluster: NatsClusterHandle
let procs: CliProcess[] = []
let base = ''

beforeAll(async () => {
  cluster = await startNatsCluster()
  const [n1, n2] = cluster.nodes
  const worker = (id: string, url: string) =>
    spawnCohort(['worker', '--nats', url, '--nats-user', 'worker', '--kv-replicas', '3', '--id', id, '--threads', '1', '--predictor', SLEEPY_PREDICTOR], {
      COHORT_NATS_PASS: cluster.passwords.worker,
    })
  procs = [worker('l1', n1!.url), worker('l2', n2!.url)]
  await Promise.all(procs.map((p, i) => p.waitFor(new RegExp(`worker l${i + 1} serving sleepy`), 60_000)))
  const gw = spawnCohort(['gateway', '--nats', n1!.url, '--port', '0', '--nats-user', 'gateway', '--kv-replicas', '3'], {
    COHORT_NATS_PASS: cluster.passwords.gateway,
  })
  procs.push(gw)
  const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
}, 120_000)

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await ifStarted(cluster)?.stop()
})

interface Outcome {
  x: number
  status: number
  code?: string
  y?: number
  ms: number
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('NATS lame-duck mode on the node the gateway and a worker use', () => {
  it('answers every request during and after the move to the other nodes', async () => {
    const n1 = cluster.nodes[0]!
    const pid = n1.pid()
    const outcomes: Outcome[] = []
    let stop = false
    let next = 0
    const loop = async () => {
      while (!stop) {
        const x = next++
        const t0 = Date.now()
        let o: Outcome
        try {
          const r = await postJson(`${base}/models/sleepy/predictions`, { input: { x } }, { 'x-cohort-timeout-ms': String(REQUEST_TIMEOUT_MS) })
          o = { x, status: r.status, code: r.body?.code, y: r.body?.output?.y, ms: Date.now() - t0 }
        } catch (e) {
          o = { x, status: 0, code: `HTTP ${e instanceof Error ? e.message : String(e)}`, ms: Date.now() - t0 }
        }
        outcomes.push(o)
        if (o.status !== 200) {
          await new Promise((r) => setTimeout(r, 100)) // a client backs off before retrying
        }
      }
    }
    const loops = Array.from({ length: CLIENTS }, loop)
    await new Promise((r) => setTimeout(r, 1_500))
    const before = outcomes.length
    const ldmAt = Date.now()
    const sent = await new Promise<string>((resolve) =>
      execFile('nats-server', ['--signal', `ldm=${pid}`], (e, so, se) => resolve(e ? `failed: ${e.message} ${se}` : `${so}${se}`)),
    )
    expect(sent).not.toMatch(/failed/)
    // Node 1 closes its clients over lame_duck_duration (30 s, after a 2 s grace) and exits.
    while (alive(pid) && Date.now() - ldmAt < 60_000) {
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(alive(pid), 'node 1 still runs 60 s after lame-duck mode').toBe(false)
    const exitedAfterMs = Date.now() - ldmAt
    await new Promise((r) => setTimeout(r, 2_000))
    stop = true
    await Promise.all(loops)

    const during = outcomes.slice(before)
    const byCode = new Map<string, number>()
    for (const o of during) {
      const k = o.status === 200 ? '200' : `${o.status} ${o.code ?? ''}`
      byCode.set(k, (byCode.get(k) ?? 0) + 1)
    }
    const failed = during.filter((o) => o.status !== 200)
    console.log(
      `lame duck: node 1 exited ${exitedAfterMs} ms after ldm; ${during.length} requests from ldm to the end, ` +
        `${failed.length} not 200: ${JSON.stringify(Object.fromEntries(byCode))}; slowest ${Math.max(...during.map((o) => o.ms))} ms`,
    )
    // Traffic went on the whole time.
    expect(during.length).toBeGreaterThan(40)
    // Every answer is its own, and none hung past its deadline.
    for (const o of outcomes) {
      expect(o.ms, JSON.stringify(o)).toBeLessThan(REQUEST_TIMEOUT_MS + 3_000)
      if (o.status === 200) {
        expect(o.y, JSON.stringify(o)).toBe(2 * o.x)
      } else {
        // A clear, retryable 503, never a 504 at the deadline (a lost reply) nor a 500.
        expect(o.status, JSON.stringify(o)).toBe(503)
        expect(['WORKER_LOST', 'REPLY_LOST', 'NO_WORKER'], JSON.stringify(o)).toContain(o.code)
        expect(o.ms, JSON.stringify(o)).toBeLessThan(REQUEST_TIMEOUT_MS)
      }
    }
    // Losses are bounded by what was in flight when a connection moved: at most CLIENTS requests
    // when the gateway's connection moved, and as many when the worker's did.
    expect(failed.length, JSON.stringify(failed)).toBeLessThanOrEqual(2 * CLIENTS)
    // Afterwards: the gateway serves, and both workers answer $SRV from the remaining nodes.
    const after = await postJson(`${base}/models/sleepy/predictions`, { input: { x: 7 } })
    expect(after.status).toBe(200)
    expect(after.body.output.y).toBe(14)
    const admin = await connect({ servers: cluster.nodes[1]!.url, user: 'admin', pass: cluster.passwords.admin })
    try {
      const ids = new Set<string>()
      for (const id of ['l1', 'l2']) {
        const m = await admin.request(`$SRV.PING.cohort-worker.${id}`, new Uint8Array(0), { timeout: 5_000 })
        ids.add(m.json<{ id: string }>().id)
      }
      expect([...ids].sort()).toEqual(['l1', 'l2'])
    } finally {
      await admin.close()
    }
  }, 120_000)
})
