import { describe, expect, it } from 'vitest'
import { installShutdown } from './shutdown.ts'

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('installShutdown parent watch (npx cohort serve: npm exits on SIGTERM without passing it on)', () => {
  it('runs the stop steps once the parent pid changes, and exits 0', async () => {
    let parent = 100
    const ran: string[] = []
    const codes: number[] = []
    const lines: string[] = []
    const s = installShutdown({ signals: [], watchParent: true, parentPollMs: 5, ppid: () => parent, exit: (c) => codes.push(c), log: (l) => lines.push(l) })
    s.ready(
      [
        {
          name: 'http',
          run: () => {
            ran.push('http')
            return Promise.resolve()
          },
        },
      ],
      1000,
    )
    await tick(30)
    expect(ran).toEqual([])
    parent = 1
    for (let i = 0; i < 100 && codes.length === 0; i++) {
      await tick(5)
    }
    expect(ran).toEqual(['http'])
    expect(codes).toEqual([0])
    expect(lines.join('\n')).toMatch(/parent process 100 exited, draining/)
  })

  it('does not watch when off', async () => {
    let parent = 100
    const codes: number[] = []
    const s = installShutdown({ signals: [], watchParent: false, parentPollMs: 5, ppid: () => parent, exit: (c) => codes.push(c), log: () => {} })
    s.ready([], 1000)
    parent = 1
    await tick(40)
    expect(codes).toEqual([])
  })
})
