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
