import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { JsonBody } from './http.ts'

/** One webhook delivery as a receiver saw it. */
export interface Hook {
  /** The `x-cohort-webhook-event` header. */
  event: string
  body: JsonBody
}

/** A local HTTP server that records every webhook POSTed to it (always answers 200). */
export async function webhookReceiver(path = '/hook', host = '127.0.0.1'): Promise<{ url: string; got: Hook[]; server: Server }> {
  const got: Hook[] = []
  const server = createServer((req, res) => {
    let b = ''
    req.on('data', (d: Buffer) => (b += d.toString()))
    req.on('end', () => {
      got.push({ event: String(req.headers['x-cohort-webhook-event']), body: JSON.parse(b) })
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((r) => server.listen(0, host, r))
  return { url: `http://${host}:${(server.address() as AddressInfo).port}${path}`, got, server }
}
