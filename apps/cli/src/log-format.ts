/**
 * `--log-format pretty|json`: JSON lines (the default, for log collectors) or one human line per
 * record (`12:00:01.123 INFO  worker started  models=[...]`) for a terminal.
 * @module
 */
import type { DestinationStream } from 'pino'
import { CliError } from './cli-error.ts'

export const LOG_FORMATS = ['json', 'pretty'] as const
export type LogFormat = (typeof LOG_FORMATS)[number]
/** The log format when neither --log-format nor $COHORT_LOG_FORMAT is given. */
export const DEFAULT_LOG_FORMAT: LogFormat = 'json'

/** The format from `--log-format`, else `COHORT_LOG_FORMAT`, else json. */
export function logFormat(v: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): LogFormat {
  const raw = (v['log-format'] as string | undefined) ?? env['COHORT_LOG_FORMAT'] ?? DEFAULT_LOG_FORMAT
  const f = raw.trim().toLowerCase()
  if (!(LOG_FORMATS as readonly string[]).includes(f)) {
    throw new CliError(`--log-format must be json or pretty, got "${raw}"`)
  }
  return f as LogFormat
}

const OMIT = new Set(['level', 'time', 'msg', 'service', 'pid'])

/** A log field as text: a string or number as is, nothing for a missing one, anything else as JSON. */
function fieldText(v: unknown): string {
  if (v === undefined || v === null) {
    return ''
  }
  return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v)
}

/** One JSON log line as a human line: time, level, component, message, then the other fields. */
export function prettyLine(json: string): string {
  let r: Record<string, unknown>
  try {
    r = JSON.parse(json) as Record<string, unknown>
  } catch {
    return json.trimEnd()
  }
  const time = typeof r['time'] === 'string' ? r['time'].slice(11, 23) : ''
  const level = fieldText(r['level']).toUpperCase().padEnd(5)
  const component = typeof r['component'] === 'string' ? `[${r['component']}] ` : ''
  const rest = Object.entries(r)
    .filter(([k]) => !OMIT.has(k) && k !== 'component')
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
  return `${time} ${level} ${component}${fieldText(r['msg'])}${rest.length ? '  ' + rest.join(' ') : ''}`
}

/** A pino destination writing {@link prettyLine}s through `write` (stderr by default). */
export function prettyDestination(write: (line: string) => void = (l) => process.stderr.write(l)): DestinationStream {
  return { write: (s: string) => write(prettyLine(s) + '\n') }
}
