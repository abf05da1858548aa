/** DOM helpers. No innerHTML anywhere: model names and worker ids come from the network. */

/** Attributes of {@link el} and {@link svg}: `text` sets textContent, `onclick` adds a listener, `style` assigns. */
export interface Attrs {
  text?: string | number | null | undefined
  onclick?: (e: MouseEvent) => void
  style?: Partial<CSSStyleDeclaration>
  /** Any other attribute: its text (false, null and undefined leave it out). */
  [attr: string]: string | number | boolean | null | undefined | ((e: MouseEvent) => void) | Partial<CSSStyleDeclaration>
}

/** A child: nodes, text, nested lists; null, undefined and false are skipped. */
export type Child = Node | string | number | null | undefined | false | Child[]

const SVGNS = 'http://www.w3.org/2000/svg'

function setAttrs(e: Element, attrs: Attrs | null | undefined): void {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) {
      continue
    }
    if (typeof v === 'function') {
      e.addEventListener('click', v as EventListener) // `onclick`, the one function attribute
    } else if (typeof v === 'object') {
      Object.assign((e as HTMLElement).style, v) // `style`, the one object attribute
    } else if (k === 'text') {
      e.textContent = String(v)
    } else {
      e.setAttribute(k, String(v))
    }
  }
}

function append(e: Element, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) {
      continue
    }
    if (Array.isArray(c)) {
      append(e, c)
    } else {
      e.append(c instanceof Node ? c : document.createTextNode(String(c)))
    }
  }
}

/** An HTML element. */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag)
  setAttrs(e, attrs)
  append(e, children)
  return e
}

/** An SVG element. */
export function svg(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  const e = document.createElementNS(SVGNS, tag)
  setAttrs(e, attrs)
  append(e, children)
  return e
}

/** The element with this id (the page's static skeleton has them all), checked to be a `kind` when given. */
export function byId(id: string): HTMLElement
export function byId<T extends HTMLElement>(id: string, kind: new () => T): T
export function byId(id: string, kind?: new () => HTMLElement): HTMLElement {
  const e = document.getElementById(id)
  if (!e) {
    throw new Error(`dashboard: no #${id} in the page`)
  }
  if (kind && !(e instanceof kind)) {
    throw new Error(`dashboard: #${id} is not a ${kind.name}`)
  }
  return e
}

/** A small colour square. */
export function swatch(color: string): HTMLSpanElement {
  return el('span', { class: 'swatch', style: { background: color } })
}

/** Replace a panel's content with a centred note. */
export function empty(host: HTMLElement, text: string): void {
  host.replaceChildren(el('div', { class: 'empty', text }))
}
