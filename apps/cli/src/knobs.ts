/**
 * Knob tables, in the spirit of `BATCHING_FIELDS`: each knob of a process is one row (flag, env
 * var, default, bounds, help line), and the parser options, the help text and the validated,
 * frozen values all come from the table, so none of them can drift from the others.
 * @module
 */
import { CliError } from './cli-error.ts'
import { intFlag } from './args.ts'

/** One knob: a flag, and where its value comes from when the flag is absent. */
export interface Knob {
  readonly kind: 'int' | 'bool' | 'string'
  /** The placeholder in help (`N`, `MS`, `H`). */
  readonly arg?: string
  /** Read when the flag is absent (before the default). */
  readonly env?: string
  /** The value when neither the flag nor the env var is given (from a named constant). */
  readonly default?: number | string
  /** Smallest accepted integer. @default 1 */
  readonly min?: number
  /** The help text, its lines (the first on the flag's line; the default is appended to the last). */
  readonly help: readonly string[]
  /** Older names accepted for the same knob (documented in help as aliases). */
  readonly aliases?: readonly string[]
}

/** A knob table: flag name -> knob. */
export type KnobTable = Readonly<Record<string, Knob>>

/** The values of a table: numbers, strings, booleans, or undefined when unset without a default. */
export type KnobValues<T extends KnobTable> = Readonly<{ [K in keyof T]: T[K]['kind'] extends 'bool' ? boolean : T[K]['kind'] extends 'int' ? number | undefined : string | undefined }>

/** `parseArgs` options of a table (aliases included). */
export function knobOptions(t: KnobTable): Record<string, { type: 'string' | 'boolean' }> {
  const o: Record<string, { type: 'string' | 'boolean' }> = {}
  for (const [flag, k] of Object.entries(t)) {
    for (const name of [flag, ...(k.aliases ?? [])]) {
      o[name] = { type: k.kind === 'bool' ? 'boolean' : 'string' }
    }
  }
  return o
}

const COLUMN = 25

/** The help lines of a table, aligned as every command's help (defaults from the table). */
export function knobHelp(t: KnobTable): string {
  const out: string[] = []
  for (const [flag, k] of Object.entries(t)) {
    const head = `  --${flag}${k.arg ? ` ${k.arg}` : ''}`
    const lines = [...k.help]
    const dflt = k.env !== undefined ? `$${k.env}${k.default !== undefined ? ` or ${k.default}` : ''}` : k.default !== undefined ? String(k.default) : undefined
    if (dflt !== undefined) {
      lines[lines.length - 1] += ` (default ${dflt})`
    }
    if (k.aliases?.length) {
      lines.push(`Alias: ${k.aliases.map((a) => `--${a}`).join(', ')} (the old name, still accepted)`)
    }
    // A flag too long for the column gets its text on the lines below.
    const inline = head.length < COLUMN - 1
    if (!inline) {
      out.push(head)
    }
    lines.forEach((l, i) => out.push(i === 0 && inline ? `${head.padEnd(COLUMN - 1)} ${l}` : `${' '.repeat(COLUMN)}${l}`))
  }
  return out.join('\n')
}

/**
 * The values of a table from parsed flags: the flag (or an alias), else its env var, else its
 * default; integers checked against their bounds (a CliError names the flag). Frozen.
 */
export function knobValues<T extends KnobTable>(t: T, v: Record<string, unknown>, env: Record<string, string | undefined> = process.env): KnobValues<T> {
  const out: Record<string, unknown> = {}
  for (const [flag, k] of Object.entries(t)) {
    const given = [flag, ...(k.aliases ?? [])].map((n) => v[n]).find((x) => x !== undefined)
    if (k.kind === 'bool') {
      out[flag] = given === true
      continue
    }
    const raw = given ?? (k.env !== undefined ? env[k.env] : undefined) ?? (k.default !== undefined ? String(k.default) : undefined)
    if (k.kind === 'int') {
      out[flag] = intFlag(flag, raw, k.min ?? 1)
    } else {
      if (raw !== undefined && typeof raw !== 'string') {
        throw new CliError(`--${flag} takes one value`)
      }
      out[flag] = raw
    }
  }
  return Object.freeze(out) as KnobValues<T>
}
