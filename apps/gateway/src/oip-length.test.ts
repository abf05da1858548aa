import { describe, expect, it } from 'vitest'
import { CohortError } from '@cohort/protocol'
import { parseInferBody } from './oip.ts'

const json = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } }] })
const X = 'x'
const body = new Uint8Array([...new TextEncoder().encode(json), 0, 0, 128, 63])

describe('Inference-Header-Content-Length', () => {
  it('takes a decimal integer within the body', () => {
    expect(Object.keys(parseInferBody(body, String(json.length)).tensors)).toEqual([X])
  })

  it.each(['0x46', `${json.length}.0`, `+${json.length}`, '1e2', '-0', ''])('refuses %j with 400 BAD_REQUEST (strict integer parsing)', (h) => {
    let err: unknown
    try {
      parseInferBody(body, h)
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(CohortError)
    expect((err as CohortError).code).toBe('BAD_REQUEST')
    expect((err as CohortError).message).toMatch(/Inference-Header-Content-Length/)
  })
})
