import { readFileSync } from 'node:fs'
import { CliError } from './cli-error.ts'
import { GATEWAY_HELP, SERVE_HELP, WORKER_HELP, gatewayCommand, serveCommand, workerCommand } from './commands.ts'
import { ensureDemoModel } from './demo-model.ts'
import { topHelp } from './help.ts'

/** The version of this package (apps/cli/package.json). */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

/** `cohort help <command>` prints what `cohort <command> --help` would. */
const COMMAND_HELP: Record<string, () => Promise<string> | string> = {
  serve: () => SERVE_HELP,
  gateway: () => GATEWAY_HELP,
  worker: () => WORKER_HELP,
  bridge: async () => (await import('./bridge/command.ts')).BRIDGE_HELP,
}

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
    case '--version':
    case '-v':
    case 'version':
      console.log(`cohort ${version()}`)
      return
    case 'help': {
      const topic = rest[0]
      if (topic === 'bench') {
        const { benchCommand } = await import('./bench-forward.ts')
        return benchCommand(['--help'])
      }
      const h = topic === undefined ? undefined : COMMAND_HELP[topic]
      if (topic !== undefined && !h) {
        throw new CliError(`unknown command "${topic}" (try: cohort --help)`)
      }
      console.log(h ? await h() : topHelp(version()))
      return
    }
    case undefined:
    case '--help':
    case '-h':
      console.log(topHelp(version()))
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
