import type { Datatype } from '@cohort/protocol'
import type { ItemTensor } from './types.ts'

/** True when `x` looks like an {@link ItemTensor}. */
export function isItemTensor(x: unknown): x is ItemTensor {
  if (typeof x !== 'object' || x === null) {
    return false
  }
  const t = x as Partial<ItemTensor>
  return typeof t.datatype === 'string' && Array.isArray(t.shape) && (ArrayBuffer.isView(t.data) || Array.isArray(t.data))
}

/** Make an item tensor (no batch dimension). */
export function itemTensor(datatype: Datatype, shape: number[], data: ArrayBufferView | string[]): ItemTensor {
  return { datatype, shape, data }
}

/**
 * Batch group of an ONNX stage item: its inputs' names, datatypes and shapes. Items of different
 * groups never share a batch.
 */
export function tensorGroupKey(item: unknown): string {
  if (typeof item !== 'object' || item === null) {
    return ''
  }
  const parts: string[] = []
  for (const k of Object.keys(item).sort()) {
    const t = (item as Record<string, unknown>)[k]
    if (isItemTensor(t)) {
      parts.push(`${k}:${t.datatype}[${t.shape.join(',')}]`)
    }
  }
  return parts.join('|')
}

/**
 * True when `a` and `b` are records of the same tensor names, in the same key order, with the
 * same datatypes and shapes (so {@link tensorGroupKey} gives both the same key), without building
 * the key. False does not mean the keys differ (key order may); callers then compute the key.
 */
export function sameTensorLayout(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return false
  }
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  if (ka.length !== kb.length) {
    return false
  }
  let i = 0
  for (const k of ka) {
    if (k !== kb[i++]) {
      return false
    }
    const ta = (a as Record<string, unknown>)[k]
    const tb = (b as Record<string, unknown>)[k]
    const ia = isItemTensor(ta)
    if (ia !== isItemTensor(tb)) {
      return false
    }
    if (!ia) {
      continue
    }
    const x = ta
    const y = tb as ItemTensor
    if (x.datatype !== y.datatype || x.shape.length !== y.shape.length) {
      return false
    }
    for (let d = 0; d < x.shape.length; d++) {
      if (x.shape[d] !== y.shape[d]) {
        return false
      }
    }
  }
  return true
}
