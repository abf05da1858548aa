/** An unbounded async FIFO consumed by one `for await` loop. */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  readonly #items: T[] = []
  #waiter: ((r: IteratorResult<T>) => void) | undefined
  #ended = false

  /** Add a value; ignored after end(). */
  push(v: T): boolean {
    if (this.#ended) {
      return false
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

  [Symbol.asyncIterator](): this {
    return this
  }
}
