import { writeFileSync } from 'node:fs'
import type { ParseArgsConfig } from 'node:util'
import { parse } from '@cohort/cli/args'
import { killLoadGenerators } from './wrk.ts'
import { load1m } from './run-info.ts'

/** Parsed flag values (`@cohort/cli/args`'s `parse`). */
export type BenchValues = Record<string, string | boolean | string[] | undefined>

/** What a running benchmark gets from {@link defineBenchCommand}. */
export interface BenchScope {
  /** The subcommand's arguments as given. */
  readonly args: string[]
  /**
   * Stop this on exit, on errors and on SIGINT/SIGTERM. Cleanups run most recent first, after the
   * load generators (wrk) are killed; a failing one does not stop the others.
   */
  track: (stop: () => Promise<unknown>) => void
  /** Forget a cleanup that already ran. */
  untrack: (stop: () => Promise<unknown>) => void
  /** A progress line on stderr, `bench: ` before it. */
  log: (m: string) => void
  /** ISO time the benchmark started (run info of its JSON). */
  readonly startedAt: string
  /** performance.now() at the start. */
  readonly t0: number
  /** The 1-minute load average at the start (`machineInfo(load0)`). */
  readonly load0: number
  /** Write `value` as JSON to `file` (`--out`), and say so on stderr unless `announce` is false. */
  writeJson: (file: string, value: unknown, announce?: boolean) => void
}

/** A benchmark subcommand for {@link defineBenchCommand}. */
export interface BenchCommand {
  /** Printed for `--help`. */
  help: string
  /** Flags (`--help`/`-h` is added). */
  options: NonNullable<ParseArgsConfig['options']>
  /** Takes positional arguments. @default false */
  positionals?: boolean
  /** Print the help instead of running for these positionals too (e.g. a missing DIR). */
  needsHelp?: (positionals: string[]) => boolean
  /** What the SIGINT/SIGTERM line says is being stopped. @default 'child processes' */
  stopping?: string
  run(values: BenchValues, positionals: string[], scope: BenchScope): Promise<void>
}

/**
 * The skeleton every benchmark subcommand shares: parses its flags with the shared `@cohort/cli/args`
 * parser, prints its help on `--help`, stops what it tracked (child processes, servers, temporary
 * directories) on exit, on errors and on SIGINT/SIGTERM (exit status 130), and writes `--out` JSON.
 */
export function defineBenchCommand(c: BenchCommand): (args: string[]) => Promise<void> {
  return async (args) => {
    const { values, positionals } = parse(args, c.options, c.positionals ?? false)
    if (values['help'] || c.needsHelp?.(positionals)) {
      console.log(c.help)
      return
    }
    const cleanups = new Set<() => Promise<unknown>>()
    const cleanUp = async () => {
      killLoadGenerators()
      for (const s of [...cleanups].reverse()) {
        cleanups.delete(s)
        try {
          await s()
        } catch {
          // A failing cleanup (thrown or rejected) does not stop the others.
        }
      }
    }
    const onSignal = (sig: NodeJS.Signals) => {
      console.error(`bench: ${sig}, stopping ${c.stopping ?? 'child processes'}...`)
      void cleanUp().finally(() => process.exit(130))
    }
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
    const log = (m: string) => console.error(`bench: ${m}`)
    const scope: BenchScope = {
      args,
      track: (s) => void cleanups.add(s),
      untrack: (s) => void cleanups.delete(s),
      log,
      startedAt: new Date().toISOString(),
      t0: performance.now(),
      load0: load1m(),
      writeJson: (file, value, announce = true) => {
        writeFileSync(file, JSON.stringify(value, null, 2) + '\n')
        if (announce) {
          log(`wrote ${file}`)
        }
      },
    }
    try {
      await c.run(values, positionals, scope)
    } finally {
      await cleanUp()
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
  }
}
