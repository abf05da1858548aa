import { serve } from '@hono/node-server'
import type { Hono } from 'hono'
import type { AddressInfo } from 'node:net'
import { CliError } from './cli-error.ts'

/** A started HTTP server. */
export interface HttpServer {
  port: number
  host: string
  close(): Promise<void>
}

/** Serve a Hono app on host:port (port 0 = any free port). */
export function listen(app: Hono, host: string, port: number): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      let closing: Promise<void> | undefined
      resolve({
        port: info.port,
        host,
        close: () =>
          (closing ??= new Promise<void>((r) => {
            server.close(() => r())
            ;(server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.()
          })),
      })
    })
    server.on('error', (e: NodeJS.ErrnoException) =>
      reject(new CliError(e.code === 'EADDRINUSE' ? `port ${port} on ${host} is already in use` : e.message)),
    )
  })
}
