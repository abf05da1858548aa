import { CliError } from './cli-error.ts'
import { GATEWAY_HELP, SERVE_HELP, WORKER_HELP, gatewayCommand, serveCommand, workerCommand } from './commands.ts'
import { ensureDemoModel } from './demo-model.ts'

const HELP = `cohort <command> [options]

Commands:
  serve        gateway + worker in one process (embedded; the quick start)
  gateway      the HTTP gateway, publishing requests to NATS
  worker       a worker serving models from NATS
  bench        benchmarks (see docs/benchmarks.md)
  bridge redis Redis Streams ingress: predictions queued in Redis, run on the workers
  demo-model   write the demo model and print its path

Run \`cohort <command> --help\` for a command's options.

${SERVE_HELP}

${GATEWAY_HELP}

${WORKER_HELP}`

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv
  switch (cmd) {
    case 'serve':
      return serveCommand(rest)
    case 'gateway':
      return gatewayCommand(rest)
    case 'worker':
      return workerCommand(rest)
    case 'bench': {
      const { benchCommand } = await import('./bench-forward.ts')
      return benchCommand(rest)
    }
    case 'bridge': {
      const { bridgeCommand } = await import('./bridge/command.ts')
      return bridgeCommand(rest)
    }
    case 'demo-model':
      console.log(ensureDemoModel())
      return
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(HELP)
      return
    default:
      throw new CliError(`unknown command "${cmd}" (try: cohort --help)`)
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  if (e instanceof CliError) {
    console.error(`cohort: ${e.message}`)
  } else {
    console.error(`cohort: ${e instanceof Error ? e.message : String(e)}`)
    if (process.env['COHORT_DEBUG']) {
      console.error(e)
    }
  }
  process.exit(1)
})
