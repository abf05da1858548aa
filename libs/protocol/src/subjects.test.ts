import { describe, expect, it } from 'vitest'
import { isAcceptSubject, isInboxSubject } from './subject-guard.ts'
import { isValidVersion, modelFromToken, modelToken, subjects } from './subjects.ts'

describe('subjects of versions and dotted names (docs/protocol.md#subjects-and-who-may-publish-where)', () => {
  const s = subjects('cohort')

  it('keeps the v1 subjects of names without . or % exactly', () => {
    expect(s.infer('resnet')).toBe('cohort.infer.resnet')
    expect(s.overflow('resnet_v-2')).toBe('cohort.overflow.resnet_v-2')
    expect(s.meta('a')).toBe('cohort.meta.a')
    expect(s.cancel('a')).toBe('cohort.cancel.a')
    expect(s.queue('a')).toBe('cohort.q.a')
    expect(s.stage('tab', 'mlp')).toBe('cohort.stage.tab.mlp')
    expect(s.stageQueue('tab', 'mlp')).toBe('cohort.q.stage.tab.mlp')
  })

  it('writes a dotted name as one token, so it never spans tokens', () => {
    expect(s.infer('bert.base')).toBe('cohort.infer.bert%2Ebase')
    expect(s.infer('bert.base').split('.')).toHaveLength(3)
    expect(modelToken('a%b.c')).toBe('a%25b%2Ec')
    expect(s.stage('p.q', 'mlp')).toBe('cohort.stage.p%2Eq.mlp')
  })

  it('puts a version in its own token after the model token', () => {
    expect(s.infer('resnet', '2')).toBe('cohort.infer.resnet.2')
    expect(s.overflow('bert.base', '10')).toBe('cohort.overflow.bert%2Ebase.10')
    expect(s.meta('m', '3')).toBe('cohort.meta.m.3')
    expect(s.queue('m', '3')).toBe('cohort.q.m.3')
    // A dotted name and a versioned name never share a subject.
    expect(s.infer('m.2')).not.toBe(s.infer('m', '2'))
  })

  it('reads a token back to the name', () => {
    for (const name of ['resnet', 'bert.base', 'a%b.c', '%2E', 'x.y.z']) {
      expect(modelFromToken(modelToken(name))).toBe(name)
    }
  })

  it('accepts versions that are positive integers only', () => {
    for (const v of ['1', '2', '10', '123456']) {
      expect(isValidVersion(v), v).toBe(true)
    }
    for (const v of ['0', '01', '-1', '1.0', 'latest', '', '*', '>', '1 ']) {
      expect(isValidVersion(v), v).toBe(false)
    }
  })

  it('names the repository control subjects under the prefix', () => {
    expect(s.repository('index')).toBe('cohort.repo.index')
    expect(subjects('t.x').repository('load')).toBe('t.x.repo.load')
  })

  it('leaves the reply guards unchanged: a model token is no inbox or accept subject', () => {
    expect(isAcceptSubject(s.accept, s.infer('bert.base', '2'))).toBe(false)
    expect(isInboxSubject(s.infer('bert.base', '2'))).toBe(false)
  })
})
