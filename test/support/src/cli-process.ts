import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** Path of the `cohort` entry script. */
export const COHORT_BIN = fileURLToPath(new URL('../../../apps/cli/bin/cohort.js', import.meta.url))

/** A `cohort` subprocess under test. */
export interface CliProcess {
  proc: ChildProcess
  /** Everything it printed so far (stdout + stderr). */
  output(): string
  /** Wait until the output matches; rejects with the output on timeout or exit. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /** Send a signal and wait for exit; returns the exit code. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>
  exited: Promise<number | null>
}

/** Spawn `node apps/cli/bin/cohort.js ...args`. */
export function spawnCohort(args: string[], env: Record<string, string> = {}): CliProcess {
  const proc = spawn(process.execPath, [COHORT_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const listeners = new Set<() => void>()
  const onData = (d: Buffer) => {
    out += d.toString()
    for (const l of listeners) {
      l()
    }
  }
  proc.stdout?.on('data', onData)
  proc.stderr?.on('data', onData)
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)))
  return {
    proc,
    output: () => out,
    exited,
    waitFor(re, timeoutMs = 30_000) {
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
          reject(new Error(`timed out waiting for ${re} in:\n${out}`))
        }, timeoutMs)
        const onExit = () => {
          done()
          reject(new Error(`process exited before ${re}:\n${out}`))
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
