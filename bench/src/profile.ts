import { readFileSync, readdirSync } from 'node:fs'
import { basename, join } from 'node:path'

interface CpuProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
}

interface CpuProfile {
  nodes: CpuProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** One function's self time in a profile. */
export interface SelfTimeEntry {
  name: string
  selfMs: number
  percent: number
}

/** Self-time summary of one `.cpuprofile` (one thread of one process). */
export interface ProfileSummary {
  file: string
  totalMs: number
  top: SelfTimeEntry[]
}

function frameName(n: CpuProfileNode): string {
  const f = n.callFrame
  const fn = f.functionName || '(anonymous)'
  if (!f.url) {
    return fn
  }
  const url = f.url.replace(/^file:\/\//, '')
  const short = url.includes('node_modules') ? url.slice(url.lastIndexOf('node_modules') + 13) : basename(url)
  return `${fn} ${short}:${f.lineNumber + 1}`
}

/** Top `n` self-time functions of a V8 `.cpuprofile` file. */
export function summariseProfile(file: string, n = 12): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(p.nodes.map((x) => [x.id, x]))
  const self = new Map<string, number>()
  let total = 0
  p.samples.forEach((id, i) => {
    const us = p.timeDeltas[i] ?? 0
    const nodeOf = byId.get(id)
    const key = nodeOf ? frameName(nodeOf) : '(unknown)'
    self.set(key, (self.get(key) ?? 0) + us)
    total += us
  })
  const top = [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({ name, selfMs: us / 1000, percent: total ? (100 * us) / total : 0 }))
  return { file, totalMs: total / 1000, top }
}

/** Summaries of every `.cpuprofile` in `dir`, busiest first. */
export function summariseProfiles(dir: string, n = 12): ProfileSummary[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => summariseProfile(join(dir, f), n))
    .sort((a, b) => b.totalMs - a.totalMs)
}

/** Print profile summaries as plain text. */
export function printProfiles(title: string, summaries: ProfileSummary[]): void {
  console.log(`\n${title}`)
  for (const s of summaries) {
    console.log(`  ${basename(s.file)}  (${(s.totalMs / 1000).toFixed(1)} s sampled)`)
    for (const e of s.top) {
      console.log(`    ${e.percent.toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(7)} ms  ${e.name}`)
    }
  }
}
