/**
 * The logging port of the gateway and the worker: structured fields first, then a message, as pino
 * takes them (`logger.info({ requestId }, 'request failed')`). A pino logger is one; so is anything
 * with these four methods.
 */
export interface Logger {
  debug(fields: LogFields, msg: string): void
  info(fields: LogFields, msg: string): void
  warn(fields: LogFields, msg: string): void
  error(fields: LogFields, msg: string): void
}

/**
 * Fields of a log line. By convention: `requestId` (the envelope id), `traceId` (W3C, 32 hex),
 * `model`, `code` (error code), `status` (HTTP status), `workerId`, and `err` (an Error, which pino
 * serializes with its stack).
 */
export type LogFields = Record<string, unknown>

const noop = (): void => {}

/** Drops everything. */
export const noopLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop }

/**
 * The default when no logger is given: `error` lines go to `console.error` (as unexpected errors
 * always did), the other levels are dropped.
 */
export const consoleErrorLogger: Logger = {
  debug: noop,
  info: noop,
  warn: noop,
  error(fields, msg) {
    const { err, ...rest } = fields
    const extra = Object.keys(rest).length > 0 ? ` ${safeJson(rest)}` : ''
    if (err === undefined) {
      console.error(`cohort: ${msg}${extra}`)
    } else {
      console.error(`cohort: ${msg}${extra}`, err)
    }
  },
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v)
  } catch {
    return '[unserializable]'
  }
}
