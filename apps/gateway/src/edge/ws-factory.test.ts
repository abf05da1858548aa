import { afterEach, describe, expect, it, vi } from 'vitest'
import { fetchWebSocketFactory } from './ws-factory.ts'

/** A workerd-like accepted socket: addEventListener only. */
function fakeSocket() {
  const listeners = new Map<string, ((ev: unknown) => void)[]>()
  return {
    accepted: false,
    sent: [] as unknown[],
    closed: [] as unknown[],
    accept() {
      this.accepted = true
    },
    send(d: unknown) {
      this.sent.push(d)
    },
    close(code?: number, reason?: string) {
      this.closed.push([code, reason])
    },
    addEventListener(type: string, fn: (ev: unknown) => void) {
      listeners.set(type, [...(listeners.get(type) ?? []), fn])
    },
    emit(type: string, ev: unknown) {
      for (const fn of listeners.get(type) ?? []) {
        fn(ev)
      }
    },
  }
}

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('fetchWebSocketFactory', () => {
  it('upgrades over fetch, accepts, and delivers messages that arrived before onmessage was set', async () => {
    const ws = fakeSocket()
    const calls: [string, RequestInit | undefined][] = []
    vi.stubGlobal('fetch', (url: string, init?: RequestInit) => {
      calls.push([url, init])
      return Promise.resolve(Object.assign(new Response(null, { status: 200 }), { webSocket: ws }))
    })
    const { socket, encrypted } = await fetchWebSocketFactory('ws://127.0.0.1:4223')
    expect(calls[0]?.[0]).toBe('http://127.0.0.1:4223')
    expect(calls[0]?.[1]?.headers).toEqual({ Upgrade: 'websocket' })
    expect(ws.accepted).toBe(true)
    expect(encrypted).toBe(false)
    const info = new TextEncoder().encode('INFO {}\r\n').buffer
    ws.emit('message', { data: info })
    const got: unknown[] = []
    socket.onmessage = (ev) => got.push(ev.data)
    ws.emit('message', { data: 'second' })
    expect(got).toEqual([info, 'second'])
    socket.send(new Uint8Array([1]))
    expect(ws.sent).toHaveLength(1)
    let closeEv: unknown
    socket.onclose = (ev) => (closeEv = ev)
    ws.emit('close', { code: 1006, reason: 'gone', wasClean: false })
    expect(closeEv).toMatchObject({ reason: 'gone', wasClean: false })
    socket.close()
    expect(ws.closed).toEqual([[1000, '']])
  })

  it.each([
    ['the server does not upgrade', () => Promise.resolve(new Response('no', { status: 400 })), /websocket upgrade to wss:\/\/nats.example:443 failed with HTTP 400/],
    ['the connection is refused', () => Promise.reject(new Error('Network connection lost.')), /wss:\/\/nats.example:443: Network connection lost/],
  ])('reports an error and a close, as a browser socket does, when %s', async (_, f, msg) => {
    vi.stubGlobal('fetch', f)
    const { socket, encrypted } = await fetchWebSocketFactory('wss://nats.example:443')
    expect(encrypted).toBe(true)
    const events: [string, Event & { message?: string }][] = []
    socket.onerror = (ev) => events.push(['error', ev])
    socket.onclose = (ev) => events.push(['close', ev])
    await new Promise((r) => setTimeout(r, 10))
    expect(events.map(([t]) => t)).toEqual(['error', 'close'])
    expect(events[0]?.[1].message).toMatch(msg)
    expect(events[1]?.[1]).toMatchObject({ wasClean: false })
  })
})
