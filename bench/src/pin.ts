import { execFileSync } from 'node:child_process'

/**
 * Pin `pid` to `cores` (a taskset list): every thread of the process, or with `thread: true` only
 * the thread whose id is `pid` (threads made later by a process inherit its mask). No-op for undefined.
 */
export function pin(pid: number | undefined, cores: string, o: { thread?: boolean } = {}): void {
  if (pid !== undefined) {
    execFileSync('taskset', [...(o.thread ? [] : ['-a']), '-p', '-c', cores, String(pid)], { stdio: 'ignore' })
  }
}
