/**
 * A parsed JSON body as tests read it: field by field, every field checked by an assertion (typing
 * each route's answer here would duplicate the product's types in the harness).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
export type JsonBody = any

/** POST JSON and return status, headers and parsed body. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: JsonBody }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await r.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // keep text
  }
  return { status: r.status, headers: r.headers, body: parsed }
}

/** GET and parse JSON (or text). */
export async function getJson(url: string): Promise<{ status: number; body: JsonBody }> {
  const r = await fetch(url)
  const text = await r.text()
  try {
    return { status: r.status, body: JSON.parse(text) }
  } catch {
    return { status: r.status, body: text }
  }
}

/** Run `fn` over `items` with at most `n` in flight. */
export async function pool<T, R>(items: T[], n: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        out[i] = await fn(items[i]!, i)
      }
    }),
  )
  return out
}
