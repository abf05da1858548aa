// Help in the git/docker layout: a short command list at the top, each command's own flags only
// (every flag it accepts, none it does not), grouped, with examples; --version from package.json.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { GATEWAY_HELP, GATEWAY_OPTIONS, SERVE_HELP, SERVE_OPTIONS, WORKER_HELP, WORKER_OPTIONS } from './commands.ts'
import { helpFlags, topHelp } from './help.ts'

const BIN = fileURLToPath(new URL('../bin/cohort.js', import.meta.url))
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version
/** Each test below that runs the binary starts node + tsx (seconds on a busy machine). */
const SPAWN_MS = 60_000
const cohort = (...args: string[]) => execFileSync(process.execPath, [BIN, ...args], { encoding: 'utf8' })

describe('cohort --help', () => {
  it('is a short list of the commands, not every flag', () => {
    const text = topHelp(VERSION)
    const commands = [
      ...text
        .split('Commands:\n')[1]!
        .split('\n\n')[0]!
        .matchAll(/^ {2}(\S+(?: redis)?)/gm),
    ].map((m) => m[1])
    expect(commands).toEqual(['serve', 'gateway', 'worker', 'bridge redis', 'bench', 'demo-model'])
    expect(text.split('\n').length).toBeLessThan(40)
    expect(text).not.toMatch(/--nats-user|--max-batch-size|--jwt-secret/)
  })

  it(
    'is what the binary prints, with --version from package.json',
    () => {
      expect(cohort('--help').trimEnd()).toBe(topHelp(VERSION))
      expect(cohort('--version').trim()).toBe(`cohort ${VERSION}`)
    },
    SPAWN_MS,
  )
})

const COMMANDS = [
  ['serve', SERVE_HELP, SERVE_OPTIONS, ['Model', 'Batching', 'Pipelines', 'HTTP', 'NATS', 'Security', 'Observability']],
  ['gateway', GATEWAY_HELP, GATEWAY_OPTIONS, ['HTTP', 'NATS', 'Security', 'Observability']],
  ['worker', WORKER_HELP, WORKER_OPTIONS, ['Model', 'Batching', 'Pipelines', 'NATS', 'Observability']],
] as const

describe.each(COMMANDS)('cohort %s --help', (name, help, options, groups) => {
  it('lists exactly the flags the command accepts (aliases named), each once', () => {
    const listed = helpFlags(help)
    expect(new Set(listed).size, `a flag listed twice in ${name} --help`).toBe(listed.length)
    // Older names still accepted are named in their flag's text ("Alias: --max-request-bytes").
    const aliases = [...help.matchAll(/Alias:\s+--([a-z0-9-]+)/g)].map((m) => m[1]!)
    expect([...listed, ...aliases].sort()).toEqual(Object.keys(options).sort())
  })

  it('groups them under headings in order, then examples of this command', () => {
    const headings = [...help.matchAll(/^([A-Z][A-Za-z ]+):$/gm)].map((m) => m[1])
    expect(headings).toEqual([...groups, 'Examples'])
    expect(help.startsWith(`usage: cohort ${name} `)).toBe(true)
    const examples = help.split('Examples:\n')[1]!.split('\n')
    expect(examples.length).toBeGreaterThan(0)
    for (const e of examples) {
      expect(e).toMatch(new RegExp(`^  cohort ${name}\\b`))
    }
  })
})

describe('worker-only flags', () => {
  it(
    'serve neither lists nor accepts --stage; the worker lists it',
    () => {
      expect(helpFlags(SERVE_HELP)).not.toContain('stage')
      expect(helpFlags(WORKER_HELP)).toContain('stage')
      expect(() => cohort('serve', 'examples/tabular', '--stage', 'mlp')).toThrow(/unknown option --stage/)
    },
    SPAWN_MS,
  )

  it(
    'serve lists --remote only as a NATS flag and refuses it without --nats',
    () => {
      expect(SERVE_HELP).toMatch(/--remote NAME[^\n]*\n[^\n]*needs NATS/)
      expect(() => cohort('serve', 'examples/tabular', '--remote', 'mlp')).toThrow(/give --nats URL too/)
    },
    SPAWN_MS,
  )
})

describe('cohort bench --help', () => {
  it(
    'lists every benchmark, pipeline included',
    () => {
      const text = cohort('bench', '--help')
      for (const b of ['policies', 'peers', 'pipeline DIR']) {
        expect(text).toMatch(new RegExp(`^  ${b} `, 'm'))
      }
    },
    SPAWN_MS,
  )
})
