import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'

/** An Identity ONNX model (`in` -> `out`, `[batch, features]` FP32) written to a fresh temp folder; its path. */
export function identityModelFile(features: number, prefix = 'cohort-identity-'): string {
  const path = join(mkdtempSync(join(tmpdir(), prefix)), 'identity.onnx')
  writeFileSync(
    path,
    model(
      graph({
        name: 'id',
        inputs: [valueInfo('in', 'FP32', ['batch', features])],
        outputs: [valueInfo('out', 'FP32', ['batch', features])],
        nodes: [node('Identity', ['in'], ['out'])],
      }),
    ),
  )
  return path
}

/** The floor of the per-request counts: a bare node:http server that reads the body and answers `{"ok":true}`. */
export async function startFloorServer(): Promise<{ server: Server; port: number; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  return { server, port: (server.address() as AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) }
}
