// Test hosts as Linux network namespaces on one machine: each host is a namespace with one veth link
// to a bridge that lives in a "switch" namespace; the test process (root namespace) is one more host
// on the same bridge, so it reaches every host by IP. Needs root and `ip` (iproute2). Nothing is
// skipped: when namespaces cannot be created, createNetwork throws and the suite fails.
//
// Names carry the creating process's pid (`chn<pid>x...`, links `cv<pid>-<n>`), so a sweep at start
// removes what a crashed earlier run left behind (namespaces and links of pids that are gone).
import { execFileSync } from 'node:child_process'

/** One test host: a network namespace with one address on the test bridge. */
export interface Host {
  readonly name: string
  /** The namespace (`ip netns exec <ns> ...`). */
  readonly ns: string
  readonly ip: string
  /** The host's link, as seen on the switch (`ip link set down` here cuts the host off). */
  readonly port: string
}

function ip(args: string[], ns?: string): string {
  const argv = ns ? ['-n', ns, ...args] : args
  try {
    return execFileSync('ip', argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (e) {
    const err = e as { stderr?: string; message: string }
    throw new Error(`ip ${argv.join(' ')} failed: ${err.stderr?.trim() || err.message}`)
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Remove namespaces and root-namespace links left by earlier runs whose process is gone. */
export function sweepStale(): string[] {
  const removed: string[] = []
  const list = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
  for (const line of list.split('\n')) {
    const ns = line.split(' ')[0] ?? ''
    const m = /^chn(\d+)x/.exec(ns)
    if (m && !alive(Number(m[1]))) {
      try {
        ip(['netns', 'del', ns])
        removed.push(ns)
      } catch {
        // Gone meanwhile.
      }
    }
  }
  const links = execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })
  for (const m of links.matchAll(/^\d+: (cv(\d+)-\w+)[@:]/gm)) {
    if (!alive(Number(m[2]))) {
      try {
        ip(['link', 'del', m[1]!])
        removed.push(m[1]!)
      } catch {
        // Gone with its peer.
      }
    }
  }
  return removed
}

/** The test network: a bridge, hosts on it, link control. close() removes everything (idempotent). */
export class Network {
  readonly hosts = new Map<string, Host>()
  readonly #id: string
  readonly #switch: string
  readonly #subnet: string
  /** The root namespace's address on the bridge (where the test process sits). */
  readonly clientIp: string
  #next = 2
  #closed = false

  private constructor(id: string, subnet: string) {
    this.#id = id
    this.#subnet = subnet
    this.#switch = `chn${id}xsw`
    this.clientIp = `${subnet}.1`
  }

  /** Create the bridge and attach the root namespace to it. Throws (never skips) when it cannot. */
  static create(): Network {
    sweepStale()
    const id = String(process.pid)
    const subnet = `10.213.${process.pid % 250}`
    const net = new Network(id, subnet)
    try {
      ip(['netns', 'add', net.#switch])
      ip(['link', 'add', 'br0', 'type', 'bridge'], net.#switch)
      ip(['link', 'set', 'br0', 'up'], net.#switch)
      net.#attach(undefined, `cv${id}-r`, `cv${id}-rp`, net.clientIp)
    } catch (e) {
      net.close()
      throw new Error(`cannot create test network namespaces (the netns suite needs root and iproute2): ${(e as Error).message}`)
    }
    return net
  }

  /** Add a host (its own namespace, address, link to the bridge). */
  addHost(name: string): Host {
    const n = this.#next++
    const ns = `chn${this.#id}x${name}`
    ip(['netns', 'add', ns])
    ip(['link', 'set', 'lo', 'up'], ns)
    const host: Host = { name, ns, ip: `${this.#subnet}.${n}`, port: `cv${this.#id}-${n}p` }
    this.#attach(ns, `cv${this.#id}-${n}`, host.port, host.ip)
    this.hosts.set(name, host)
    return host
  }

  host(name: string): Host {
    const h = this.hosts.get(name)
    if (!h) throw new Error(`no host ${name}`)
    return h
  }

  /** Cut a host off (its switch port down): packets are dropped, connections are not reset. */
  linkDown(name: string): void {
    ip(['link', 'set', this.host(name).port, 'down'], this.#switch)
  }

  /** Reconnect a host cut off by {@link linkDown}. */
  linkUp(name: string): void {
    ip(['link', 'set', this.host(name).port, 'up'], this.#switch)
  }

  /** argv prefix that runs a command inside a host. */
  exec(name: string): string[] {
    return ['ip', 'netns', 'exec', this.host(name).ns]
  }

  /** Remove every namespace and link of this network. Idempotent; never throws. */
  close(): void {
    if (this.#closed) return
    this.#closed = true
    for (const h of this.hosts.values()) {
      try {
        ip(['netns', 'del', h.ns])
      } catch {
        // Already gone.
      }
    }
    try {
      ip(['netns', 'del', this.#switch]) // takes the switch-side ends, and so the root link, with it
    } catch {
      // Already gone.
    }
    try {
      ip(['link', 'del', `cv${this.#id}-r`])
    } catch {
      // Gone with its peer.
    }
  }

  #attach(ns: string | undefined, inner: string, port: string, addr: string): void {
    ip(['link', 'add', inner, 'type', 'veth', 'peer', 'name', port])
    ip(['link', 'set', port, 'netns', this.#switch])
    ip(['link', 'set', port, 'master', 'br0'], this.#switch)
    ip(['link', 'set', port, 'up'], this.#switch)
    if (ns) {
      ip(['link', 'set', inner, 'netns', ns])
    }
    ip(['addr', 'add', `${addr}/24`, 'dev', inner], ns)
    ip(['link', 'set', inner, 'up'], ns)
  }
}
