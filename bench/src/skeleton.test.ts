import { afterEach, describe, expect, it, vi } from 'vitest'
import { defineBenchCommand } from './skeleton.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

describe('defineBenchCommand', () => {
  it('prints the help for --help (or when needsHelp says so) and does not run', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined)
    const run = vi.fn(() => Promise.resolve())
    const cmd = defineBenchCommand({ help: 'usage: x', options: { n: { type: 'string' } }, positionals: true, needsHelp: (p) => p.length !== 1, run })
    await cmd(['--help'])
    await cmd([])
    expect(log.mock.calls).toEqual([['usage: x'], ['usage: x']])
    expect(run).not.toHaveBeenCalled()
    await cmd(['DIR', '--n', '3'])
    expect(run).toHaveBeenCalledWith(expect.objectContaining({ n: '3' }), ['DIR'], expect.anything())
  })

  it('rejects an unknown flag with the shared parser error', async () => {
    await expect(defineBenchCommand({ help: '', options: {}, run: () => Promise.resolve() })(['--bogus'])).rejects.toThrow(/unknown option --bogus/)
  })

  it('runs tracked cleanups most recent first after a failing run, skipping untracked ones, and removes its signal handlers', async () => {
    const order: string[] = []
    const before = process.listenerCount('SIGINT')
    const cmd = defineBenchCommand({
      help: '',
      options: {},
      run: (_v, _p, s) => {
        const gone = () => Promise.resolve(order.push('untracked'))
        s.track(() => Promise.resolve(order.push('first')))
        s.track(gone)
        s.track(() => {
          order.push('second')
          return Promise.reject(new Error('a failing cleanup does not stop the others'))
        })
        s.untrack(gone)
        expect(process.listenerCount('SIGINT')).toBe(before + 1)
        return Promise.reject(new Error('boom'))
      },
    })
    await expect(cmd([])).rejects.toThrow('boom')
    expect(order).toEqual(['second', 'first'])
    expect(process.listenerCount('SIGINT')).toBe(before)
  })
})
