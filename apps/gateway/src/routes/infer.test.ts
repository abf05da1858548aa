// REST details of the OIP audit: exact INT64/UINT64 in JSON both ways and per-output binary_data
// overriding binary_data_output. An echo responder on an InProcessTransport plays the worker.
import { afterAll, describe, expect, it } from 'vitest'
import { decodeRequest, encodeReply, subjects, toValues, type InferRequest } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { createApp } from '../app.ts'

const subj = subjects()
const transport = new InProcessTransport()
const seen: InferRequest[] = []
const sub = transport.subscribe(subj.infer('echo'), { queue: subj.queue('echo') })
void (async () => {
  for await (const m of sub) {
    const req = decodeRequest(m.data)
    seen.push(req)
    const tensors = req.outputs ? Object.fromEntries(req.outputs.map((n) => [n, req.tensors![n.replace('out', 'in')]!])) : req.tensors
    m.respond(encodeReply({ v: 1, id: req.id, tensors: tensors ?? {} }))
  }
})()
const app = createApp({ transport, metaTimeoutMs: 60 })

afterAll(async () => {
  sub.unsubscribe()
  await transport.close()
})

const post = (body: string) => app.request('/v2/models/echo/infer', { method: 'POST', body, headers: { 'content-type': 'application/json' } })

describe('OIP JSON with 64-bit integers', () => {
  it('keeps INT64 and UINT64 beyond 2^53 exact on the way in and out', async () => {
    const body =
      '{"inputs":[{"name":"i","datatype":"INT64","shape":[3],"data":[-9223372036854775808,9007199254740993,1]},' +
      '{"name":"u","datatype":"UINT64","shape":[3],"data":[18446744073709551615,9007199254740993,0]},' +
      '{"name":"f","datatype":"FP64","shape":[3],"data":[12345678901234567890,0.12345678901234567891,2]}]}'
    const res = await post(body)
    expect(res.status).toBe(200)
    const req = seen.at(-1)!
    expect(Array.from(toValues(req.tensors!['i']!) as BigInt64Array)).toEqual([-(2n ** 63n), 9007199254740993n, 1n])
    expect(Array.from(toValues(req.tensors!['u']!) as BigUint64Array)).toEqual([2n ** 64n - 1n, 9007199254740993n, 0n])
    expect(Array.from(toValues(req.tensors!['f']!) as Float64Array)).toEqual([12345678901234567890, 0.12345678901234567891, 2])
    const text = await res.text()
    expect(text).toContain('"data":[-9223372036854775808,9007199254740993,1]')
    expect(text).toContain('"data":[18446744073709551615,9007199254740993,0]')
    expect(JSON.parse(text).outputs.map((o: { name: string }) => o.name)).toEqual(['i', 'u', 'f'])
  })

  it('answers 400 for an INT64 literal out of range', async () => {
    const res = await post('{"inputs":[{"name":"i","datatype":"INT64","shape":[1],"data":[9223372036854775808]}]}')
    expect(res.status).toBe(400)
  })
})

describe('binary outputs', () => {
  it("an output's binary_data: false wins over binary_data_output: true", async () => {
    const body = JSON.stringify({
      inputs: [
        { name: 'in_a', datatype: 'INT32', shape: [2], data: [1, 2] },
        { name: 'in_b', datatype: 'INT32', shape: [2], data: [3, 4] },
      ],
      outputs: [{ name: 'out_a', parameters: { binary_data: false } }, { name: 'out_b' }],
      parameters: { binary_data_output: true },
    })
    const res = await post(body)
    expect(res.status).toBe(200)
    const n = Number(res.headers.get('inference-header-content-length'))
    const bytes = new Uint8Array(await res.arrayBuffer())
    const head = JSON.parse(new TextDecoder().decode(bytes.subarray(0, n)))
    expect(head.outputs).toEqual([
      { name: 'out_a', datatype: 'INT32', shape: [2], data: [1, 2] },
      { name: 'out_b', datatype: 'INT32', shape: [2], parameters: { binary_data_size: 8 } },
    ])
    expect(Array.from(new Int32Array(bytes.slice(n).buffer))).toEqual([3, 4])
  })

  it('answers 400 for a non-boolean binary_data', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'in_a', datatype: 'INT32', shape: [1], data: [1] }], outputs: [{ name: 'out_a', parameters: { binary_data: 'yes' } }] })
    expect((await post(body)).status).toBe(400)
  })
})
