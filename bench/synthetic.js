// Synthetic sharded models for the benchmarks, the examples and the tests: the shapes of real
// checkpoints (names, tensor counts, shard counts) with data made cheaply, so that a model of 163
// shards costs a few megabytes. Written by hand here (not with the library's writer), so a test that
// reads these files does not lean on the code it checks.

const encoder = new TextEncoder()

/**
 * The bytes of a SafeTensors file holding `tensors` in the given order, each with its `bytes`, or zeros
 * (BF16) without them.
 * @param {Array<{ name: string, dtype: string, shape: number[], bytes?: Uint8Array }>} tensors
 * @param {{ metadata?: Record<string, string> }} [options]
 */
export function safetensorsBytes(tensors, { metadata } = {}) {
  const header = metadata ? { __metadata__: metadata } : {}
  let offset = 0
  for (const t of tensors) {
    const length = t.bytes ? t.bytes.length : t.shape.reduce((a, b) => a * b, 2)
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + length] }
    offset += length
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - (json.length % 8)) % 8)
  const dataStart = 8 + json.length
  const file = new Uint8Array(dataStart + offset)
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true)
  encoder.encodeInto(json, file.subarray(8))
  for (const t of tensors) if (t.bytes) file.set(t.bytes, dataStart + header[t.name].data_offsets[0])
  return file
}

/** Tensor names in the order of a DeepSeek-V3 checkpoint: 3 dense layers, then mixture-of-experts layers of 256 experts. */
export function* deepseekNames() {
  yield 'model.embed_tokens.weight'
  for (let layer = 0; ; layer++) {
    const p = `model.layers.${layer}`
    for (const n of ['input_layernorm', 'post_attention_layernorm', 'self_attn.q_a_layernorm', 'self_attn.kv_a_layernorm']) yield `${p}.${n}.weight`
    for (const n of ['q_a_proj', 'q_b_proj', 'kv_a_proj_with_mqa', 'kv_b_proj', 'o_proj']) yield* quantized(`${p}.self_attn.${n}`)
    const mlp = (q) => ['gate_proj', 'up_proj', 'down_proj'].flatMap((n) => [...quantized(`${q}.${n}`)])
    if (layer < 3) {
      yield* mlp(`${p}.mlp`)
      continue
    }
    yield `${p}.mlp.gate.weight`
    yield `${p}.mlp.gate.e_score_correction_bias`
    for (let e = 0; e < 256; e++) yield* mlp(`${p}.mlp.experts.${e}`)
    yield* mlp(`${p}.mlp.shared_experts`)
  }
}

function* quantized(name) {
  yield `${name}.weight`
  yield `${name}.weight_scale_inv`
}

/**
 * A model of `tensors` tensors named like DeepSeek-V3 (91,280 in 163 shards by default), each a tiny
 * [2, 2] BF16 tensor: the index and the headers are as large as the real model's, the data is not.
 * Shards hold the tensors in model order; `layout: 'transformers'` lays each shard out by name and sorts
 * the index's keys, as safetensors and transformers write them. Returns the index text and the shard files by name.
 */
export function deepseekShaped({ shards = 163, tensors = 91_280, layout = 'model' } = {}) {
  const names = []
  for (const name of deepseekNames()) {
    if (names.length === tensors) break
    names.push(name)
  }
  const files = new Map()
  const weightMap = {}
  const perShard = Math.ceil(tensors / shards)
  for (let s = 0; s < shards; s++) {
    const file = `model-${String(s + 1).padStart(5, '0')}-of-${String(shards).padStart(6, '0')}.safetensors`
    const own = names.slice(s * perShard, (s + 1) * perShard)
    if (layout === 'transformers') own.sort(byCodePoints)
    for (const name of own) weightMap[name] = file
    files.set(
      file,
      safetensorsBytes(
        own.map((name) => ({ name, dtype: 'BF16', shape: [2, 2] })),
        { metadata: { format: 'pt' } },
      ),
    )
  }
  const map = layout === 'transformers' ? Object.fromEntries(Object.entries(weightMap).sort(([a], [b]) => byCodePoints(a, b))) : weightMap
  return { index: JSON.stringify({ metadata: { total_size: tensors * 8 }, weight_map: map }, null, 2), files }
}

/** Python's and Rust's string order (these names are ASCII, where it is JavaScript's too). */
const byCodePoints = (/** @type {string} */ a, /** @type {string} */ b) => (a < b ? -1 : a > b ? 1 : 0)
