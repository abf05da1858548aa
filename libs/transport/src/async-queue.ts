/** An unbounded async FIFO consumed by one `for await` loop. */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  readonly #items: T[] = []
  #waiter: ((r: IteratorResult<T>) => void) | undefined
  #ended = false
  #listener: ((v: T) => void) | undefined
  #onEnd: (() => void) | undefined
  /** Bumped by end(drop): values handed to the listener but not yet given to it are dropped. */
  #gen = 0

  /** Add a value; ignored after end(). */
  push(v: T): boolean {
    if (this.#ended) {
      return false
    }
    if (this.#listener) {
      this.#hand(v)
      return true
    }
    const w = this.#waiter
    if (w) {
      this.#waiter = undefined
      w({ value: v, done: false })
    } else {
      this.#items.push(v)
    }
    return true
  }

  /** End the iteration after the queued values (drain) or at once, dropping them (`drop`). */
  end(drop = false): void {
    this.#ended = true
    if (drop) {
      this.#items.length = 0
    }
    if (this.#listener) {
      if (drop) {
        this.#gen++
        this.#handed.length = 0
      }
      const done = this.#onEnd
      this.#onEnd = undefined
      if (done) {
        queueMicrotask(done) // after the values handed before it
      }
      return
    }
    const w = this.#waiter
    if (w && this.#items.length === 0) {
      this.#waiter = undefined
      w({ value: undefined, done: true })
    }
  }

  get ended(): boolean {
    return this.#ended
  }

  get size(): number {
    return this.#items.length
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#items.length > 0) {
      return Promise.resolve({ value: this.#items.shift() as T, done: false })
    }
    if (this.#ended) {
      return Promise.resolve({ value: undefined, done: true })
    }
    return new Promise((resolve) => {
      this.#waiter = resolve
    })
  }

  return(): Promise<IteratorResult<T>> {
    this.end(true)
    return Promise.resolve({ value: undefined, done: true })
  }

  /**
   * Hand each value to `fn` (in a microtask of its push) instead of to an iterator: no promise per
   * value (issue 28's budgets). For the queue's one consumer, in place of `for await`; values queued
   * before are handed first. Resolves once the queue ended, after the values handed by then (none
   * more once it ended with `drop`).
   */
  listen(fn: (v: T) => void): Promise<void> {
    return new Promise((resolve) => {
      this.#listener = fn
      for (const v of this.#items.splice(0)) {
        this.#hand(v)
      }
      if (this.#ended) {
        queueMicrotask(resolve)
      } else {
        this.#onEnd = resolve
      }
    })
  }

  /** Values handed since the last drain: one microtask hands them all, in order. */
  #handed: T[] = []
  #draining = false

  #hand(v: T): void {
    this.#handed.push(v)
    if (!this.#draining) {
      this.#draining = true
      // One microtask for every value handed in this turn (was one per value).
      queueMicrotask(this.#drain)
    }
  }

  readonly #drain = (): void => {
    this.#draining = false
    const vs = this.#handed
    this.#handed = []
    const fn = this.#listener // set before any value is handed, never unset
    const gen = this.#gen
    for (const v of vs) {
      if (gen !== this.#gen || fn === undefined) {
        return // ended with drop while handing
      }
      try {
        fn(v)
      } catch (e) {
        queueMicrotask(() => {
          throw e
        })
      }
    }
  };

  [Symbol.asyncIterator](): this {
    return this
  }
}
