import { spawn } from 'node:child_process'
import { COHORT_BIN, spawnCohort, type CliProcess } from '@cohort/test-support'

/**
 * Spawn `node [nodeFlags] cohort.js ...args`. Without node flags this is `spawnCohort`; with
 * them (e.g. `--cpu-prof`, which NODE_OPTIONS does not accept) it is an equivalent
 * {@link CliProcess} that passes the flags to node itself.
 */
export function spawnCohortWith(nodeFlags: string[], args: string[]): CliProcess {
  if (nodeFlags.length === 0) {
    return spawnCohort(args)
  }
  const proc = spawn(process.execPath, [...nodeFlags, COHORT_BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  const listeners = new Set<() => void>()
  const onData = (d: Buffer) => {
    out += d.toString()
    for (const l of [...listeners]) {
      l()
    }
  }
  proc.stdout.on('data', onData)
  proc.stderr.on('data', onData)
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)))
  return {
    proc,
    output: () => out,
    exited,
    waitFor(re, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const done = () => {
          clearTimeout(timer)
          listeners.delete(check)
          proc.off('exit', onExit)
        }
        const check = () => {
          const m = out.match(re)
          if (m) {
            done()
            resolve(m)
          }
        }
        const onExit = () => {
          done()
          reject(new Error(`process exited before ${re}:\n${out}`))
        }
        const timer = setTimeout(() => {
          done()
          reject(new Error(`timed out waiting for ${re} in:\n${out}`))
        }, timeoutMs)
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
