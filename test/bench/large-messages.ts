// Large messages over NATS: a request and an echoed reply of SIZE bytes, chunked (server with the
// default 1 MiB max_payload) versus one message each (a server whose max_payload fits it), side by
// side on the same machine. Prints mean round-trip times and their ratio.
//   node --import tsx test/bench/large-messages.ts [SIZE_BYTES=4915200] [ROUNDS=30]
import { connect } from '@nats-io/transport-node'
import { createNatsTransport, type Transport } from '@cohort/transport'
import { startNatsServer } from '@cohort/test-support'

const size = Number(process.argv[2] ?? 640 * 640 * 3 * 4)
const rounds = Number(process.argv[3] ?? 30)

async function pair(url: string): Promise<{ a: Transport; b: Transport }> {
  const a = createNatsTransport(await connect({ servers: url }), { ownsConnection: true })
  const b = createNatsTransport(await connect({ servers: url }), { ownsConnection: true })
  const sub = b.subscribe('bench.echo')
  void (async () => {
    for await (const m of sub) {
      m.respond(m.data)
    }
  })()
  await new Promise((r) => setTimeout(r, 100))
  return { a, b }
}

async function run(a: Transport, data: Uint8Array): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await a.request('bench.echo', data, { timeoutMs: 30_000 }) // warm-up
  }
  const t0 = performance.now()
  for (let i = 0; i < rounds; i++) {
    const r = await a.request('bench.echo', data, { timeoutMs: 30_000 })
    if (r.byteLength !== data.byteLength) {
      throw new Error('wrong size')
    }
  }
  return (performance.now() - t0) / rounds
}

const data = new Uint8Array(size).map((_, i) => i & 0xff)
const chunkedServer = await startNatsServer({ jetstream: false })
const singleServer = await startNatsServer({ jetstream: false, maxPayload: Math.max(size + 64 * 1024, 1024 * 1024) })
try {
  const chunked = await pair(chunkedServer.url)
  const single = await pair(singleServer.url)
  // Alternate so both see the same background load.
  const c: number[] = []
  const s: number[] = []
  for (let k = 0; k < 3; k++) {
    c.push(await run(chunked.a, data))
    s.push(await run(single.a, data))
  }
  const mean = (x: number[]) => x.reduce((p, v) => p + v, 0) / x.length
  console.log(`size ${size} bytes, ${rounds} rounds x 3, request + echoed reply`)
  console.log(`one message each (max_payload ${size + 64 * 1024}): ${mean(s).toFixed(2)} ms per round trip`)
  console.log(`chunked (max_payload 1 MiB, ${Math.ceil(size / (1024 * 1024 - 4096))} chunks each way): ${mean(c).toFixed(2)} ms per round trip`)
  console.log(`ratio chunked / one message: ${(mean(c) / mean(s)).toFixed(2)}`)
  await Promise.all([chunked.a.close(), chunked.b.close(), single.a.close(), single.b.close()])
} finally {
  await chunkedServer.stop()
  await singleServer.stop()
}
