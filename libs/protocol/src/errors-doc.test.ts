// Keeps docs/errors.md in sync with the error registry, in both directions.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ERROR_CODES } from './errors.ts'

const DOC_URL = new URL('../../../docs/errors.md', import.meta.url)

interface Row {
  code: string
  status: number
  meaning: string
  when: string
  line: number
}

/** Split a Markdown table row into its trimmed cells (no escaped pipes are used in the doc). */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim())
}

/** The rows of the table under `## Codes` (up to the next `## ` heading). */
function codeRows(md: string): Row[] {
  const lines = md.split('\n')
  const start = lines.findIndex((l) => /^## Codes\s*$/.test(l))
  if (start < 0) {
    throw new Error('docs/errors.md has no "## Codes" section')
  }
  const rows: Row[] = []
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i]!
    if (line.startsWith('## ')) {
      break
    }
    if (!line.trim().startsWith('|')) {
      continue
    }
    const c = cells(line)
    if (c[0] === 'Code' || /^-+$/.test(c[0] ?? '')) {
      continue // header and separator
    }
    const m = /^`([A-Z][A-Z0-9_]*)`$/.exec(c[0] ?? '')
    if (!m) {
      throw new Error(`docs/errors.md line ${i + 1}: first cell must be a \`CODE\`, got ${JSON.stringify(c[0])}`)
    }
    rows.push({ code: m[1]!, status: Number(c[1]), meaning: c[2] ?? '', when: c[3] ?? '', line: i + 1 })
  }
  return rows
}

describe('docs/errors.md', () => {
  const md = readFileSync(DOC_URL, 'utf8')
  const rows = codeRows(md)
  const registry = Object.entries(ERROR_CODES)

  it('has a table with one row per code', () => {
    expect(rows.length).toBeGreaterThan(0)
    const seen = new Set<string>()
    for (const r of rows) {
      expect(seen.has(r.code), `${r.code} listed twice (line ${r.line})`).toBe(false)
      seen.add(r.code)
    }
  })

  it('documents every registry code with its HTTP status and meaning', () => {
    const byCode = new Map(rows.map((r) => [r.code, r]))
    const missing = registry.filter(([code]) => !byCode.has(code)).map(([code]) => code)
    expect(missing, 'codes missing from docs/errors.md').toEqual([])
    for (const [code, { status, doc }] of registry) {
      const r = byCode.get(code)!
      expect(r.status, `${code} status (line ${r.line})`).toBe(status)
      expect(r.meaning, `${code} meaning (line ${r.line})`).toBe(doc)
      expect(r.when.length, `${code} needs a "when Cohort produces it" cell (line ${r.line})`).toBeGreaterThan(10)
    }
  })

  it('lists no code that is not in the registry', () => {
    const extra = rows.filter((r) => !Object.hasOwn(ERROR_CODES, r.code)).map((r) => `${r.code} (line ${r.line})`)
    expect(extra, 'codes in docs/errors.md but not in ERROR_CODES').toEqual([])
    expect(rows.map((r) => r.code).sort()).toEqual(Object.keys(ERROR_CODES).sort())
  })

  it('describes the error body and Retry-After on NO_WORKER and OVERLOADED', () => {
    expect(md).toContain('{"error": ')
    expect(md).toMatch(/"code": "[A-Z_]+"/)
    const retry = md.slice(md.indexOf('## Retry-After'))
    expect(md.indexOf('## Retry-After')).toBeGreaterThan(0)
    expect(retry).toContain('`NO_WORKER`')
    expect(retry).toContain('`OVERLOADED`')
    for (const code of ['NO_WORKER', 'OVERLOADED']) {
      expect(ERROR_CODES[code as 'NO_WORKER' | 'OVERLOADED'].status).toBe(503)
    }
  })

  it('the parser rejects a malformed row and sees extra or missing codes', () => {
    const fake = [
      '## Codes',
      '| Code | HTTP status | Meaning | When |',
      '| --- | --- | --- | --- |',
      '| `BAD_REQUEST` | 400 | m | somewhere in the gateway |',
      '| `MADE_UP` | 418 | m | never, really, honestly |',
      '## Next',
      '| `IGNORED` | 200 | not in the Codes section | x |',
    ].join('\n')
    expect(codeRows(fake).map((r) => [r.code, r.status])).toEqual([
      ['BAD_REQUEST', 400],
      ['MADE_UP', 418],
    ])
    expect(() => codeRows('## Codes\n| BAD_REQUEST | 400 | m | w |')).toThrow(/first cell must be a `CODE`/)
    expect(() => codeRows('# nothing here')).toThrow(/no "## Codes" section/)
  })
})
