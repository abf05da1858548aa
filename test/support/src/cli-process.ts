import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { recordChild } from './process-guard.ts'

/** How long `exited` waits, after the child exits, for its output pipes to be read to the end, ms. */
const STDIO_WAIT_MS = 2_000

/** Path of the `cohort` entry script. */
export const COHORT_BIN = fileURLToPath(new URL('../../../apps/cli/bin/cohort.js', import.meta.url))

/**
 * The node flags of the `cohort` command: those its entry's shebang gives node
 * (`#!/usr/bin/env -S node <flags>`), so that `node <flags> <bin>` runs as `npx cohort` does. Read
 * from `bin` itself: another checkout's entry (a bench's `--base`) gives its own.
 */
export function cohortNodeFlags(bin: string = COHORT_BIN): string[] {
  const first = readFileSync(bin, 'utf8').split('\n', 1)[0] ?? ''
  const m = /^#!\S*env\s+-S\s+node\s+(.+)$/.exec(first)
  return m?.[1] === undefined ? [] : m[1].trim().split(/\s+/)
}

/** The node arguments that run `bin` as its command does: `[...cohortNodeFlags(bin), bin]`. */
export function cohortArgs(bin: string = COHORT_BIN): string[] {
  return [...cohortNodeFlags(bin), bin]
}

/** A subprocess under test (a `cohort` command, `npm start`, a process in a network namespace). */
export interface CliProcess {
  proc: ChildProcess
  /** Everything it printed so far (stdout + stderr; the tail only past `maxOutputChars`). */
  output(): string
  /** Wait until the output matches; rejects with the output on timeout or exit. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /** Send a signal and wait for exit (SIGKILL after `timeoutMs`); returns the exit code. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>
  exited: Promise<number | null>
}

export interface SpawnOptions {
  /** Added to the parent's environment. */
  env?: Record<string, string>
  cwd?: string
  /** Named in error messages (default the command). */
  label?: string
  /** Default of `waitFor`'s timeout, ms. @default 30000 */
  waitTimeoutMs?: number
  /** Output kept: past this many characters only the last half is kept. @default unlimited */
  maxOutputChars?: number
}

/** Spawn any command with its output collected: the one process helper of the tests and the bench. */
export function spawnProcess(command: string, args: string[], o: SpawnOptions = {}): CliProcess {
  const proc = spawn(command, args, {
    env: { ...process.env, ...o.env },
    ...(o.cwd ? { cwd: o.cwd } : {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  recordChild(proc.pid) // the suite's teardown fails the run if it outlives the tests (process-guard.ts)
  const label = o.label ?? command
  let out = ''
  const listeners = new Set<() => void>()
  const onData = (d: Buffer) => {
    out += d.toString()
    if (o.maxOutputChars !== undefined && out.length > o.maxOutputChars) {
      out = out.slice(-Math.floor(o.maxOutputChars / 2))
    }
    for (const l of [...listeners]) {
      l()
    }
  }
  proc.stdout.on('data', onData)
  proc.stderr.on('data', onData)
  // 'exit' can come before the last bytes the child wrote are read from its pipes (a line written
  // just before exit is then missing from `output()`): resolve at 'close' (pipes drained), or
  // STDIO_WAIT_MS after 'exit' when a grandchild keeps the pipes open.
  const exited = new Promise<number | null>((resolve) =>
    proc.once('exit', (code) => {
      const t = setTimeout(() => resolve(code), STDIO_WAIT_MS)
      proc.once('close', () => {
        clearTimeout(t)
        resolve(code)
      })
    }),
  )
  return {
    proc,
    output: () => out,
    exited,
    waitFor(re, timeoutMs = o.waitTimeoutMs ?? 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = out.match(re)
          if (m) {
            done()
            resolve(m)
          }
        }
        const timer = setTimeout(() => {
          done()
          reject(new Error(`${label}: timed out waiting for ${re} in:\n${out}`))
        }, timeoutMs)
        const onExit = () => {
          done()
          reject(new Error(`${label} exited before ${re}:\n${out}`))
        }
        const done = () => {
          clearTimeout(timer)
          listeners.delete(check)
          proc.off('exit', onExit)
        }
        listeners.add(check)
        proc.once('exit', onExit)
        check()
      })
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        return proc.exitCode
      }
      proc.kill(signal)
      const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
      const code = await exited
      clearTimeout(t)
      return code
    },
  }
}

/**
 * Spawn `node [nodeFlags] <the command's own flags> apps/cli/bin/cohort.js ...args`, as `npx cohort`
 * runs ({@link cohortArgs}; node flags such as `--cpu-prof`, which NODE_OPTIONS does not accept, go
 * to node itself).
 */
export function spawnCohort(args: string[], env: Record<string, string> = {}, nodeFlags: string[] = []): CliProcess {
  return spawnProcess(process.execPath, [...nodeFlags, ...cohortArgs(), ...args], { env, label: `cohort ${args[0] ?? ''}` })
}
