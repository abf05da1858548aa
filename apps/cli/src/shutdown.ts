/**
 * The one shutdown path of `serve`, `gateway` and `worker` (docs/reliability.md#graceful-shutdown).
 *
 * {@link installShutdown} is called first thing in a command, so a signal during startup exits at once
 * (nothing was accepted yet). Once the command has started it calls {@link Shutdown.ready} with its stop
 * steps; the first SIGTERM or SIGINT then runs them in order and exits 0, a second signal exits 1 at
 * once, and a stop that outlasts `limitMs` exits 1 (a hung close never keeps the process up).
 *
 * Started by npm (`npx cohort serve`, `npm exec`, `npm run`: npm sets `npm_command`), the process also
 * stops as on SIGTERM when its parent goes away: npm 11 exits on SIGTERM without passing the signal
 * to the `cohort` process, which would otherwise be re-parented and keep serving without a drain.
 * @module
 */

/** One step of a shutdown, run in order; a failing step is logged and the next one still runs. */
export interface StopStep {
  name: string
  run(): Promise<void>
}

export interface ShutdownOptions {
  /** stderr lines (default console.error). */
  log?: (line: string) => void
  /** Process exit (default process.exit); tests pass their own. */
  exit?: (code: number) => void
  /** Signals handled (default SIGTERM, SIGINT). */
  signals?: NodeJS.Signals[]
  /**
   * Stop when the parent process changes (re-parented: the parent exited), checked every
   * `parentPollMs` (default 500 ms). Default: on when npm started this process (`npm_command` set).
   */
  watchParent?: boolean
  parentPollMs?: number
  /** The parent's pid (default `process.ppid`); tests pass their own. */
  ppid?: () => number
}

export interface Shutdown {
  /** Arm the stop: `steps` run on the next signal, all of them within `limitMs`. */
  ready(steps: StopStep[], limitMs: number): void
  /** Run the stop as a signal would (idempotent); resolves with the exit code, before exiting. */
  readonly stop: (reason: string) => Promise<number>
}

/** Handle SIGTERM/SIGINT for this process from now on. */
export function installShutdown(options: ShutdownOptions = {}): Shutdown {
  const log = options.log ?? ((line: string) => console.error(line))
  const exit = options.exit ?? ((code: number) => process.exit(code))
  let armed: { steps: StopStep[]; limitMs: number } | undefined
  let stopping: Promise<number> | undefined

  const stop = (reason: string): Promise<number> => {
    if (stopping) {
      return stopping
    }
    if (!armed) {
      log(`cohort: ${reason} during startup, exiting`)
      stopping = Promise.resolve(0)
      return stopping
    }
    const { steps, limitMs } = armed
    log(`cohort: ${reason}, draining (at most ${limitMs} ms; a second signal exits now)`)
    stopping = new Promise<number>((resolve) => {
      const limit = setTimeout(() => {
        log(`cohort: shutdown still running after ${limitMs} ms, exiting`)
        resolve(1)
      }, limitMs)
      void (async () => {
        let code = 0
        for (const step of steps) {
          try {
            await step.run()
          } catch (e) {
            code = 1
            log(`cohort: ${step.name} failed while stopping: ${e instanceof Error ? e.message : String(e)}`)
          }
        }
        clearTimeout(limit)
        resolve(code)
      })()
    })
    return stopping
  }

  for (const sig of options.signals ?? ['SIGTERM', 'SIGINT']) {
    process.on(sig, () => {
      if (stopping) {
        log(`cohort: ${sig} again, exiting now`)
        exit(1)
        return
      }
      void stop(sig).then(exit)
    })
  }
  if (options.watchParent ?? process.env['npm_command'] !== undefined) {
    const ppid = options.ppid ?? (() => process.ppid)
    const first = ppid()
    const timer = setInterval(() => {
      if (ppid() !== first && !stopping) {
        clearInterval(timer)
        void stop(`parent process ${first} exited`).then(exit)
      }
    }, options.parentPollMs ?? 500)
    timer.unref()
  }
  return {
    ready(steps, limitMs) {
      armed = { steps, limitMs }
    },
    stop,
  }
}
