import { describe, expect, it } from 'vitest'
import { Type } from '@cohort/predictor'
import { checkInput } from './schema.ts'

/** A predictor schema as it crosses the bus: plain JSON, TypeBox's kind markers gone. */
const plain = (s: unknown) => JSON.parse(JSON.stringify(s))

describe('gateway-side input check of async predictions', () => {
  const schema = plain(
    Type.Object({
      text: Type.String({ minLength: 1 }),
      times: Type.Integer({ default: 1, minimum: 1 }),
      tags: Type.Optional(Type.Array(Type.String(), { maxItems: 2 })),
      mode: Type.Union([Type.Literal('a'), Type.Literal('b')]),
    }),
  )

  it('accepts what the worker accepts (defaults applied, optional fields absent)', () => {
    expect(() => checkInput(schema, { text: 'hi', mode: 'a' })).not.toThrow()
    expect(() => checkInput(schema, { text: 'hi', times: 3, tags: ['x'], mode: 'b' })).not.toThrow()
  })

  it('throws INVALID_INPUT naming the first failing path, like the worker', () => {
    const cases: [unknown, RegExp][] = [
      [{ text: '', mode: 'a' }, /^item 0: \/text: /],
      [{ text: 'hi', times: 0, mode: 'a' }, /^item 0: \/times: /],
      [{ text: 'hi', tags: ['a', 'b', 'c'], mode: 'a' }, /^item 0: \/tags: /],
      [{ text: 'hi', mode: 'c' }, /^item 0: \/mode: /],
      [{ mode: 'a' }, /^item 0: \/text: /],
    ]
    for (const [input, re] of cases) {
      expect(() => checkInput(schema, input), JSON.stringify(input)).toThrow(re)
    }
  })

  it('lets unknown keywords through (the worker checks again)', () => {
    expect(() => checkInput({ type: 'object', properties: { x: { $ref: '#/x' } }, required: ['x'] }, { x: 42 })).not.toThrow()
    expect(() => checkInput(undefined, 'anything')).not.toThrow()
  })
})
