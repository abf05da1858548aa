/**
 * Knob tables, in the spirit of `BATCHING_FIELDS`: each knob of a process is one row (flag, env
 * var, default, bounds, help line), and the parser options, the help text and the validated,
 * frozen values all come from the table, so none of them can drift from the others.
 * @module
 */
import { CliError } from './cli-error.ts'
import { intFlag, shown } from './args.ts'

/** One knob: a flag, and where its value comes from when the flag is absent. */
export interface Knob {
  /** `int` decimal digits; `number` finite; `list` a repeatable string; `bool` a switch. */
  readonly kind: 'int' | 'number' | 'bool' | 'string' | 'list'
  /** The placeholder in help (`N`, `MS`, `H`). */
  readonly arg?: string
  /** Read when the flag is absent (before the default). */
  readonly env?: string
  /** The value when neither the flag nor the env var is given (from a named constant). */
  readonly default?: number | string
  /** Help's words for a default that is not one value ("none", "derived"); used when `default` is absent. */
  readonly defaultText?: string
  /** Smallest accepted number. @default 1 for `int`, 0 for `number` */
  readonly min?: number
  /** Largest accepted number. @default none */
  readonly max?: number
  /** The accepted strings, when only a few are. */
  readonly choices?: readonly string[]
  /** A further check of a parsed value, with what a valid one is (e.g. a `BATCHING_FIELDS` row). */
  readonly check?: { valid(v: unknown): boolean; readonly expect: string }
  /**
   * The help text, its lines (the first on the flag's line). `{default}` in a line is replaced by the
   * default; without one, ` (default …)` is appended to the last line.
   */
  readonly help: readonly string[]
  /** Older names accepted for the same knob (documented in help as aliases). */
  readonly aliases?: readonly string[]
}

/** A knob table: flag name -> knob. */
export type KnobTable = Readonly<Record<string, Knob>>

type ValueOf<K extends Knob> = K['kind'] extends 'bool'
  ? boolean
  : K['kind'] extends 'int' | 'number'
    ? number | undefined
    : K['kind'] extends 'list'
      ? readonly string[]
      : string | undefined

/** The values of a table as given: numbers, strings, booleans, or undefined when unset ({@link knobGiven}). */
export type KnobValues<T extends KnobTable> = Readonly<{ [K in keyof T]: ValueOf<T[K]> }>

/** A knob's value when defaults apply: a knob with a `default` always has one. */
type DefaultedValueOf<K extends Knob> = K extends { readonly default: number | string } ? Exclude<ValueOf<K>, undefined> : ValueOf<K>

/** The values of a table with its defaults ({@link knobValues}): undefined only for a knob without a default. */
export type KnobDefaults<T extends KnobTable> = Readonly<{ [K in keyof T]: DefaultedValueOf<T[K]> }>

/** `parseArgs` options of a table (aliases included). */
export function knobOptions(t: KnobTable): Record<string, { type: 'string' | 'boolean'; multiple?: true }> {
  const o: Record<string, { type: 'string' | 'boolean'; multiple?: true }> = {}
  for (const [flag, k] of Object.entries(t)) {
    for (const name of [flag, ...(k.aliases ?? [])]) {
      o[name] = k.kind === 'bool' ? { type: 'boolean' } : k.kind === 'list' ? { type: 'string', multiple: true } : { type: 'string' }
    }
  }
  return o
}

const COLUMN = 25

/** What help says the default is: `$ENV or X`, `X`, the default's words, or nothing. */
function defaultOf(k: Knob): string | undefined {
  const own = k.default !== undefined ? String(k.default) : k.defaultText
  if (k.env === undefined) {
    return own
  }
  return `$${k.env}${own !== undefined ? ` or ${own}` : ''}`
}

/** The help lines of a table, aligned as every command's help (defaults from the table). */
export function knobHelp(t: KnobTable): string {
  const out: string[] = []
  for (const [flag, k] of Object.entries(t)) {
    const head = `  --${flag}${k.arg ? ` ${k.arg}` : ''}`
    const dflt = defaultOf(k)
    const placed = k.help.some((l) => l.includes('{default}'))
    const lines = k.help.map((l) => l.replaceAll('{default}', dflt ?? 'none'))
    if (dflt !== undefined && !placed) {
      lines.push(`${lines.pop() ?? ''} (default ${dflt})`)
    }
    if (k.aliases?.length) {
      lines.push(`Alias: ${k.aliases.map((a) => `--${a}`).join(', ')} (the old name, still accepted)`)
    }
    // A flag too long for the column gets its text on the lines below.
    const inline = head.length <= COLUMN - 1
    if (!inline) {
      out.push(head)
    }
    lines.forEach((l, i) => out.push(i === 0 && inline ? `${head.padEnd(COLUMN - 1)} ${l}` : `${' '.repeat(COLUMN)}${l}`))
  }
  return out.join('\n')
}

/** One knob's value from its raw form, checked; a CliError names `name` (the flag as given). */
function parseKnob(name: string, k: Knob, raw: unknown): unknown {
  if (raw === undefined) {
    return undefined
  }
  let v: unknown
  if (k.kind === 'int') {
    v = intFlag(name, raw, k.min ?? 1)
  } else if (k.kind === 'number') {
    const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : Number.NaN
    if (!Number.isFinite(n) || n < (k.min ?? 0)) {
      throw new CliError(`--${name} must be a number${k.min === -Infinity ? '' : ` >= ${k.min ?? 0}`}, got "${shown(raw)}"`)
    }
    v = n
  } else {
    if (typeof raw !== 'string') {
      throw new CliError(`--${name} takes one value`)
    }
    if (k.choices && !k.choices.includes(raw)) {
      throw new CliError(`--${name} must be one of ${k.choices.join(', ')}, got "${raw}"`)
    }
    v = raw
  }
  if (typeof v === 'number' && k.max !== undefined && v > k.max) {
    throw new CliError(`--${name} must be at most ${k.max}, got "${shown(raw)}"`)
  }
  if (k.check && !k.check.valid(v)) {
    throw new CliError(`--${name} must be ${k.check.expect}, got "${shown(raw)}"`)
  }
  return v
}

/** A knob's value from the flag or one of its aliases (they must agree), else undefined. */
function givenValue(flag: string, k: Knob, v: Record<string, unknown>): unknown {
  let found: { name: string; value: unknown } | undefined
  for (const name of [flag, ...(k.aliases ?? [])]) {
    if (v[name] === undefined) {
      continue
    }
    const value = k.kind === 'bool' || k.kind === 'list' ? v[name] : parseKnob(name, k, v[name])
    if (found && JSON.stringify(found.value) !== JSON.stringify(value)) {
      throw new CliError(`--${found.name} and its alias --${name} disagree; give one`)
    }
    found ??= { name, value }
  }
  return found?.value
}

/** The values of a table (typed by the callers below, from the table's rows). */
function values(t: KnobTable, v: Record<string, unknown>, env: Record<string, string | undefined>, defaults: boolean): Readonly<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const [flag, k] of Object.entries(t)) {
    const given = givenValue(flag, k, v)
    if (k.kind === 'bool') {
      out[flag] = given === true
    } else if (k.kind === 'list') {
      const fromEnv =
        k.env !== undefined
          ? (env[k.env] ?? '')
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean)
          : []
      out[flag] = Object.freeze([...((given as string[] | undefined) ?? []), ...fromEnv])
    } else if (given !== undefined) {
      out[flag] = given
    } else if (k.env !== undefined && env[k.env] !== undefined && env[k.env] !== '') {
      out[flag] = parseKnob(flag, k, env[k.env])
    } else {
      out[flag] = defaults && k.default !== undefined ? parseKnob(flag, k, typeof k.default === 'number' && k.kind !== 'string' ? k.default : String(k.default)) : undefined
    }
  }
  return Object.freeze(out)
}

/**
 * The values of a table from parsed flags: the flag (or an alias), else its env var, else its
 * default; numbers checked against their bounds (a CliError names the flag as given). Frozen.
 */
export function knobValues<T extends KnobTable>(t: T, v: Record<string, unknown>, env: Record<string, string | undefined> = process.env): KnobDefaults<T> {
  return values(t, v, env, true) as KnobDefaults<T>
}

/**
 * As {@link knobValues}, but a knob neither flag nor env var gives is undefined: for options a
 * library defaults itself (its table row shows that library's constant, so help stays true).
 */
export function knobGiven<T extends KnobTable>(t: T, v: Record<string, unknown>, env: Record<string, string | undefined> = process.env): KnobValues<T> {
  return values(t, v, env, false) as KnobValues<T>
}

/** `{ [key]: value }` when value is defined, else `{}`: spread into options that default themselves. */
export function ifSet<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V }
}
