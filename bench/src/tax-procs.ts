import { createServer } from 'node:http'
import { connect } from '@nats-io/transport-node'

/**
 * The helper processes of `cohort bench tax` (started by tax.ts as `cohort-bench tax-<role> ...`),
 * each in its own process so its CPU time can be read from /proc on its own.
 * @module
 */

/**
 * `tax-http-floor`: the bare node:http floor. Parses the OIP JSON body and answers the same
 * tensor as an OIP response, as `cohort serve` does for an Identity model, with nothing else.
 * Prints `listening on PORT`.
 */
export function httpFloorMain(): Promise<void> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (d: Buffer) => chunks.push(d))
    req.on('end', () => {
      let out: string
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { inputs: { name: string; datatype: string; shape: number[]; data: number[] }[] }
        const i = body.inputs[0]
        if (i === undefined) {
          throw new Error('no input')
        }
        out = JSON.stringify({ model_name: 'floor', model_version: '1', outputs: [{ name: 'out', datatype: i.datatype, shape: i.shape, data: i.data }] })
      } catch {
        res.writeHead(400).end('{"error":"bad body"}')
        return
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out)
    })
  })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const a = server.address()
      console.log(`listening on ${typeof a === 'object' && a ? a.port : 0}`)
    })
    process.once('SIGTERM', () => server.close(() => resolve()))
  })
}

/** `tax-nats-responder URL`: answers every request on `floor` (queue group) with its own bytes. */
export async function natsResponderMain(url: string): Promise<void> {
  const nc = await connect({ servers: url })
  const sub = nc.subscribe('floor', {
    queue: 'floor',
    callback: (_e, m) => {
      m.respond(m.data)
    },
  })
  console.log('responding')
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()))
  sub.unsubscribe()
  await nc.drain()
}

/**
 * `tax-nats-requester URL INFLIGHT SECONDS BYTES`: plain nats.js request-reply (muxed inbox, the
 * client's defaults), INFLIGHT requests of BYTES bytes in flight for SECONDS. Waits for a line on
 * stdin before starting (so the parent can read CPU counters first), then prints one JSON line
 * `{requests, seconds, p50Ms}`.
 */
export async function natsRequesterMain(url: string, inflight: number, seconds: number, bytes: number): Promise<void> {
  const nc = await connect({ servers: url })
  const data = new Uint8Array(bytes).fill(120)
  // Warm-up, outside the measured window.
  for (let i = 0; i < 200; i++) {
    await nc.request('floor', data, { timeout: 5000 })
  }
  console.log('ready')
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()))
  const lat: number[] = []
  const t0 = performance.now()
  const until = t0 + seconds * 1000
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (performance.now() < until) {
        const s = performance.now()
        await nc.request('floor', data, { timeout: 5000 })
        lat.push(performance.now() - s)
      }
    }),
  )
  const elapsed = (performance.now() - t0) / 1000
  lat.sort((a, b) => a - b)
  console.log(JSON.stringify({ requests: lat.length, seconds: elapsed, p50Ms: lat[Math.floor(lat.length / 2)] ?? Number.NaN }))
  await nc.drain()
}

/**
 * `tax-grpc-load ADDR MODEL INPUT FEATURES ROWS RAW INFLIGHT SECONDS`: the gRPC load generator
 * (@grpc/grpc-js, one channel, the client's defaults): INFLIGHT unary `ModelInfer` calls in flight
 * for SECONDS, each one FP32 tensor [ROWS, FEATURES] in `raw_input_contents` (RAW = 1, as Triton's
 * clients send) or in `contents.fp32_contents` (RAW = 0). Like the nats.js requester it warms up,
 * prints `ready`, waits for a line on stdin, then prints one JSON line `{requests, seconds, p50Ms}`.
 */
export async function grpcLoadMain(args: string[]): Promise<void> {
  const [addr, model, input, features, rows, raw, inflight, seconds] = args as [string, string, string, string, string, string, string, string]
  const grpc = await import('@grpc/grpc-js')
  const protoLoader = await import('@grpc/proto-loader')
  const { PROTO_DIR } = await import('@cohort/gateway/grpc')
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
  const Service = (
    grpc.loadPackageDefinition(def) as unknown as {
      inference: { GRPCInferenceService: new (a: string, c: unknown) => { ModelInfer: (req: unknown, cb: (e: Error | null, r: unknown) => void) => void; close(): void } }
    }
  ).inference.GRPCInferenceService
  const client = new Service(addr, grpc.credentials.createInsecure())
  const n = Number(rows) * Number(features)
  const data = Array.from({ length: n }, (_, i) => Math.fround(Math.sin(i)))
  const tensor = { name: input, datatype: 'FP32', shape: [Number(rows), Number(features)] }
  const req =
    raw === '1'
      ? { model_name: model, inputs: [tensor], raw_input_contents: [Buffer.from(Float32Array.from(data).buffer)] }
      : { model_name: model, inputs: [{ ...tensor, contents: { fp32_contents: data } }] }
  const call = () => new Promise<void>((resolve, reject) => client.ModelInfer(req, (e) => (e ? reject(e) : resolve())))
  for (let i = 0; i < 200; i++) {
    await call()
  }
  console.log('ready')
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()))
  const lat: number[] = []
  const t0 = performance.now()
  const until = t0 + Number(seconds) * 1000
  await Promise.all(
    Array.from({ length: Number(inflight) }, async () => {
      while (performance.now() < until) {
        const s = performance.now()
        await call()
        lat.push(performance.now() - s)
      }
    }),
  )
  const elapsed = (performance.now() - t0) / 1000
  lat.sort((a, b) => a - b)
  console.log(JSON.stringify({ requests: lat.length, seconds: elapsed, p50Ms: lat[Math.floor(lat.length / 2)] ?? Number.NaN }))
  client.close()
}
