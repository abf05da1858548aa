import { CliError } from '../cli-error.ts'

/** `cohort bench`: placeholder until the benchmark lands. */
export async function benchCommand(_args: string[]): Promise<void> {
  throw new CliError('bench: not built yet')
}
