/**
 * Chat templates: how `/v1/chat/completions` turns `messages` into one prompt
 * (docs/generative.md#chat-template). A model names its template in `GenerativeInfo.chatTemplate`;
 * unnamed or unknown: `cohort-simple`.
 * @module
 */
import { CohortError } from '@cohort/protocol'

/** One chat message after validation. */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant'
  content: string
}

const ROLES = ['system', 'developer', 'user', 'assistant'] as const

/** `<role>: <content>\n` per message (developer as system), then `assistant:`. */
const cohortSimple = (ms: ChatMessage[]): string => ms.map((m) => `${m.role === 'developer' ? 'system' : m.role}: ${m.content}\n`).join('') + 'assistant:'

/** The templates the gateway knows, by name. */
export const CHAT_TEMPLATES: Record<string, (m: ChatMessage[]) => string> = {
  'cohort-simple': cohortSimple,
  /** ChatML (`<|im_start|>role\ncontent<|im_end|>\n`, then `<|im_start|>assistant\n`). */
  chatml: (ms) => ms.map((m) => `<|im_start|>${m.role === 'developer' ? 'system' : m.role}\n${m.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n',
}

/** The prompt of `messages` under the model's template (`cohort-simple` when it names none or one unknown here). */
export function applyChatTemplate(name: string | undefined, messages: ChatMessage[]): string {
  return (CHAT_TEMPLATES[name ?? ''] ?? cohortSimple)(messages)
}

/** Validate OpenAI `messages`: text content only (a string or `[{type: "text", text}]`). */
export function chatMessages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0) {
    throw new CohortError('BAD_REQUEST', 'messages must be a non-empty array of {role, content}')
  }
  return v.map((m: unknown, i) => {
    const o = m as { role?: unknown; content?: unknown } | null
    if (typeof o !== 'object' || o === null || !ROLES.includes(o.role as ChatMessage['role'])) {
      throw new CohortError('BAD_REQUEST', `messages[${i}].role must be one of ${ROLES.join(', ')}`)
    }
    let content: string
    if (typeof o.content === 'string') {
      content = o.content
    } else if (Array.isArray(o.content) && o.content.every((p: { type?: unknown; text?: unknown } | null) => p?.type === 'text' && typeof p.text === 'string')) {
      content = o.content.map((p: { text: string }) => p.text).join('')
    } else {
      throw new CohortError('BAD_REQUEST', `messages[${i}].content must be a string or an array of {type: "text", text} parts`)
    }
    return { role: o.role as ChatMessage['role'], content }
  })
}
