import { execFileSync } from 'node:child_process'
import { availableParallelism, cpus, loadavg } from 'node:os'

/** The machine a benchmark ran on, with the 1-minute load average at its start and end. */
export interface MachineInfo {
  cpu: string
  cores: number
  node: string
  platform: string
  loadAvg1m: [number, number]
}

/** The 1-minute load average now (NaN where the platform has none). */
export function load1m(): number {
  return loadavg()[0] ?? Number.NaN
}

/** {@link MachineInfo} of this machine; `loadAtStart` from {@link load1m} when the run began. */
export function machineInfo(loadAtStart: number): MachineInfo {
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: availableParallelism(),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    loadAvg1m: [loadAtStart, load1m()],
  }
}

/** `git describe`-like id of the code under test: short HEAD, `+dirty` with local changes. */
export function gitCommit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    return dirty ? `${head}+dirty` : head
  } catch {
    return 'unknown'
  }
}
