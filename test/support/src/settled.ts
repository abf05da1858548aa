/**
 * Resolves with `p`'s value when it settles within `ms`, or with `'pending'` after `ms`: the check
 * that work held by a gate is still in flight at a given moment (`=== 'pending'`), with no timing
 * assumption other than that an unheld promise would settle within `ms`. A rejection of `p` within
 * `ms` rejects.
 */
export async function settledWithin<T>(p: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<'pending'>((r) => {
    timer = setTimeout(() => r('pending'), ms)
  })
  try {
    return await Promise.race([p, late])
  } finally {
    clearTimeout(timer)
  }
}
