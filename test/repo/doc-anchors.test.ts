// Every `docs/<file>.md#<anchor>` named in code, tests or docs (and every relative `file.md#anchor`
// link inside docs/ and README) points at a heading that exists: GitHub's heading slugs, computed
// the way GitHub does (lower case, punctuation dropped, spaces to dashes, -1/-2 for repeats).
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SKIP = new Set(['node_modules', '.git', 'dist', 'coverage', '.cache', '.venv'])

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    SKIP.has(e.name) ? [] : e.isDirectory() ? files(join(dir, e.name), ext) : ext.test(e.name) ? [join(dir, e.name)] : [],
  )
}

/** GitHub's slug of a heading's text. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/<[^>]+>/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The anchors of a markdown file: one per heading (outside code fences), repeats numbered. */
function anchors(md: string): Set<string> {
  const out = new Set<string>()
  const seen = new Map<string, number>()
  let fence = false
  for (const line of md.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) {
      fence = !fence
      continue
    }
    const m = fence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (m) {
      const s = slug(m[1]!)
      const n = seen.get(s) ?? 0
      seen.set(s, n + 1)
      out.add(n === 0 ? s : `${s}-${n}`)
    }
    for (const a of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) {
      out.add(a[1]!)
    }
  }
  return out
}

const cache = new Map<string, Set<string> | undefined>()
function anchorsOf(path: string): Set<string> | undefined {
  if (!cache.has(path)) {
    let md: string | undefined
    try {
      md = readFileSync(path, 'utf8')
    } catch {
      md = undefined
    }
    cache.set(path, md === undefined ? undefined : anchors(md))
  }
  return cache.get(path)
}

/** Every docs-folder markdown reference with an anchor in a file, and in markdown files every relative `x.md#anchor` link. */
function references(file: string): { target: string; anchor: string; line: number }[] {
  const text = readFileSync(file, 'utf8')
  const out: { target: string; anchor: string; line: number }[] = []
  text.split('\n').forEach((l, i) => {
    for (const m of l.matchAll(/(?<![\w/.-])((?:\.\.\/)*docs\/[\w./-]+\.md)#([\w-]+)/g)) {
      out.push({ target: join(ROOT, m[1]!.replace(/^(\.\.\/)+/, '')), anchor: m[2]!, line: i + 1 })
    }
    if (file.endsWith('.md')) {
      for (const m of l.matchAll(/\]\((?!https?:)([\w./-]*\.md)?#([\w-]+)\)/g)) {
        const target = m[1] === undefined ? file : join(file, '..', m[1])
        if (!/(^|\/)docs\//.test(m[1] ?? '') || m[1]!.startsWith('.')) {
          out.push({ target, anchor: m[2]!, line: i + 1 })
        }
      }
    }
  })
  return out
}

describe('doc anchors', () => {
  it('slugs as GitHub makes them', () => {
    expect(slug('Admission at the door')).toBe('admission-at-the-door')
    expect(slug('`cohort serve --grpc-port`: one gateway')).toBe('cohort-serve---grpc-port-one-gateway')
    expect(slug('Where the time goes (2026-11-30)')).toBe('where-the-time-goes-2026-11-30')
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n### b.c')]).toEqual(['a', 'a-1', 'bc'])
  })

  it('every docs/*.md#anchor named in code, tests and docs exists', () => {
    const scanned = [
      ...['apps', 'libs', 'bench', 'test', 'examples', 'scripts', 'infra'].flatMap((d) => files(join(ROOT, d), /\.(ts|mts|mjs|js|sh|md|ya?ml|json|py)$/)),
      ...files(join(ROOT, 'docs'), /\.md$/),
      join(ROOT, 'README.md'),
    ]
    const broken: string[] = []
    let checked = 0
    for (const f of scanned) {
      for (const r of references(f)) {
        checked++
        const a = anchorsOf(r.target)
        if (a === undefined) {
          broken.push(`${relative(ROOT, f)}:${r.line}: ${relative(ROOT, r.target)} does not exist (#${r.anchor})`)
        } else if (!a.has(r.anchor)) {
          broken.push(`${relative(ROOT, f)}:${r.line}: ${relative(ROOT, r.target)}#${r.anchor} is not a heading there`)
        }
      }
    }
    expect(checked).toBeGreaterThan(50)
    expect(broken).toEqual([])
  })
})
