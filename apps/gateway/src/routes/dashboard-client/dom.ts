/** DOM helpers. No innerHTML anywhere: model names and worker ids come from the network. */

/** Attributes of {@link el} and {@link svg}: `text` sets textContent, `onclick` adds a listener, `style` assigns. */
export interface Attrs {
  text?: string | number | null | undefined
  onclick?: (e: MouseEvent) => void
  style?: Partial<CSSStyleDeclaration>
  [attr: string]: unknown
}

/** A child: nodes, text, nested lists; null, undefined and false are skipped. */
export type Child = Node | string | number | null | undefined | false | Child[]

const SVGNS = 'http://www.w3.org/2000/svg'

function setAttrs(e: Element, attrs: Attrs | null | undefined): void {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) {
      continue
    }
    if (k === 'text') {
      e.textContent = String(v)
    } else if (k === 'onclick') {
      e.addEventListener('click', v as EventListener)
    } else if (k === 'style') {
      Object.assign((e as HTMLElement).style, v)
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
  const e = document.createElementNS(SVGNS, tag) as SVGElement
  setAttrs(e, attrs)
  append(e, children)
  return e
}

/** The element with this id (the page's static skeleton has them all). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id)
  if (!e) {
    throw new Error(`dashboard: no #${id} in the page`)
  }
  return e as T
}

/** A small colour square. */
export function swatch(color: string): HTMLSpanElement {
  return el('span', { class: 'swatch', style: { background: color } })
}

/** Replace a panel's content with a centred note. */
export function empty(host: HTMLElement, text: string): void {
  host.replaceChildren(el('div', { class: 'empty', text }))
}
