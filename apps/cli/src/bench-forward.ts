import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { CliError } from './cli-error.ts'

/** The benchmarks live in the source checkout's `bench/` workspace, which depends on this CLI. */
const BENCH_BIN = fileURLToPath(new URL('../../../bench/bin/cohort-bench.js', import.meta.url))

/**
 * `cohort bench ...`: runs the bench workspace's entry in a child process (the bench depends on the
 * CLI, never the reverse), forwarding SIGINT/SIGTERM and its exit status.
 */
export async function benchCommand(args: string[]): Promise<void> {
  if (!existsSync(BENCH_BIN)) {
    throw new CliError('the benchmarks are part of the source checkout (git clone, then `npm run bench -- ...`)')
  }
  const child = spawn(process.execPath, [BENCH_BIN, ...args], { stdio: 'inherit' })
  const forward = (sig: NodeJS.Signals): void => {
    child.kill(sig)
  }
  process.on('SIGINT', forward)
  process.on('SIGTERM', forward)
  const code = await new Promise<number>((resolve) => {
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1)))
  })
  process.off('SIGINT', forward)
  process.off('SIGTERM', forward)
  if (code !== 0) {
    process.exit(code)
  }
}
