import type { TransportMessage, TransportSubscription } from './types.ts'

/**
 * Consume a subscription with `for await`, calling `fn` per message. A throw from `fn` is passed to
 * `onError` and the loop goes on; a subscription that ends with an error (a NATS permissions
 * violation, a closed connection) is reported once and ends the loop without crashing the process.
 */
export async function consume(
  sub: TransportSubscription,
  fn: (m: TransportMessage) => unknown,
  onError: (e: unknown, m: TransportMessage | undefined) => void = (e) => console.error(e),
): Promise<void> {
  if (sub.listen) {
    return sub.listen((m) => {
      try {
        fn(m)
      } catch (e) {
        onError(e, m)
      }
    })
  }
  try {
    for await (const m of sub) {
      try {
        fn(m)
      } catch (e) {
        onError(e, m)
      }
    }
  } catch (e) {
    onError(e, undefined)
  }
}
