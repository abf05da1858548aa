import { describe, expect, it } from 'vitest'
import { BigLiteral, exactData, hasLongDigits, parseJsonExact, stringifyWithRaw } from './json-exact.ts'
import { maybeHugeNumber } from './body.ts'

describe('parseJsonExact', () => {
  it('parses ordinary bodies like JSON.parse, without the slow path', () => {
    const text = '{"a":[1,2.5,-3e4],"s":"x","n":null}'
    expect(parseJsonExact(text)).toEqual({ value: JSON.parse(text), hasBig: false })
  })

  it('keeps integers beyond 2^53 exact and leaves long fractions, exponents and strings alone', () => {
    const text = '{"d":[-4611686018427387904, 9223372036854775813, 0.33333333333333331, 1.5e-7, 12345678901234567e2],"s":"99999999999999999999","t":"q\\"12345678901234567890"}'
    const { value, hasBig } = parseJsonExact(text)
    expect(hasBig).toBe(true)
    const v = value as { d: unknown[]; s: string; t: string }
    expect(v.d[0]).toEqual(new BigLiteral('-4611686018427387904'))
    expect(v.d[1]).toEqual(new BigLiteral('9223372036854775813'))
    expect(v.d.slice(2)).toEqual([0.33333333333333331, 1.5e-7, 12345678901234567e2])
    expect(v.s).toBe('99999999999999999999')
    expect(v.t).toBe('q"12345678901234567890')
  })

  it('leaves safe 16-digit integers as numbers', () => {
    expect(parseJsonExact('[1234567890123456]')).toEqual({ value: [1234567890123456], hasBig: false })
  })

  it('throws SyntaxError on bad JSON on both paths', () => {
    expect(() => parseJsonExact('{"a":')).toThrow(SyntaxError)
    expect(() => parseJsonExact('{"a":12345678901234567890')).toThrow(SyntaxError)
  })
})

describe('exactData and stringifyWithRaw', () => {
  it('gives decimal strings to INT64/UINT64 and numbers to other datatypes', () => {
    const data = [[new BigLiteral('9007199254740993'), 1]]
    expect(exactData(data, 'INT64')).toEqual([['9007199254740993', 1]])
    expect(exactData(data, 'FP64')).toEqual([[9007199254740992, 1]])
  })

  it('writes raw JSON in place of markers', () => {
    const raw = new Map([
      ['\u0000m0', '[9007199254740993,-1]'],
      ['\u0000m1', '[2]'],
    ])
    const s = stringifyWithRaw({ a: '\u0000m0', b: ['\u0000m1'], c: 'ok$&' }, raw)
    expect(s).toBe('{"a":[9007199254740993,-1],"b":[[2]],"c":"ok$&"}')
  })
})

describe('the one-pass digit scans agree with the regular expressions they replace', () => {
  it('maybeHugeNumber and hasLongDigits match /[eE]\\+?0*[1-9][0-9]{2}|[0-9]{309}/ and /\\d{16}/ on 20,000 random texts', () => {
    const huge = /[eE]\+?0*[1-9][0-9]{2}|[0-9]{309}/
    const long = /\d{16}/
    let seed = 7
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n
    const alphabet = ['0', '1', '9', '5', 'e', 'E', '+', '-', '.', ',', ' ', '"', 'x', '00', '1e308', '123456789012345', '9'.repeat(300)]
    let hits = 0
    for (let k = 0; k < 20_000; k++) {
      let t = ''
      for (let i = rnd(40); i > 0; i--) {
        t += alphabet[rnd(alphabet.length)]!
      }
      expect([t, maybeHugeNumber(t)]).toEqual([t, huge.test(t)])
      expect([t, hasLongDigits(t)]).toEqual([t, long.test(t)])
      hits += huge.test(t) ? 1 : 0
    }
    expect(hits).toBeGreaterThan(100) // both answers were exercised
    const edges = ['9'.repeat(308), '9'.repeat(309), `x${'1'.repeat(15)}x`, '1'.repeat(16), '1e100', '1e099', '1E+0100', '1e+00099', '1e-400', '1e10', 'e', 'e1', 'e12', 'e123']
    for (const t of edges) {
      expect([t, maybeHugeNumber(t), hasLongDigits(t)]).toEqual([t, huge.test(t), long.test(t)])
    }
  })
})
