// Webhook delivery to a receiver that answers as Python's http.server does (HTTP/1.0, no
// Content-Length, the body ended only by closing the connection) and here never closes while the
// test runs: each event is done at its status line, so all three events of a prediction arrive, once
// each, without waiting for a close (a sender that waited would hit its per-attempt timeout and retry).
import { createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { newPrediction, WebhookSender } from '@cohort/predictions'

describe('webhook delivery', () => {
  const sockets: Socket[] = []
  const events: string[] = []
  const server = createServer((sock) => {
    sockets.push(sock)
    let buf = ''
    sock.on('data', (d) => {
      buf += d.toString('latin1')
      for (;;) {
        const head = buf.indexOf('\r\n\r\n')
        if (head < 0) return
        const len = Number(/content-length: *(\d+)/i.exec(buf.slice(0, head))?.[1] ?? 0)
        if (buf.length < head + 4 + len) return
        events.push(/x-cohort-webhook-event: *(\S+)/i.exec(buf.slice(0, head))?.[1] ?? '?')
        buf = buf.slice(head + 4 + len)
        sock.write('HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nok') // and the connection stays open
      }
    })
  })

  afterAll(() => {
    for (const s of sockets) s.destroy()
    server.close()
  })

  it('does not wait for an HTTP/1.0 receiver to close before sending the next event', async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
    const gaveUp: string[] = []
    // A per-attempt timeout longer than the test: a sender waiting for the close would never finish.
    const w = new WebhookSender({ timeoutMs: 60_000, onGiveUp: (_p, e, last) => gaveUp.push(`${e}: ${last}`) })
    const p = newPrediction({ id: 'p1', model: 'm', input: 1, webhook: url })
    w.send({ ...p, status: 'processing' }, 'start')
    w.send({ ...p, status: 'succeeded', output: 2 }, 'output')
    w.send({ ...p, status: 'succeeded', output: 2 }, 'completed')
    await w.idle()
    expect(gaveUp).toEqual([])
    expect(events).toEqual(['start', 'output', 'completed'])
    w.close()
  }, 30_000)
})
