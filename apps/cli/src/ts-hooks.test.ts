import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'

// The hooks module is plain JavaScript that Node loads before any TypeScript (bin/cohort.js).
const HOOKS = new URL('../bin/ts-hooks.mjs', import.meta.url).href
const { load } = (await import(/* @vite-ignore */ HOOKS)) as {
  load: (url: string, context: object, next: (url: string, context: object) => Promise<unknown>) => Promise<{ format?: string; source?: string }>
}
const passThrough = (url: string) => Promise.resolve({ passedOn: url })

describe('cohort ts hooks', () => {
  it("compiles Cohort's own sources without keepNames' __name wrapper on every function", async () => {
    // A file with closures and classes: tsx (keepNames) wraps each one in __name(...).
    const url = new URL('../../../libs/transport/src/in-process.ts', import.meta.url).href
    const out = await load(url, {}, passThrough)
    expect(out.format).toBe('module')
    expect(out.source).toContain('class InProcessTransport')
    expect(out.source).not.toContain('__name(')
    // Source maps inline, so that stack traces name the .ts lines.
    expect(out.source).toContain('sourceMappingURL=data:application/json')
  })

  it('hands every other file to the next hook (tsx): users’ files, dependencies, examples', async () => {
    const others = [
      pathToFileURL('/tmp/user-project/predictor.ts').href,
      new URL('../../../node_modules/hono/dist/hono.js', import.meta.url).href,
      new URL('../../../examples/echo/predictor.ts', import.meta.url).href,
    ]
    for (const url of others) {
      expect(await load(url, {}, passThrough)).toEqual({ passedOn: url })
    }
  })

  it('compiles an installed @cohort package’s sources too', async () => {
    // The same rule inside node_modules/@cohort/<pkg>/src/ (a published install).
    const url = pathToFileURL('/srv/app/node_modules/@cohort/transport/src/in-process.ts').href
    // No such install here: the hook must try to read the file (and fail), not pass it on.
    await expect(load(url, {}, passThrough)).rejects.toThrow(/ENOENT/)
  })
})
