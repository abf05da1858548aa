import { inspect, parseArgs, type ParseArgsConfig } from 'node:util'
import { BATCHING_FIELDS, type BatchingKey } from '@cohort/batching'
import { CliError } from './cli-error.ts'

/** parseArgs with one-line errors. */
export function parse(
  args: string[],
  options: NonNullable<ParseArgsConfig['options']>,
  allowPositionals = false,
): { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] } {
  try {
    const r = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals })
    return { values: r.values, positionals: r.positionals }
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e)
    const unknown = /^Unknown option '([^']+)'/.exec(msg)
    throw new CliError(unknown ? `unknown option ${unknown[1]} (--help lists this command's options)` : msg)
  }
}

/** A flag's raw value as an error message quotes it: a string as given, anything else as Node prints it. */
export function shown(v: unknown): string {
  return typeof v === 'string' ? v : inspect(v)
}

/** A positive integer flag, or undefined. */
export function intFlag(name: string, v: unknown, min = 1): number | undefined {
  if (v === undefined) {
    return undefined
  }
  // Decimal digits only: Number() would also take "0x10", "1e3" and " 7".
  const n = typeof v === 'string' && /^-?[0-9]{1,15}$/.test(v) ? Number(v) : typeof v === 'number' ? v : Number.NaN
  if (!Number.isInteger(n) || n < min) {
    throw new CliError(`--${name} must be an integer >= ${min}, got "${shown(v)}"`)
  }
  return n
}

/** A non-negative number flag, or undefined. */
export function numFlag(name: string, v: unknown): number | undefined {
  if (v === undefined) {
    return undefined
  }
  const n = Number(v)
  if (!Number.isFinite(n) || n < 0) {
    throw new CliError(`--${name} must be a number >= 0, got "${shown(v)}"`)
  }
  return n
}

/**
 * A batching flag's number checked against `@cohort/batching`'s field table (the same bounds as
 * admin patches), or undefined when the flag is absent.
 */
export function batchingFlag(key: BatchingKey, n: number | undefined): number | undefined {
  const f = BATCHING_FIELDS[key]
  if (n !== undefined && !f.valid(n)) {
    throw new CliError(`--${f.flag ?? key} must be ${f.expect}, got "${n}"`)
  }
  return n
}
