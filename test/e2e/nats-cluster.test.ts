// The local 3-node NATS cluster (infra/nats/cluster, started by infra/scripts/cluster-up.sh on free
// ports): workers on nodes 1 and 2 and a gateway on node 3, each with its own NATS user, serve
// requests across the routes; the KV buckets get 3 replicas; the websocket listener answers.
import { connect as netConnect } from 'node:net'
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { SLEEPY_PREDICTOR, postJson, spawnCohort, startNatsCluster, type CliProcess, type NatsClusterHandle, ifStarted } from '@cohort/test-support'

let cluster: NatsClusterHandle
let procs: CliProcess[] = []
let admin: NatsConnection | undefined
let base = ''

beforeAll(async () => {
  cluster = await startNatsCluster()
  const [n1, n2, n3] = cluster.nodes
  const worker = (id: string, url: string) =>
    spawnCohort(['worker', '--nats', url, '--nats-user', 'worker', '--kv-replicas', '3', '--id', id, '--threads', '1', '--predictor', SLEEPY_PREDICTOR], {
      COHORT_NATS_PASS: cluster.passwords.worker,
    })
  procs = [worker('c1', n1!.url), worker('c2', n2!.url)]
  await Promise.all(procs.map((p, i) => p.waitFor(new RegExp(`worker c${i + 1} serving sleepy`), 60_000)))
  const gw = spawnCohort(['gateway', '--nats', n3!.url, '--port', '0', '--nats-user', 'gateway', '--kv-replicas', '3', '--drain-ms', '0'], {
    COHORT_NATS_PASS: cluster.passwords.gateway,
  })
  procs.push(gw)
  const [, port] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
})

afterAll(async () => {
  await admin?.close().catch(() => undefined)
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await ifStarted(cluster)?.stop()
})

describe('3-node NATS cluster (infra/nats/cluster, infra/scripts/cluster-*.sh)', () => {
  it('reports every node healthy, routed to the others, with a JetStream meta leader', async () => {
    const r = await cluster.check()
    expect(r.code, r.out).toBe(0)
    for (const n of cluster.nodes) {
      expect(r.out).toMatch(new RegExp(`node ${n.index}: ok \\(\\{"status":"ok"\\}, 2 routes, "leader": "cohort-n\\d"\\)`))
    }
  })

  it('serves requests through a gateway on node 3 from workers on nodes 1 and 2', async () => {
    const xs = Array.from({ length: 60 }, (_, i) => i)
    // In waves of 5: requests of one event-loop turn travel in one pack (docs/protocol.md#protocol-v2),
    // so 12 waves are 12 or more messages for the queue group to spread, not a handful.
    const replies: Awaited<ReturnType<typeof postJson>>[] = []
    for (let i = 0; i < xs.length; i += 5) {
      replies.push(...(await Promise.all(xs.slice(i, i + 5).map((x) => postJson(`${base}/models/sleepy/predictions`, { input: { x } })))))
    }
    replies.forEach((r, x) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(r.body.output.y).toBe(2 * x)
    })
    // Both workers took a share: ask each one over $SRV (the admin user may).
    admin = await connect({ servers: cluster.nodes[0]!.url, user: 'admin', pass: cluster.passwords.admin })
    const enc = new TextEncoder()
    const served: Record<string, number> = {}
    for (const id of ['c1', 'c2']) {
      const m = await admin.request(`$SRV.STATS.cohort-worker.${id}`, enc.encode(''), { timeout: 5_000 })
      const stats = m.json<{ endpoints: { num_requests: number }[] }>()
      served[id] = stats.endpoints.reduce((s, e) => s + e.num_requests, 0)
    }
    expect(served['c1']! + served['c2']!, JSON.stringify(served)).toBeGreaterThanOrEqual(60)
    expect(served['c1'], JSON.stringify(served)).toBeGreaterThan(0)
    expect(served['c2'], JSON.stringify(served)).toBeGreaterThan(0)
    // An unknown model: 404 from the replicated cohort-models bucket, read on node 3.
    const unknown = await postJson(`${base}/models/nope/predictions`, { input: { x: 1 } })
    expect(unknown.status).toBe(404)
  })

  it('creates the KV buckets with 3 replicas (--kv-replicas 3)', async () => {
    admin ??= await connect({ servers: cluster.nodes[0]!.url, user: 'admin', pass: cluster.passwords.admin })
    const jsm = await jetstreamManager(admin)
    // The gateway creates cohort-config on its first admin write.
    const put = await fetch(`${base}/admin/models/sleepy/batching`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ maxBatchSize: 16 }),
    })
    expect(put.status).toBe(200)
    for (const stream of ['KV_cohort-models', 'KV_cohort-config']) {
      const si = await jsm.streams.info(stream)
      expect(si.config.num_replicas, stream).toBe(3)
      expect(si.cluster?.leader, stream).toMatch(/^cohort-n[123]$/)
      expect(si.cluster?.replicas?.length, stream).toBe(2)
    }
  })

  it('accepts websocket clients (ws:// listener on every node)', async () => {
    for (const n of cluster.nodes) {
      const first = await wsFirstFrame(n.wsPort)
      expect(first.status).toMatch(/^HTTP\/1\.1 101/)
      expect(first.payload).toMatch(/^INFO \{.*"server_name":"cohort-n\d"/)
    }
  })
})

/** Open a websocket to 127.0.0.1:port by hand (Node 20 has no WebSocket) and read its first frame. */
function wsFirstFrame(port: number): Promise<{ status: string; payload: string }> {
  return new Promise((resolve, reject) => {
    const s = netConnect(port, '127.0.0.1')
    const timer = setTimeout(() => {
      s.destroy()
      reject(new Error(`no websocket answer on port ${port}`))
    }, 5_000)
    let buf = Buffer.alloc(0)
    s.on('error', reject)
    s.on('connect', () =>
      s.write(
        [
          'GET / HTTP/1.1',
          `Host: 127.0.0.1:${port}`,
          'Upgrade: websocket',
          'Connection: Upgrade',
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
          'Sec-WebSocket-Version: 13',
          '',
          '',
        ].join('\r\n'),
      ),
    )
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) {
        return
      }
      const status = buf.subarray(0, buf.indexOf('\r\n')).toString()
      const frame = buf.subarray(end + 4)
      if (frame.length < 2) {
        return
      }
      // Server frames are unmasked; a 7-bit or 16-bit length is enough for INFO.
      let len = frame[1]! & 0x7f
      let off = 2
      if (len === 126) {
        if (frame.length < 4) {
          return
        }
        len = frame.readUInt16BE(2)
        off = 4
      }
      if (frame.length < off + len) {
        return
      }
      clearTimeout(timer)
      s.destroy()
      resolve({ status, payload: frame.subarray(off, off + len).toString() })
    })
  })
}
