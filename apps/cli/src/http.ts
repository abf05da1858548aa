import { serve } from '@hono/node-server'
import type { Hono } from 'hono'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { CliError } from './cli-error.ts'

/** A started HTTP server. */
export interface HttpServer {
  port: number
  host: string
  close(): Promise<void>
}

/** PEM certificate and key for HTTPS. */
export interface TlsFiles {
  cert: string | Buffer
  key: string | Buffer
}

/** Serve a Hono app on host:port (port 0 = any free port); over HTTPS when `tls` is given. */
export function listen(app: Hono, host: string, port: number, tls?: TlsFiles): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    const https = tls ? { createServer: createHttpsServer, serverOptions: { cert: tls.cert, key: tls.key } } : {}
    let server: ReturnType<typeof serve>
    try {
      server = serve({ fetch: app.fetch, hostname: host, port, ...https }, onListening)
    } catch (e) {
      // A certificate that does not parse, or a key that does not match it.
      reject(new CliError(`cannot serve HTTPS with --tls-cert/--tls-key: ${e instanceof Error ? e.message : String(e)}`))
      return
    }
    function onListening(info: AddressInfo) {
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
    }
    server.on('error', (e: NodeJS.ErrnoException) =>
      reject(new CliError(e.code === 'EADDRINUSE' ? `port ${port} on ${host} is already in use` : e.message)),
    )
  })
}
