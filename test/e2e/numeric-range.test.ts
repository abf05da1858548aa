// Values past their datatype's range (docs/errors.md, BAD_REQUEST), over real NATS with a gateway and
// a worker process serving the identity model of every datatype: 1e39 in FP32 (stored as Infinity,
// as 1e400 would be), 65520 in FP16, and integers one past each integer type's range are refused
// 400 naming the input, the element and the range, like non-finite values; the largest value of
// each type (and what rounds to it) is served 200 with that value back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { rmSync } from 'node:fs'
import { postJson, spawnCohort, startNatsServer, writeModelFixtures, type CliProcess, type ModelFixtures, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let fx: ModelFixtures
let base = ''

beforeAll(async () => {
  fx = writeModelFixtures()
  nats = await startNatsServer()
  worker = spawnCohort(['worker', '--nats', nats.url, '--threads', '1', '--model', `identity=${fx.identity}`])
  await worker.waitFor(/serving identity/, 60_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
})

afterAll(async () => {
  await Promise.all(allStarted(worker, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
  rmSync(fx.dir, { recursive: true, force: true })
})

/** Valid values for every input (shape [1, 2]); `over` replaces some. */
const GOOD: Record<string, unknown[]> = {
  BOOL: [true, false],
  UINT8: [0, 1],
  INT8: [0, 1],
  UINT16: [0, 1],
  INT16: [0, 1],
  UINT32: [0, 1],
  INT32: [0, 1],
  INT64: [0, 1],
  UINT64: [0, 1],
  FP16: [0, 1],
  FP32: [0, 1],
  FP64: [0, 1],
  BYTES: ['a', 'b'],
}
const infer = (over: Record<string, unknown[]>) =>
  postJson(`${base}/v2/models/identity/infer`, {
    inputs: Object.entries({ ...GOOD, ...over }).map(([dt, data]) => ({ name: `in_${dt}`, datatype: dt, shape: [1, 2], data })),
  })

describe('values past their datatype', () => {
  const refused: [string, number | string, RegExp][] = [
    ['FP32', 1e39, /finite number within ±3\.4028234663852886e\+38 for FP32, got 1e\+39/],
    ['FP32', -1e39, /for FP32/],
    ['FP16', 65520, /finite number within ±65504 for FP16, got 65520/],
    ['INT8', 128, /integer in \[-128, 127\]/],
    ['INT8', -129, /INT8/],
    ['UINT8', 256, /UINT8/],
    ['UINT8', -1, /UINT8/],
    ['INT16', 32768, /INT16/],
    ['UINT16', 65536, /UINT16/],
    ['INT32', 2 ** 31, /INT32/],
    ['UINT32', 2 ** 32, /UINT32/],
    ['INT64', '9223372036854775808', /INT64/],
    ['UINT64', '18446744073709551616', /UINT64/],
    ['UINT64', -1, /UINT64/],
  ]
  for (const [dt, v, re] of refused) {
    it(`refuses ${String(v)} in ${dt} with 400 naming the input and the range`, async () => {
      const r = await infer({ [dt]: [0, v] })
      expect(r.status, JSON.stringify(r.body)).toBe(400)
      expect(r.body.code).toBe('BAD_REQUEST')
      expect(String(r.body.error)).toMatch(new RegExp(`input "in_${dt}": element 1`))
      expect(String(r.body.error)).toMatch(re)
    })
  }

  it('refuses 1e400 (past the double range) the same way', async () => {
    const r = await postJson(
      `${base}/v2/models/identity/infer`,
      `{"inputs":[${Object.entries(GOOD)
        .map(([dt, d]) => `{"name":"in_${dt}","datatype":"${dt}","shape":[1,2],"data":${dt === 'FP32' ? '[0,1e400]' : JSON.stringify(d)}}`)
        .join(',')}]}`,
    )
    expect(r.status).toBe(400)
    expect(r.body.code).toBe('BAD_REQUEST')
  })

  it('serves the largest value of each type, and what rounds to it, with 200', async () => {
    const r = await infer({
      FP32: [3.4028234663852886e38, -3.4028235e38],
      FP16: [65504, -65519],
      FP64: [Number.MAX_VALUE, -Number.MAX_VALUE],
      INT8: [-128, 127],
      UINT8: [0, 255],
      INT16: [-32768, 32767],
      UINT16: [0, 65535],
      INT32: [-(2 ** 31), 2 ** 31 - 1],
      UINT32: [0, 2 ** 32 - 1],
    })
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    const out = (dt: string) => (r.body.outputs as { name: string; data: unknown[] }[]).find((o) => o.name === `out_${dt}`)?.data
    expect(out('FP32')).toEqual([3.4028234663852886e38, -3.4028234663852886e38])
    expect(out('FP16')).toEqual([65504, -65504])
    expect(out('FP64')).toEqual([Number.MAX_VALUE, -Number.MAX_VALUE])
    expect(out('INT8')).toEqual([-128, 127])
    expect(out('UINT32')).toEqual([0, 2 ** 32 - 1])
  })
})
