import { BATCH_SIZE_BUCKETS, DURATION_BUCKETS_S, type Registry } from './registry.ts'

/** The gateway's request metrics. */
export function gatewayMetrics(r: Registry) {
  return {
    requests: r.counter('cohort_requests_total', 'HTTP inference requests by model and result code.'),
    duration: r.histogram('cohort_request_duration_seconds', 'End-to-end HTTP inference request duration.', DURATION_BUCKETS_S),
    info: r.gauge('cohort_gateway_info', 'Always 1; the gateway id of each gateway in this process (HTTP, gRPC) in the gateway label.'),
    doorRefusals: r.counter(
      'cohort_door_refusals_total',
      "Inference requests refused at the gateway's door before their body was read (503 OVERLOADED, nothing sent to a worker), by model and check (event_loop_lag: the gateway's own event loop is later than the request's budget; arrival_wait: the request already waited its budget before the door saw it; worker_wait: no worker's queue-wait estimate meets its deadline within the admission margin; connections: a connection over the gateway's open-connections bound, answered at accept).",
    ),
    doorProbes: r.counter(
      'cohort_door_probes_total',
      'Requests the worker-wait check let through as probes although every estimate said they would be late (at most one per model every probeIntervalMs), by model.',
    ),
  }
}

/** The worker's batching and compute metrics. */
export function workerMetrics(r: Registry) {
  return {
    queue: r.histogram('cohort_queue_duration_seconds', 'Time an item waited in the worker queue before its batch started.', DURATION_BUCKETS_S),
    batchSize: r.histogram('cohort_batch_size', 'Items per executed batch.', BATCH_SIZE_BUCKETS),
    compute: r.histogram('cohort_compute_duration_seconds', 'Compute time per executed batch (predict or session.run, plus assembly).', DURATION_BUCKETS_S),
    items: r.counter('cohort_worker_items_total', 'Items answered by the worker, by model and code.'),
    dispatch: r.counter('cohort_batch_dispatch_total', 'Batches dispatched, by model and reason (idle, full, timer).'),
    queueDepth: r.gauge('cohort_queue_depth', 'Items queued in the worker, by model.'),
    backlog: r.gauge('cohort_queue_backlog_seconds', 'Estimated time to work off the items queued in the worker now (learned cost, executor slots), by model: a scaling signal.'),
    tenantItems: r.counter(
      'cohort_tenant_items_total',
      'Items answered by the worker, by model, tenant (the first 16 tenants seen by name, then _other; _anonymous without auth) and code.',
    ),
    tenantQueue: r.histogram(
      'cohort_tenant_queue_duration_seconds',
      'Time an item waited in the worker queue before its batch started, by model and tenant (bounded as cohort_tenant_items_total).',
      DURATION_BUCKETS_S,
    ),
    shed: r.counter(
      'cohort_shed_total',
      'Items answered without running, by model and reason (overloaded: queue full; admission: refused on arrival as late; deadline, doomed, cancelled, closed).',
    ),
    costA: r.gauge('cohort_cost_model_a_seconds', 'Learned fixed cost a of a batch, t(b) = a + c*b, by model.'),
    costC: r.gauge('cohort_cost_model_c_seconds', 'Learned per-item (per cost unit) cost c of a batch, by model.'),
    costSamples: r.gauge('cohort_cost_model_samples', 'Batches the cost model has learned from, by model.'),
    restarts: r.counter(
      'cohort_runner_restarts_total',
      'Runner threads or processes replaced, by model and reason (batch_timeout: a batch ran past its time limit; died: it exited or crashed).',
    ),
    batchCap: r.gauge('cohort_batch_cap', 'Largest batch the worker dispatches now, by model: the self-tuned cap (within [1, cohort_batch_limit]) or the fixed maxBatchSize.'),
    batchLimit: r.gauge('cohort_batch_limit', 'Hard cap of the batch size (maxBatchSize), by model.'),
    capChanges: r.counter(
      'cohort_batch_cap_changes_total',
      'Changes of the self-tuned batch cap, by model and reason (explore: batches kept filling it; throughput: the larger size served no more items/s; budget: a batch would not fit the latency budget; limit: maxBatchSize changed).',
    ),
    pending: r.gauge('cohort_pending_requests', 'Items accepted by the worker and not yet answered (queued plus running), by model.'),
  }
}

/** Metrics of the ONNX Runtime instances (sessions in threads or processes), by model and instance. */
export function ortMetrics(r: Registry) {
  return {
    busy: r.counter('cohort_ort_busy_seconds_total', 'Wall time ONNX Runtime instances spent on runs (hand-off to result), by model and instance.'),
    runs: r.counter('cohort_ort_runs_total', 'Runs (batches) an ONNX Runtime instance finished, by model, instance and result (ok, error).'),
    exits: r.counter('cohort_ort_exits_total', 'ONNX Runtime instances that died (thread or process exit), by model and instance.'),
    restarts: r.counter('cohort_ort_restarts_total', 'ONNX Runtime instances started again after they died, by model and instance.'),
    instances: r.gauge('cohort_ort_instances', 'ONNX Runtime instances by model and state (live, dead).'),
  }
}

/**
 * Metrics of generative models (continuous batching, docs/generative.md#metrics), by model: what the
 * worker records from its generators' watcher calls and gauges.
 */
export function generateMetrics(r: Registry) {
  return {
    ttft: r.histogram('cohort_generate_time_to_first_token_seconds', 'Time from a generation reaching the generator to its first sampled token, by model.', DURATION_BUCKETS_S),
    tpot: r.histogram(
      'cohort_generate_time_per_output_token_seconds',
      'Mean time between the tokens after the first of each ended generation with 2+ tokens, by model.',
      DURATION_BUCKETS_S,
    ),
    tokens: r.counter('cohort_generate_tokens_total', 'Tokens generated (sampled; usage.completion_tokens summed), by model.'),
    promptTokens: r.counter('cohort_generate_prompt_tokens_total', 'Prompt tokens of the generations ended, by model.'),
    finished: r.counter('cohort_generate_finished_total', 'Generations ended, by model and reason (stop, length, cancelled, error).'),
    running: r.gauge('cohort_generate_running_sequences', 'Sequences the generator runs now (prefilling or decoding), by model.'),
    waiting: r.gauge('cohort_generate_waiting_sequences', 'Sequences waiting for admission (new or preempted), by model.'),
    kvUsage: r.gauge('cohort_generate_kv_cache_usage_ratio', 'KV-cache tokens held by the running sequences over the KV budget (0-1), by model.'),
    kvTokens: r.gauge('cohort_generate_kv_cache_tokens', 'KV-cache tokens held by the running sequences, by model.'),
    kvBudget: r.gauge('cohort_generate_kv_cache_budget_tokens', 'KV-cache tokens the running sequences may hold together (kvBudgetTokens), by model.'),
    preemptions: r.counter('cohort_generate_preemptions_total', 'Sequences preempted when the KV budget ran out (KV dropped, recomputed later), by model.'),
  }
}

/** Typed handles of {@link generateMetrics}. */
export type GenerateMetrics = ReturnType<typeof generateMetrics>

/** Typed handles of {@link ortMetrics}. */
export type OrtMetrics = ReturnType<typeof ortMetrics>

/** Typed handles of {@link gatewayMetrics}. */
export type GatewayMetrics = ReturnType<typeof gatewayMetrics>
/** Typed handles of {@link workerMetrics}. */
export type WorkerMetrics = ReturnType<typeof workerMetrics>
