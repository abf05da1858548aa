// Knob tables: parser options, help and frozen values from one row per knob; the door's renamed
// flag keeps its old name as an alias; help defaults come from the constants.
import { describe, expect, it } from 'vitest'
import { DEFAULT_REQUEST_TIMEOUT_MS } from '@cohort/gateway'
import { parse } from './args.ts'
import { DEFAULT_HTTP_PORT, DOOR_KNOBS, DOOR_OPTIONS, HTTP_KNOB_HELP, HTTP_KNOBS, HTTP_OPTIONS, httpKnobs } from './door-flags.ts'
import { knobGiven, knobHelp, knobOptions, knobValues, type KnobTable } from './knobs.ts'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_OPTIONS } from './commands.ts'

const opts = { ...HTTP_OPTIONS, ...DOOR_OPTIONS }

describe('knob tables', () => {
  it('values: flag, else env var, else the default; integers bounded; frozen', () => {
    expect(httpKnobs(parse([], opts).values)).toMatchObject({ host: '127.0.0.1', 'timeout-ms': DEFAULT_REQUEST_TIMEOUT_MS, 'no-worker-wait': false })
    expect(knobValues(HTTP_KNOBS, parse([], HTTP_OPTIONS).values, { PORT: '9000' }).port).toBe(9000)
    expect(knobValues(HTTP_KNOBS, parse(['--port', '0'], HTTP_OPTIONS).values, { PORT: '9000' }).port).toBe(0)
    expect(knobValues(HTTP_KNOBS, parse([], HTTP_OPTIONS).values, {}).port).toBe(DEFAULT_HTTP_PORT)
    expect(() => httpKnobs(parse(['--timeout-ms', '0'], opts).values)).toThrow(/--timeout-ms must be an integer >= 1/)
    expect(() => httpKnobs(parse(['--port', '0x10'], opts).values)).toThrow(/--port must be an integer >= 0/)
    expect(Object.isFrozen(httpKnobs(parse([], opts).values))).toBe(true)
  })

  it('help defaults come from the constants, not literals', () => {
    expect(HTTP_KNOB_HELP).toContain(`(default ${DEFAULT_REQUEST_TIMEOUT_MS})`)
    const t = knobHelp({ 'x-ms': { kind: 'int', arg: 'MS', default: 1234, help: ['a knob'] } })
    expect(t).toBe('  --x-ms MS              a knob (default 1234)')
  })

  it("--no-event-loop-lag-check is the door check's name; --no-front-door stays an alias of it", () => {
    expect(knobValues(DOOR_KNOBS, parse(['--no-front-door'], DOOR_OPTIONS).values)['no-event-loop-lag-check']).toBe(true)
    expect(knobValues(DOOR_KNOBS, parse(['--no-event-loop-lag-check'], DOOR_OPTIONS).values)['no-event-loop-lag-check']).toBe(true)
    expect(knobValues(DOOR_KNOBS, parse([], DOOR_OPTIONS).values)['no-event-loop-lag-check']).toBe(false)
    for (const o of [SERVE_OPTIONS, GATEWAY_OPTIONS]) {
      expect(Object.keys(o)).toEqual(expect.arrayContaining(['no-event-loop-lag-check', 'no-front-door', 'port', 'host', 'timeout-ms']))
    }
    expect(GATEWAY_HELP).toMatch(/--no-event-loop-lag-check\n[^\n]*event-loop-lag[\s\S]*Alias: --no-front-door/)
  })

  it('numbers, choices, checks, lists and aliases: each refusal names the flag as given', () => {
    const t = {
      'a-ms': { kind: 'number', arg: 'MS', default: 5, max: 100, help: ['a'] },
      mode: { kind: 'string', arg: 'M', choices: ['x', 'y'], default: 'x', help: ['b'] },
      even: { kind: 'int', arg: 'N', check: { valid: (n: unknown) => (n as number) % 2 === 0, expect: 'even' }, defaultText: 'none', help: ['c'] },
      key: { kind: 'list', arg: 'K', env: 'KEYS', help: ['d'] },
      'new-name': { kind: 'int', arg: 'N', aliases: ['old-name'], help: ['e'] },
    } as const satisfies KnobTable
    const o = knobOptions(t)
    const at = (args: string[], env: Record<string, string> = {}) => knobValues(t, parse(args, o).values, env)
    expect(at([])).toEqual({ 'a-ms': 5, mode: 'x', even: undefined, key: [], 'new-name': undefined })
    expect(knobGiven(t, parse([], o).values, {})['a-ms']).toBeUndefined()
    expect(at(['--a-ms', '2.5'])['a-ms']).toBe(2.5)
    expect(() => at(['--a-ms', '101'])).toThrow(/--a-ms must be at most 100/)
    expect(() => at(['--a-ms', 'x'])).toThrow(/--a-ms must be a number >= 0/)
    expect(() => at(['--mode', 'z'])).toThrow(/--mode must be one of x, y, got "z"/)
    expect(() => at(['--even', '3'])).toThrow(/--even must be even/)
    expect(at(['--key', 'a', '--key', 'b'], { KEYS: 'c, d' }).key).toEqual(['a', 'b', 'c', 'd'])
    expect(at(['--old-name', '4'])['new-name']).toBe(4)
    expect(() => at(['--old-name', '0'])).toThrow(/--old-name must be an integer >= 1/)
    expect(() => at(['--old-name', '4', '--new-name', '5'])).toThrow(/--new-name and its alias --old-name disagree/)
    expect(() => parse(['--nope', '1'], o)).toThrow(/unknown option --nope/)
    expect(knobHelp(t)).toContain('(default none)')
    expect(knobHelp(t)).toContain('(default $KEYS)')
    expect(knobHelp(t)).toContain('Alias: --old-name')
  })
})
