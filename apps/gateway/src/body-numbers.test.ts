import { describe, expect, it } from 'vitest'
import { hasNonFinite, maybeHugeNumber, rejectNonFinite } from './body.ts'
import { parseInferBody } from './oip.ts'

const bytes = (s: string) => new TextEncoder().encode(s)

describe('hasNonFinite: the walk of a parsed value that replaced the text scan on the infer path', () => {
  it('agrees with JSON.parse about every number it was given, nested in arrays and objects', () => {
    expect(hasNonFinite(JSON.parse('{"a":[1,2.5,[-3e300]],"b":{"c":[0.1]},"s":"1e400"}'))).toBe(false)
    expect(hasNonFinite(JSON.parse('{"a":[1,[2,[3,1e400]]]}'))).toBe(true)
    expect(hasNonFinite(JSON.parse('{"p":{"q":{"r":-1e999}}}'))).toBe(true)
    expect(hasNonFinite(JSON.parse('1e400'))).toBe(true)
    expect(hasNonFinite(JSON.parse('null'))).toBe(false)
    // Text that the scan flags (an exponent in a string) parses to finite values: no second parse.
    const text = '{"s":"1e999","n":[1]}'
    expect(maybeHugeNumber(text)).toBe(true)
    expect(hasNonFinite(JSON.parse(text))).toBe(false)
  })

  it('rejectNonFinite with the parsed value names where, as the text scan did', () => {
    const text = '{"inputs":[{"name":"x","data":[1,1e400]}]}'
    expect(() => rejectNonFinite(text, { value: JSON.parse(text) })).toThrow(/beyond the double range/)
    expect(() => rejectNonFinite(text)).toThrow(/beyond the double range/)
    expect(() => rejectNonFinite('{"a":[1e308]}', { value: JSON.parse('{"a":[1e308]}') })).not.toThrow()
  })
})

describe('parseInferBody: the exact parse only for bodies that name INT64/UINT64', () => {
  it('a float body with 17-digit fractions parses as JSON.parse does', () => {
    const data = [0.12345678901234567, -0.9876543210987654, 1.2345678901234567e-8, 12345678901234567890]
    const r = parseInferBody(bytes(JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP64', shape: [4], data }] })), undefined)
    expect(Array.from(new Float64Array(r.tensors['x']!.bytes.slice().buffer))).toEqual(data)
  })

  it('keeps INT64 beyond 2^53 exact, and refuses a literal past the double range in either kind of body', () => {
    const r = parseInferBody(bytes('{"inputs":[{"name":"i","datatype":"INT64","shape":[2],"data":[9007199254740993,-9223372036854775808]}]}'), undefined)
    const t = r.tensors['i']!
    expect(Array.from(new BigInt64Array(t.bytes.slice().buffer))).toEqual([9007199254740993n, -9223372036854775808n])
    expect(() => parseInferBody(bytes('{"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,1e400]}]}'), undefined)).toThrow(/beyond the double range/)
    // An exact parse keeps a 400-digit integer as text: the text scan still finds it.
    const huge = '1' + '0'.repeat(400)
    expect(() =>
      parseInferBody(bytes(`{"inputs":[{"name":"i","datatype":"INT64","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[${huge}]}]}`), undefined),
    ).toThrow(/beyond the double range/)
  })
})
