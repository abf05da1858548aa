/**
 * A logger (the `Logger` port of @cohort/observability, structurally) that keeps every line with
 * its level, for tests that count log lines (a refusal writes none at `warn`).
 * @module
 */

/** One kept line. */
export interface KeptLine {
  level: 'debug' | 'info' | 'warn' | 'error'
  fields: Record<string, unknown>
  msg: string
}

/** A logger and the lines it kept. */
export function keptLogger(): {
  logger: { [K in KeptLine['level']]: (fields: Record<string, unknown>, msg: string) => void }
  lines: KeptLine[]
  count: (level: KeptLine['level']) => number
} {
  const lines: KeptLine[] = []
  const at = (level: KeptLine['level']) => (fields: Record<string, unknown>, msg: string) => {
    lines.push({ level, fields, msg })
  }
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, count: (l) => lines.filter((x) => x.level === l).length }
}
