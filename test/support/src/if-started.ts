/**
 * A resource a `beforeAll` (or a test) starts, as the `afterAll` sees it: `await ifStarted(worker)?.stop()`.
 *
 * A test file declares what its `beforeAll` starts as `let worker: CliProcess`, the type its tests
 * see: vitest runs no test of the suite when `beforeAll` throws. Its `afterAll` runs all the same, to
 * stop what was started before the throw (or before a test failed), and there a resource not started
 * yet is still unset: `T | undefined` is its type there. So the `?.` that skips it is a real check, and
 * the resources after it are still stopped (no stray nats-server or cohort process).
 */
export function ifStarted<T>(value: T): T | undefined {
  return value
}

/** The resources of `values` that were started (see ifStarted): `await Promise.all(allStarted(worker, gateway).map((p) => p.stop()))`. */
export function allStarted<T>(...values: (T | undefined)[]): T[] {
  return values.filter((v) => v !== undefined)
}
