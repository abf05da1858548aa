/**
 * A bound on how deeply a JSON value (a Cog input, an item) may nest, checked before anything
 * recursive (the msgpack encoder, schema checks) touches it: deeper values are refused with a
 * clear error instead of overflowing a stack.
 * @module
 */

/**
 * Deepest nesting of arrays and objects accepted in one input value: a scalar has depth 0, a
 * container 1 + the depth of its deepest child, so `[[1]]` has depth 2.
 */
export const MAX_VALUE_DEPTH = 64

/**
 * True when `v` nests arrays or objects more than `max` levels deep. Iterative (no recursion),
 * stops at the first container past `max`; typed arrays and other binary views count as scalars.
 */
export function deeperThan(v: unknown, max: number = MAX_VALUE_DEPTH): boolean {
  // Each entry: a container and how many containers enclose it.
  const stack: [object, number][] = []
  if (typeof v === 'object' && v !== null && !ArrayBuffer.isView(v)) {
    stack.push([v, 0])
  }
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [x, outer] = top
    if (outer + 1 > max) {
      return true
    }
    const children: unknown[] = Array.isArray(x) ? x : Object.values(x)
    for (const c of children) {
      if (typeof c === 'object' && c !== null && !ArrayBuffer.isView(c)) {
        stack.push([c, outer + 1])
      }
    }
  }
  return false
}
